/*
 * profile.h - a recorded profile in memory: interned frames, a prefix tree
 * of stacks, threads, and every sample in time order.
 *
 * Workload: a recording adds up to a few thousand samples per second for
 * hours, almost all of them repeating stacks already seen; writers then
 * aggregate by stack (flame graphs, pprof), by function or line (summary,
 * callgrind), or replay samples in time order (chrome timeline).  So:
 *   - frames are interned once: (label, path, line, kind) -> frame id;
 *   - stacks are nodes of a prefix tree keyed by (parent node, frame id),
 *     outermost frame at the root, so a stack is one node id and adding a
 *     sample of a known stack costs one hash lookup per frame and no
 *     allocation;
 *   - a sample is 16 bytes: time, thread, leaf node, flags.
 * Node 0 is the empty stack (the root).  Strings are interned in the
 * profile's own pool and compared by pointer.
 *
 * The same structure is rebuilt from a raw file (src/profile/raw.c), so
 * `rbpeek report` writes exactly what recording straight to a format does.
 */
#ifndef RBP_PROFILE_PROFILE_H
#define RBP_PROFILE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/hmap.h"
#include "util/strpool.h"

enum rbp_pframe_kind {
	RBP_PFRAME_RUBY = 0,
	RBP_PFRAME_CFUNC = 1,
	RBP_PFRAME_THREAD = 2,   /* synthetic root for --threads: "thread 123 (name)" */
	RBP_PFRAME_PROCESS = 3,  /* synthetic root for --subprocesses */
	RBP_PFRAME_GC = 4,       /* "(GC: marking)": the collector, on top of a Ruby stack */
	RBP_PFRAME_NATIVE = 5,   /* a native function (--native); path/line from DWARF */
};

struct rbp_pframe {
	const char *label;   /* "Foo#bar" */
	const char *path;    /* absolute, "" unknown */
	int32_t line;        /* line (or the function's first line with --function) */
	int32_t first_line;  /* first line of the function, 0 unknown (not part of identity) */
	uint8_t kind;        /* enum rbp_pframe_kind */
};

struct rbp_pnode {
	uint32_t parent;     /* node id; the root (0) is its own parent */
	uint32_t frame;      /* frame id; unused for the root */
	uint32_t depth;      /* 0 for the root */
};

struct rbp_pthread {
	int32_t pid;         /* process the thread belongs to */
	int32_t tid;         /* OS thread id (0 unknown) */
	const char *name;    /* interned; "" unknown */
};

#define RBP_SAMPLE_ONCPU 1   /* the thread was running on a CPU */
#define RBP_SAMPLE_GVL 2     /* the thread held the GVL */
/*
 * The thread was waiting for work: not holding the GVL, blocked (or, read
 * from outside, runnable in the wait: just woken), and its innermost frame
 * one of the waits of idle pools and servers (rbp_waiting_for_work).
 * Outputs leave these out unless asked (--idle).
 */
#define RBP_SAMPLE_IDLE 4

struct rbp_sample {
	uint64_t t_ns;       /* since the start of the recording */
	uint32_t thread;     /* index into threads */
	uint32_t node;       /* leaf node of the stack */
};

/* Statistics and metadata written into every format that has room for them. */
struct rbp_profile_meta {
	int32_t pid;                /* the recorded process (root of the tree) */
	const char *ruby_version;   /* interned */
	const char *cmdline;        /* interned, "" unknown */
	uint64_t start_unix_ns;     /* wall clock at start */
	uint64_t duration_ns;
	uint32_t rate_hz;
	uint64_t ticks;             /* sampling deadlines reached */
	uint64_t late;              /* ticks that started late */
	uint64_t errors;            /* ticks whose read failed */
	uint8_t by_function;        /* lines are functions' first lines */
	uint8_t on_cpu;             /* only threads on a CPU were sampled (--on-cpu, the
	                               in-kernel sampler): CPU time, not wall-clock time */
};

struct rbp_profile {
	struct rbp_strpool strings;
	struct rbp_pframe *frames;
	size_t n_frames, cap_frames;
	struct rbp_hmap frame_index;     /* hash of frame -> frame id + 1 (chained) */
	uint32_t *frame_next;            /* collision chains: frame id + 1, 0 ends */
	struct rbp_pnode *nodes;
	size_t n_nodes, cap_nodes;
	struct rbp_hmap node_index;      /* mix(parent, frame) -> node id + 1 */
	struct rbp_pthread *threads;
	size_t n_threads, cap_threads;
	struct rbp_hmap thread_index;    /* (pid, tid) key -> thread index + 1 */
	struct rbp_sample *samples;
	uint8_t *sample_flags;           /* parallel to samples */
	size_t n_samples, cap_samples;
	struct rbp_profile_meta meta;
};

/* Set up an empty profile (one root node); RBP_ENOMEM. */
int rbp_profile_init(struct rbp_profile *p);
void rbp_profile_free(struct rbp_profile *p);

/* Intern a string into the profile's pool ("" for NULL). */
const char *rbp_profile_str(struct rbp_profile *p, const char *s);
/*
 * Frame id of (label, path, line, kind); strings need not be interned.
 * first_line is recorded when the frame is created.
 */
int rbp_profile_frame(struct rbp_profile *p, const char *label, const char *path,
		      int32_t line, int32_t first_line, uint8_t kind, uint32_t *id);
/* Child of node parent for frame; created when new. */
int rbp_profile_child(struct rbp_profile *p, uint32_t parent, uint32_t frame, uint32_t *node);
/* Thread index of (pid, tid), created when new; name updated when given. */
int rbp_profile_thread(struct rbp_profile *p, int32_t pid, int32_t tid, const char *name,
		       uint32_t *idx);
/* Append a sample. */
int rbp_profile_add(struct rbp_profile *p, uint64_t t_ns, uint32_t thread, uint32_t node,
		    uint8_t flags);

/*
 * The frames of node's stack, outermost first, into out[] (at most max);
 * returns the depth (which may exceed max: then only max were written).
 */
size_t rbp_profile_stack(const struct rbp_profile *p, uint32_t node, uint32_t *out, size_t max);

/*
 * Whether a blocked thread whose innermost frame is label, depth frames
 * deep, is waiting for work: a thread pool's condition variable, a queue
 * pop, IO.select or nio4r's selector, accept; Kernel#sleep at most 4
 * frames deep in a thread other than the main one (a background timer
 * loop: puma's reaper, a heartbeat); Thread#join (or #value) in the main
 * thread, at any depth (it waits for threads whose own samples show their
 * work: a puma worker's main thread, also once it has worked, booting).
 * IO#wait_readable called by Puma::Client#reset (a keep-alive connection's
 * thread waiting for the client's next request; caller is the label of
 * the frame that called label, NULL when none).  Kernel#sleep deeper down,
 * IO#wait_readable elsewhere, Thread#join off the main thread,
 * Process.wait, Monitor waits and C calls into database drivers are not: a
 * request waiting on them is working (a master or main thread that only
 * waits is idle by rbp_profile_mark_idle_threads instead).
 */
int rbp_waiting_for_work(const char *label, const char *caller, size_t depth, int is_main);
/* Whether label is a blocking wait (sleep, I/O waits, joins, locks, queues, accept). */
int rbp_blocking_wait(const char *label);
/*
 * The threads that only wait, judged from what they were doing over
 * samples [0, n): a thread is a waiter when it worked - held the GVL, or
 * was runnable with its innermost frame anything but a blocking wait (a
 * thread just woken from one is runnable in it until a CPU takes it) - in
 * at most RBP_WAITER_WORK_PCT % of its samples (never, below
 * RBP_WAITER_MIN_SAMPLES samples).  A share, not "never", so that the
 * choice is stable from run to run: a server's master blocked in
 * IO#wait_readable that wakes now and then for a few microseconds is a
 * waiter whether or not a sample caught one of its wake-ups.  waiter[i]
 * (p->n_threads bytes) is set to 1 for those, 0 for the others.
 */
#define RBP_WAITER_WORK_PCT 2
#define RBP_WAITER_MIN_SAMPLES 20
int rbp_profile_waiters(const struct rbp_profile *p, size_t n, uint8_t *waiter);
/*
 * Flag RBP_SAMPLE_IDLE on every sample of the waiter threads (above):
 * threads that (almost) only waited (a pool's housekeeping thread in
 * Kernel#sleep, a main thread in Thread#join, a master in
 * IO#wait_readable), their rare wake-ups included, so that such a thread
 * is left out whole whether or not a sample caught it waking.  A thread
 * that works keeps its waits (a request's sleep).  Returns how many
 * samples are flagged idle in all.
 */
size_t rbp_profile_mark_idle_threads(struct rbp_profile *p);
/*
 * A view of p without the samples whose flags have any bit of drop: *view
 * shares everything with p but its own samples and flags (free them with
 * rbp_profile_view_free; p must outlive the view).  The number left out in
 * *dropped.  RBP_ENOMEM.
 */
int rbp_profile_view_without(const struct rbp_profile *p, uint8_t drop, struct rbp_profile *view,
			     size_t *dropped);
void rbp_profile_view_free(struct rbp_profile *view);

#endif
