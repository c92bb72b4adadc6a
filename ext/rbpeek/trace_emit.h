/*
 * trace_emit.h - the writer's state (trace_write.c replays the records,
 * trace_emit.c names the events and encodes them): event names as interned
 * ids, tracks, and the Perfetto protobuf or Chrome JSON output.
 *
 * Internal to the writer; its contract with the rest of the tracer is
 * trace_write.h.
 */
#ifndef RBT_TRACE_EMIT_H
#define RBT_TRACE_EMIT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "trace_write.h"
#include "util/hmap.h"
#include "util/pb.h"

/*
 * Fixed event names; iids N_* + 1.  Then method labels, block labels
 * ("block in ..."), syscall names (by number) and "running on CPU n".
 */
enum {
	N_UNKNOWN, N_GC, N_GC_MARK, N_GC_SWEEP, N_GC_MARKING, N_GC_SWEEPING,
	N_GVL_WAIT, N_GVL_RUN, N_GVL_RELEASED, N_LOST,
	N_RUNNABLE, N_SLEEPING, N_BLOCKED, N_STOPPED, N_DEAD, N_SWITCHED_OUT, NFIXED
};
#define NSYS 1024   /* syscall numbers with a name slot */
#define NCPU 1024   /* CPUs with a "running on CPU n" slot */

enum { EV_BEGIN = 1, EV_END = 2, EV_INSTANT = 3 };  /* TrackEvent.Type */
enum { F_METHOD, F_CFUNC, F_BLOCK, F_GC, F_SYSCALL }; /* frame kinds */

struct frame {
	uint8_t kind;
	uint64_t iid;
};

struct track {
	uint64_t uuid;
	int64_t jtid;             /* JSON tid */
	int written;              /* descriptor emitted */
};

struct fiber {
	uint64_t key;
	struct track tr;
	struct frame *st;         /* the stack */
	size_t n, cap;
	struct frame *pre;        /* frames entered before the window, innermost first */
	size_t npre, cappre;
};

/* One GC phase transition, from any thread. */
struct gc_mark {
	uint64_t ts;
	unsigned kind;
};

struct writer {
	FILE *f;
	enum rbt_format fmt;
	const struct rbt_trace *tr;
	int err;
	uint64_t next_uuid;
	struct rbp_pb out, pk, te, da;    /* output buffer, packet, event, annotation */
	uint8_t *used;                    /* iid -> used */
	size_t niids;
	char **block_names;               /* "block in X", made on demand */
	char *num_names[NSYS + NCPU];     /* "syscall N", "running on CPU n" */
	size_t *kidx;                     /* kernel events by (tid, time) */
	char **json_names;                /* iid -> quoted JSON string, made on demand */
	struct gc_mark *gc;
	size_t ngc, capgc;
	int first_json;
	/* the thread being replayed */
	const struct rbt_thread_window *w;
	struct track thread_tr, gvl_tr, sched_tr;
	struct fiber *fibers;
	size_t nfibers, capfibers;
	struct rbp_hmap fiber_idx;        /* key -> index + 1 */
};

/* An argument of an event (a Perfetto debug annotation, JSON args). */
struct ev_arg {
	const char *name;
	int64_t val;
};

/* --- event names as ids -------------------------------------------------- */

static inline uint64_t method_iid(const struct writer *wr, uint64_t id)
{
	return id && id < wr->tr->nlabels && wr->tr->labels[id] ? NFIXED + id + 1 : N_UNKNOWN + 1;
}

static inline uint64_t block_iid(const struct writer *wr, uint64_t id)
{
	return NFIXED + wr->tr->nlabels + id + 1;
}

static inline uint64_t sys_iid(const struct writer *wr, int64_t nr)
{
	return NFIXED + 2 * wr->tr->nlabels + 2 + (nr >= 0 && nr < NSYS ? (uint64_t)nr : NSYS - 1);
}

static inline uint64_t cpu_iid(const struct writer *wr, int cpu)
{
	return NFIXED + 2 * wr->tr->nlabels + 2 + NSYS + (cpu >= 0 && cpu < NCPU ? (uint64_t)cpu : NCPU - 1);
}

/* --- output (trace_emit.c) ------------------------------------------------- */

/* Write the output buffer to the file when it is large (or force). */
void rbt_out_flush(struct writer *wr, int force);
/* Append s to the output buffer. */
void rbt_out_str(struct writer *wr, const char *s);
/*
 * Describe a track before its first event.  thread_tid > 0: a thread track;
 * else a named child of parent (0: of the process track).
 */
void rbt_emit_track(struct writer *wr, struct track *t, uint64_t parent, pid_t thread_tid, const char *name);
/* One TrackEvent (EV_*), with an optional argument (on an end: of the slice). */
void rbt_emit(struct writer *wr, const struct track *t, uint64_t ts, int type, uint64_t iid,
	      const struct ev_arg *arg);
/* The first packets: clock snapshot, defaults, interned names (those wr->used marks), process. */
void rbt_emit_header(struct writer *wr);

#endif
