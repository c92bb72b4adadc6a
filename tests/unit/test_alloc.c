/*
 * test_alloc.c - where rbpeek alloc probes an allocation function
 * (rbp_alloc_probe_point): the starts of the real functions of Debian's
 * Ruby builds (bytes copied from objdump of libruby 2.7.4, 3.1.2, 3.3.8),
 * and the cases where it must stay on the first instruction.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "ruby/alloc.h"

/* The probe offset for code (padded with int3), class in argument arg. */
static size_t point(const uint8_t *code, size_t n, uint8_t *arg)
{
	uint8_t buf[96];

	memset(buf, 0xcc, sizeof(buf));
	memcpy(buf, code, n < sizeof(buf) ? n : sizeof(buf));
	return rbp_alloc_probe_point(buf, sizeof(buf), arg);
}

int main(void)
{
	TEST("3.1 rb_ec_wb_protected_newobj_of: class moves from rsi to rdi, probe the je") {
		static const uint8_t code[] = {
			0x48, 0x89, 0xf8,             /* mov %rdi,%rax */
			0x48, 0x89, 0xf7,             /* mov %rsi,%rdi */
			0x48, 0x89, 0xd6,             /* mov %rdx,%rsi */
			0x4c, 0x8b, 0x40, 0x30,       /* mov 0x30(%rax),%r8 */
			0x4d, 0x85, 0xc0,             /* test %r8,%r8 */
			0x74, 0x04,                   /* je */
		};
		uint8_t arg = 1;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 16);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("2.7 rb_wb_protected_newobj_of: stack protector, loads, testw, jne") {
		static const uint8_t code[] = {
			0x48, 0x83, 0xec, 0x38,                               /* sub $0x38,%rsp */
			0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0,          /* mov %fs:0x28,%rax */
			0x48, 0x89, 0x44, 0x24, 0x28,                         /* mov %rax,0x28(%rsp) */
			0x48, 0x8b, 0x05, 0x47, 0x95, 0x27, 0x00,             /* mov 0x279547(%rip),%rax */
			0x48, 0x8b, 0x00,                                     /* mov (%rax),%rax */
			0x4c, 0x8b, 0x88, 0x80, 0x04, 0, 0,                   /* mov 0x480(%rax),%r9 */
			0x66, 0x41, 0xf7, 0x41, 0x10, 0xa0, 0x01,             /* testw $0x1a0,0x10(%r9) */
			0x75, 0x6c,                                           /* jne */
		};
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 42);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("2.7 rb_newobj_of: a 32-bit copy of the flags does not confuse it") {
		static const uint8_t code[] = {
			0x48, 0x83, 0xec, 0x38,                               /* sub $0x38,%rsp */
			0x48, 0x8b, 0x15, 0xc5, 0x93, 0x27, 0x00,             /* mov (%rip),%rdx */
			0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0,          /* mov %fs:0x28,%rax */
			0x48, 0x89, 0x44, 0x24, 0x28,                         /* mov %rax,0x28(%rsp) */
			0x89, 0xf0,                                           /* mov %esi,%eax */
			0x48, 0x83, 0xe6, 0xdf,                               /* and $-0x21,%rsi */
			0x48, 0x8b, 0x12,                                     /* mov (%rdx),%rdx */
			0x75, 0x00,                                           /* jne */
		};
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 34);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("3.3: endbr64, then push") {
		static const uint8_t code[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x54 };
		uint8_t arg = 1;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 4);
		CHECK_EQ_INT(arg, 1);
	}
	TEST("3.3 rb_class_allocate_instance: endbr64, two mov $imm, jmp") {
		static const uint8_t code[] = {
			0xf3, 0x0f, 0x1e, 0xfa,                   /* endbr64 */
			0xba, 0x01, 0x00, 0x00, 0x00,             /* mov $0x1,%edx */
			0xbe, 0x01, 0x20, 0x00, 0x00,             /* mov $0x2001,%esi */
			0xe9, 0x1d, 0xfe, 0xff, 0xff,             /* jmp */
		};
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 14);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("a push first: probe right there") {
		static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xf5 };
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 0);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("the class register overwritten: stay on the first instruction") {
		static const uint8_t code[] = {
			0x48, 0x8b, 0x3d, 0, 0, 0, 0,             /* mov (%rip),%rdi */
			0x74, 0x00,                               /* je */
		};
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 0);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("the class only in a register a sample does not carry: first instruction") {
		static const uint8_t code[] = {
			0x48, 0x89, 0xfb,                         /* mov %rdi,%rbx */
			0x31, 0xff,                               /* xor %edi,%edi */
			0x74, 0x00,                               /* je */
		};
		uint8_t arg = 0;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 0);
		CHECK_EQ_INT(arg, 0);
	}
	TEST("an instruction the decoder does not know: first instruction") {
		static const uint8_t code[] = {
			0x48, 0x83, 0xec, 0x18,                   /* sub $0x18,%rsp */
			0x0f, 0x05,                               /* syscall */
			0x74, 0x00,
		};
		uint8_t arg = 2;
		CHECK_EQ_INT(point(code, sizeof(code), &arg), 0);
		CHECK_EQ_INT(arg, 2);
	}
	return harness_report();
}
