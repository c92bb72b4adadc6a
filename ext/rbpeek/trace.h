/*
 * trace.h - what the tracer's recording side (trace.c) hands to its writing
 * side (trace_write.c).
 *
 * The hot path stores 16-byte records: a cycle-counter timestamp and one
 * word holding a kind (the low 8 bits) and an argument (an interned method
 * id, a fiber key).  At save time trace.c copies the window of every
 * thread's ring, turns the method ids into labels, converts timestamps to
 * CLOCK_MONOTONIC nanoseconds, adds the kernel streams' events (already
 * CLOCK_MONOTONIC, ktrace.h) and hands the lot to rbt_write(), which
 * rebuilds balanced slices per track and writes Perfetto protobuf or Chrome
 * JSON.  Nothing here touches Ruby objects, so the writer runs without
 * caring about the GC.
 */
#ifndef RBP_EXT_TRACE_H
#define RBP_EXT_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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

/* One thread's window, as copied out of its ring at save time. */
struct rbt_thread_window {
	pid_t tid;
	const char *name;       /* Ruby thread name or NULL; owned by the caller */
	int main;               /* the main thread */
	uint64_t root_fiber;    /* key of the fiber its first events ran on */
	uint64_t lost;          /* records the ring overwrote inside the window */
	struct rbt_rec *recs;   /* in time order; t already in ns */
	size_t n;
};

struct rbk_event;  /* ktrace.h */

/* Everything rbt_write() needs. */
struct rbt_trace {
	pid_t pid;
	const char *process_name;
	uint64_t start_ns, end_ns;       /* the window */
	struct rbt_thread_window *threads;
	size_t nthreads;
	const char *const *labels;       /* method id -> "Klass#meth" (NULL: unknown) */
	size_t nlabels;
	const struct rbk_event *kev;     /* kernel events (syscalls, scheduler), time order */
	size_t nkev;
};

enum rbt_format { RBT_PERFETTO, RBT_JSON };

/* Write the trace to f; 0, or -1 with errno set. */
int rbt_write(FILE *f, const struct rbt_trace *tr, enum rbt_format fmt);

#endif
