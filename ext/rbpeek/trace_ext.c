/*
 * trace_ext.c - the Ruby extension rbpeek/trace_ext: RbPeek::Trace's
 * methods, from the recording side (trace.h) and the save (trace_save.h).
 * lib/rbpeek/trace.rb wraps them (argument checks, defaults, formats).
 */
#include <ruby.h>
#include <ruby/thread.h>

#include "trace.h"
#include "trace_save.h"

__attribute__((visibility("default"))) void Init_trace_ext(void)
{
	VALUE mRbPeek = rb_define_module("RbPeek");
	VALUE mTrace = rb_define_module_under(mRbPeek, "Trace");

	rbt_init();
	rb_define_module_function(mTrace, "_start", rbt_start, -1);
	rb_define_module_function(mTrace, "_clock_cost", rbt_clock_cost, 0);
	rb_define_module_function(mTrace, "_save", rbt_save, 2);
	rb_define_module_function(mTrace, "stop", rbt_stop, 0);
	rb_define_module_function(mTrace, "reset", rbt_reset, 0);
	rb_define_module_function(mTrace, "running?", rbt_running_p, 0);
	rb_define_module_function(mTrace, "stats", rbt_stats, 0);
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	rb_define_const(mTrace, "GVL_EVENTS", Qtrue);
#else
	rb_define_const(mTrace, "GVL_EVENTS", Qfalse);
#endif
}
