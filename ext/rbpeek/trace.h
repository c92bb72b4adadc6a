/*
 * trace.h - the tracer's recording side (trace.c): per-thread rings of
 * records (trace_rec.h), the method table, the hooks, and the calibration
 * of their clock, as the save (trace_save.c) reads them.
 *
 * Everything here but the GVL hook runs holding the GVL (see trace.c).
 */
#ifndef RBT_TRACE_H
#define RBT_TRACE_H

#include <stdint.h>
#include <sys/types.h>

#include <ruby.h>
#include <ruby/thread.h>

#include "ktrace.h"
#include "trace_rec.h"

/* One thread's ring. */
struct rbt_ring {
	struct rbt_rec *recs;    /* cap records, NULL when released */
	uint64_t mask;           /* cap - 1 */
	uint64_t head;           /* records ever written (next slot: head & mask) */
	uint64_t reset_head;     /* head at the last reset (window start) */
	uint64_t gen;            /* generation (start() call) it was set up in */
	pid_t tid;
	VALUE thread;            /* the Ruby Thread (marked), Qnil when unknown */
	uint64_t root_fiber;     /* fiber key of its first events */
	int dead;                /* its thread ended (thread-local pointer cleared) */
	int main;                /* the main thread */
	struct rbt_ring *next;
};

/* The method table: small id -> (owner, id); trace.c keeps the way back. */
struct rbt_method {
	VALUE klass;             /* owner (Qnil: unknown), marked */
	ID mid;                  /* method name (0: unknown); an immortal ID */
};

struct rbt_slot;         /* trace.c's: (owner, id) -> small id */

/* The recorder's state, one per process. */
struct rbt_state {
	int running;
	int use_tsc;             /* timestamps are TSC ticks */
	uint64_t gen;
	uint64_t cap;            /* records per ring (power of two) */
	int c_calls, blocks, gc, gvl;
	int null_hook;           /* benchmark: install a method hook that does nothing */
	struct rbk_trace *kt;    /* kernel streams (syscalls, scheduler), or NULL */
	char kt_why[256];        /* why they are off ("" when on or not asked for) */
	uint64_t reset_t;        /* time of the last reset (raw units) */
	uint64_t cal_t;          /* calibration: raw time ... */
	uint64_t cal_ns;         /* ... and CLOCK_MONOTONIC at start() */
	struct rbt_ring *rings;  /* newest first */
	struct rbt_slot *slots;  /* 1 << slot_bits slots */
	unsigned slot_bits;
	struct rbt_method *methods; /* methods[id - 1] */
	size_t nmethods, capmethods;
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	rb_internal_thread_event_hook_t *gvl_hook;
#endif
};

/* The recorder's state (for the save: read it holding the GVL). */
struct rbt_state *rbt_state(void);

/*
 * A (raw time, CLOCK_MONOTONIC ns) pair read as close together as we can;
 * raw time is the records' clock (TSC ticks or ns).
 */
void rbt_time_pair(uint64_t *t, uint64_t *ns);

/*
 * RbPeek::Trace's methods but save (Init_trace_ext defines them):
 * _start(buffer_size, c_calls, blocks, gc, gvl, kernel, null_hook), stop,
 * reset, _clock_cost, running?, stats.
 */
VALUE rbt_start(int argc, VALUE *argv, VALUE mod);
VALUE rbt_stop(VALUE mod);
VALUE rbt_reset(VALUE mod);
VALUE rbt_clock_cost(VALUE mod);
VALUE rbt_running_p(VALUE mod);
VALUE rbt_stats(VALUE mod);

/* Set up what does not wait for start(): the clock, GC marking, fork. */
void rbt_init(void);

#endif
