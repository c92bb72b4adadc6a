/*
 * test_merge.c - the rules that merge a native stack into a Ruby stack
 * (src/ruby/merge.c), on stacks shaped like those unwound from Debian's
 * Ruby 3.1 (stripped libruby) and a Ruby with full symbols.
 */
#include "harness.h"
#include "proc/native.h"
#include "ruby/internal.h"

#define LIB "/usr/lib/libruby.so"
#define EXT "/tmp/native_test.so"
#define LIBC "/usr/lib/libc.so.6"

/* Native frame: name, module, function start, named, module has .symtab. */
#define SYM(n, mod, st, nm, full) \
	((struct rbp_native_sym){ .name = n, .file = "", .module = mod, .start = st, \
				  .named = nm, .full_symbols = full })

static const struct rbp_frame ruby_stack[] = {   /* innermost first */
	{ .label = "NativeTest.spin", .kind = RBP_FRAME_CFUNC, .cfunc = 0x1000 },
	{ .label = "Work.deep", .kind = RBP_FRAME_RUBY },
	{ .label = "block in Work.run", .kind = RBP_FRAME_RUBY },
	{ .label = "NativeTest.call_back", .kind = RBP_FRAME_CFUNC, .cfunc = 0x2000 },
	{ .label = "Work.run", .kind = RBP_FRAME_RUBY },
	{ .label = "<main>", .kind = RBP_FRAME_RUBY },
};
#define N_RUBY (sizeof(ruby_stack) / sizeof(ruby_stack[0]))

static void owners(const struct rbp_native_sym *v, size_t n, long *out)
{
	const struct rbp_native_sym *p[32];
	for (size_t i = 0; i < n; i++)
		p[i] = &v[i];
	rv_merge_owners(LIB, ruby_stack, N_RUBY, p, n, out);
}

int main(void)
{
	TEST("stripped libruby: extension frames above their C methods, the rest folded") {
		struct rbp_native_sym v[] = {   /* innermost first, as unwound */
			SYM("ext_inner", EXT, 0x0f00, 1, 1),
			SYM("ext_outer", EXT, 0x1000, 1, 1),
			SYM("libruby.so+0x2697ab", LIB, 0x5000, 0, 0),   /* vm_call_cfunc */
			SYM("libruby.so+0x2790f1", LIB, 0x5100, 0, 0),   /* vm_exec_core */
			SYM("rb_yield", LIB, 0x5200, 1, 0),
			SYM("ext_yielder", EXT, 0x1f00, 1, 1),
			SYM("ext_call_back", EXT, 0x2000, 1, 1),
			SYM("libruby.so+0x2697ab", LIB, 0x5000, 0, 0),
			SYM("rb_vm_exec", LIB, 0x5300, 1, 0),
			SYM("ruby_run_node", LIB, 0x5400, 1, 0),
			SYM("__libc_start_main", LIBC, 0x9000, 1, 1),
		};
		long o[11], want[11] = { 0, 0, -1, -1, -1, 3, 3, -1, -1, -1, -1 };
		owners(v, 11, o);
		for (int i = 0; i < 11; i++)
			CHECK(o[i] == want[i]);
	}
	TEST("full symbols: libruby's own callees kept, plumbing folded, re-entry ends") {
		struct rbp_native_sym v[] = {
			SYM("pthread_cond_wait", LIBC, 0x9100, 1, 1),
			SYM("native_sleep", LIB, 0x6000, 1, 1),
			SYM("rb_thread_sleep_forever", LIB, 0x6100, 1, 1),   /* plumbing */
			SYM("ext_outer", EXT, 0x1000, 1, 1),
			SYM("vm_call_cfunc_with_frame", LIB, 0x5000, 1, 1),
			SYM("vm_exec_core", LIB, 0x5100, 1, 1),
			SYM("rb_vm_exec", LIB, 0x5300, 1, 1),
			SYM("rb_ensure", LIB, 0x5500, 1, 1),                 /* plumbing, owner kept */
			SYM("int_dotimes", LIB, 0x2000, 1, 1),               /* matched in libruby */
		};
		long o[9], want[9] = { 0, 0, -1, 0, -1, -1, -1, -1, 3 };
		owners(v, 9, o);
		for (int i = 0; i < 9; i++)
			CHECK(o[i] == want[i]);
	}
	TEST("an unnamed C method function in a stripped libruby is folded, its callees stay") {
		struct rbp_native_sym v[] = {
			SYM("ppoll", LIBC, 0x9200, 1, 1),
			SYM("libruby.so+0x211b48", LIB, 0x6200, 0, 0),
			SYM("rb_ensure", LIB, 0x5500, 1, 0),
			SYM("libruby.so+0xe62ca", LIB, 0x1000, 0, 0),   /* the C method (rb_f_select) */
		};
		long o[4], want[4] = { 0, -1, -1, -1 };
		owners(v, 4, o);
		for (int i = 0; i < 4; i++)
			CHECK(o[i] == want[i]);
	}
	TEST("a C method whose function is not on the native stack gets nothing") {
		struct rbp_native_sym v[] = {
			SYM("ext_inner", EXT, 0x0f00, 1, 1),
			SYM("libruby.so+0x2697ab", LIB, 0x5000, 0, 0),
			SYM("rb_yield", LIB, 0x5200, 1, 0),
			SYM("ext_call_back", EXT, 0x2000, 1, 1),
		};
		long o[4], want[4] = { -1, -1, -1, 3 };
		owners(v, 4, o);
		for (int i = 0; i < 4; i++)
			CHECK(o[i] == want[i]);
	}
	TEST("native recursion of a C method's function stays with that method") {
		struct rbp_native_sym v[] = {
			SYM("ext_outer", EXT, 0x1000, 1, 1),
			SYM("ext_outer", EXT, 0x1000, 1, 1),
		};
		long o[2];
		owners(v, 2, o);
		CHECK(o[0] == 0 && o[1] == 0);
	}
	TEST("no Ruby C frames: every native frame is left out") {
		static const struct rbp_frame r[] = { { .label = "<main>", .kind = RBP_FRAME_RUBY } };
		struct rbp_native_sym v[] = { SYM("ext_outer", EXT, 0x1000, 1, 1) };
		const struct rbp_native_sym *p[] = { &v[0] };
		long o[1];
		rv_merge_owners(LIB, r, 1, p, 1, o);
		CHECK(o[0] == -1);
	}
	return harness_report();
}
