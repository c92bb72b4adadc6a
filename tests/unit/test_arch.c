/*
 * test_arch.c - the code decoders of src/proc/arch.h, both architectures on
 * any host, on the bytes of Debian 12's own libruby-3.1.so.3.1 (3.1.2):
 * ruby_vm_at_exit() and rb_sym_immortal_count() as objdump shows them.
 */
#include "proc/arch.h"

#include "harness.h"

/* bytes of little-endian A64 words */
#define W(x) (uint8_t)(x), (uint8_t)((x) >> 8), (uint8_t)((x) >> 16), (uint8_t)((x) >> 24)

int main(void)
{
	TEST("aarch64: ruby_vm_at_exit's GOT slot of ruby_current_vm_ptr") {
		/* 237760: adrp x1, 37f000; ldr x1, [x1, #3072]; stp ...; mov; stp; mov;
		 * ldr x20, [x1]  -- 0x37fc00 holds R_AARCH64_GLOB_DAT ruby_current_vm_ptr */
		const uint8_t code[] = { W(0x90000a41), W(0xf9460021), W(0xa9be7bfd), W(0x910003fd),
					 W(0xa90153f3), W(0xaa0003f3), W(0xd2800200), W(0xf9400034) };
		uint64_t out[4];
		CHECK_EQ_INT((int)rbp_aarch64_pcrel_loads(code, sizeof(code), 0x237760, out, 4), 1);
		CHECK(out[0] == 0x37fc00);
	}
	TEST("aarch64: rb_sym_immortal_count's load of global_symbols.last_id") {
		/* 1f8874: adrp x0, 380000; ldr w0, [x0, #384]; ret */
		const uint8_t code[] = { W(0x90000c40), W(0xb9418000), W(0xd65f03c0), W(0xd503201f) };
		uint64_t t = 0;
		CHECK_EQ_INT(rbp_aarch64_first_load(code, sizeof(code), 0x1f8874, &t), 0);
		CHECK(t == 0x380180);
	}
	TEST("aarch64: after bti c and paciasp; a page back; add completes too") {
		uint64_t t = 0;
		/* adrp x3 with imm = -1 page: immlo=3, immhi=0x7ffff */
		const uint8_t neg[] = { W(0xd503245f), W(0xd503233f), W(0xf0ffffe3), W(0xf9400863) };
		CHECK_EQ_INT(rbp_aarch64_first_load(neg, sizeof(neg), 0x10008, &t), 0);
		CHECK(t == 0xf000 + 16);
		/* adrp x2, +1 page; add x2, x2, #0x20 */
		const uint8_t add[] = { W(0xb0000002), W(0x91008042) };
		uint64_t out[2];
		CHECK_EQ_INT((int)rbp_aarch64_pcrel_loads(add, sizeof(add), 0x4000, out, 2), 1);
		CHECK(out[0] == 0x5020);
		/* an add is no load: first_load refuses it */
		CHECK_EQ_INT(rbp_aarch64_first_load(add, sizeof(add), 0x4000, &t), -1);
	}
	TEST("aarch64: no adrp, or a load from another register") {
		const uint8_t code[] = { W(0xd65f03c0), W(0x90000c40), W(0xb9418021) };   /* ret; adrp x0; ldr w1, [x1] */
		uint64_t out[2], t;
		CHECK_EQ_INT((int)rbp_aarch64_pcrel_loads(code, sizeof(code), 0, out, 2), 0);
		CHECK_EQ_INT(rbp_aarch64_first_load(code, sizeof(code), 0, &t), -1);
	}
	TEST("x86-64: ruby_vm_at_exit's GOT slot of ruby_current_vm_ptr") {
		/* 245c20: push %rbp; push %rbx; mov %rdi,%rbx; mov $0x10,%edi; sub $8,%rsp;
		 * mov 0x169053(%rip),%rax  -> 0x3aec88 */
		const uint8_t code[] = { 0x55, 0x53, 0x48, 0x89, 0xfb, 0xbf, 0x10, 0, 0, 0, 0x48, 0x83, 0xec, 0x08,
					 0x48, 0x8b, 0x05, 0x53, 0x90, 0x16, 0x00, 0x48, 0x8b, 0x28 };
		uint64_t out[4];
		CHECK_EQ_INT((int)rbp_x86_64_pcrel_loads(code, sizeof(code), 0x245c20, out, 4), 1);
		CHECK(out[0] == 0x3aec88);
	}
	TEST("x86-64: mov disp32(%rip),%eax after endbr64") {
		const uint8_t code[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0xc3, 0, 0, 0, 0, 0 };
		uint64_t t = 0;
		CHECK_EQ_INT(rbp_x86_64_first_load(code, sizeof(code), 0x1000, &t), 0);
		CHECK(t == 0x1000 + 10 + 0x10);
		CHECK_EQ_INT(rbp_x86_64_first_load(code + 4, 8, 0x1000, &t), -1);   /* too short */
	}
	return harness_report();
}
