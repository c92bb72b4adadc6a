/*
 * native_test.c - a tiny Ruby C extension for the --native tests
 * (tests/e2e/90-native.rb builds it with the target Ruby's gcc and headers).
 *
 *   NativeTest.spin(n)          ext_outer -> ext_inner, forever
 *   NativeTest.call_back { }    ext_call_back -> ext_yielder -> rb_yield
 *
 * The helpers are noinline/noclone (so each keeps its own frame and name)
 * and hidden (direct calls, no PLT stub between the frames).
 */
#include <ruby.h>

#define HELPER __attribute__((noinline, noclone, visibility("hidden")))

volatile unsigned long native_test_sink;

HELPER void ext_inner(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		native_test_sink += i;
	__asm__ volatile("" ::: "memory");
}

/* NativeTest.spin(n): never returns; the loop keeps ext_inner's caller live. */
HELPER VALUE ext_outer(VALUE self, VALUE n)
{
	unsigned long count = NUM2ULONG(n);

	for (;;)
		ext_inner(count);
	return Qnil;
}

HELPER VALUE ext_yielder(VALUE arg)
{
	VALUE r = rb_yield(arg);
	__asm__ volatile("" ::: "memory");   /* no tail call: keep this frame */
	return r;
}

/* NativeTest.call_back { ... }: yields through a helper of its own. */
HELPER VALUE ext_call_back(VALUE self)
{
	VALUE r = ext_yielder(self);
	__asm__ volatile("" ::: "memory");
	return r;
}

void Init_native_test(void)
{
	VALUE m = rb_define_module("NativeTest");
	rb_define_module_function(m, "spin", ext_outer, 1);
	rb_define_module_function(m, "call_back", ext_call_back, 0);
}
