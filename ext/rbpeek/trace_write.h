/*
 * trace_write.h - the tracer's writer: its contract with the side that
 * records (trace.c).
 *
 * At save time the recording side copies the window of every thread's
 * ring, turns the method ids into labels, converts timestamps to
 * CLOCK_MONOTONIC nanoseconds, adds the kernel streams' events (already
 * CLOCK_MONOTONIC, ktrace.h) and hands the lot to rbt_write(), which
 * rebuilds balanced slices per track and writes Perfetto protobuf or Chrome
 * JSON.  Nothing here touches Ruby objects, so the writer runs without
 * caring about the GC, and it is part of the tracer library (no Ruby
 * headers).
 */
#ifndef RBT_TRACE_WRITE_H
#define RBT_TRACE_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "trace_rec.h"

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

/*
 * Write the trace to f (trace_write.c).  RBP_OK, RBP_ENOMEM, or RBP_EIO
 * when writing to f failed (errno then says why, as the failed write or
 * flush left it).  Reads tr only; f stays open.
 */
int rbt_write(FILE *f, const struct rbt_trace *tr, enum rbt_format fmt);

#endif
