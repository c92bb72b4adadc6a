/*
 * trace_rec.h - the tracer's record: what the hot path (trace.c) stores in a
 * thread's ring and the writer (trace_write.h) replays.
 *
 * 16 bytes: a cycle-counter timestamp and one word holding a kind (the low
 * 8 bits) and an argument (an interned method id, a fiber key).
 */
#ifndef RBT_TRACE_REC_H
#define RBT_TRACE_REC_H

#include <stdint.h>

/*
 * Record kinds.  The first ones are the bit numbers of Ruby's event flags
 * (RUBY_EVENT_CALL is 0x8, so kind 3), which lets the hook compute the
 * kind with one count-trailing-zeros instruction.
 */
enum rbt_kind {
	RBT_CALL = 3,          /* arg: method id */
	RBT_RETURN = 4,        /* arg: method id (0 when unwinding) */
	RBT_C_CALL = 5,
	RBT_C_RETURN = 6,
	RBT_B_CALL = 8,        /* arg: id of the method the block is in */
	RBT_B_RETURN = 9,
	RBT_THREAD_END = 11,
	RBT_FIBER = 12,        /* arg: fiber key (object_id of the fiber now running) */
	RBT_GC_START = 22,     /* RUBY_INTERNAL_EVENT_GC_START etc. */
	RBT_GC_END_MARK = 23,
	RBT_GC_END_SWEEP = 24,
	RBT_GC_ENTER = 25,
	RBT_GC_EXIT = 26,
	RBT_GVL_READY = 40,    /* wants the GVL (3.2+) */
	RBT_GVL_RESUMED = 41,  /* got it */
	RBT_GVL_SUSPENDED = 42 /* released it */
};

#define RBT_REC(kind, arg) ((uint64_t)(arg) << 8 | (uint64_t)(kind))
#define RBT_KIND(v) ((unsigned)((v) & 0xff))
#define RBT_ARG(v) ((v) >> 8)

struct rbt_rec {
	uint64_t t;  /* cycle counter (or CLOCK_MONOTONIC ns without one) */
	uint64_t v;  /* RBT_REC(kind, arg) */
};

#endif
