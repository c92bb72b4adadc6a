/*
 * sampler.h - the sampling loop: read every thread's stack at a fixed rate
 * and add the samples to a profile.
 *
 * Ticks are scheduled on absolute deadlines (CLOCK_MONOTONIC), so the rate
 * does not drift with the time each sample takes.  A tick that starts more
 * than half a period after its deadline is "late"; deadlines missed by a
 * whole period are skipped (and counted late) rather than sampled in a
 * burst.  A tick whose read fails counts as an error; the loop gives up only
 * when most ticks fail.  The loop never prints: it reports through the
 * progress callback and the final status.
 *
 * Waking on time (see sampler.c for the measurements behind this): with
 * opts.realtime the loop runs its thread under SCHED_FIFO priority 1 when
 * the system allows it (root, CAP_SYS_NICE or RLIMIT_RTPRIO; otherwise it
 * stays as it was, silently), with SCHED_RESET_ON_FORK, and returns to the
 * old policy when it ends.  Should sampling take more than half of one CPU
 * over any 100 ms window (ticks costlier than the period), it drops the
 * real-time class for good, so that it can never starve the target on a
 * one-CPU machine.  While real-time, at high rates, where the time the
 * kernel takes to wake the thread is a large part of the half-period
 * budget, the loop wakes that much early and spins to the deadline (at
 * most a sixth of a period).
 *
 * Reading without stopping (the default, RBP_PAUSE_VERIFY): a tick copies
 * every thread's control frames twice, around the copy of the VM stack,
 * and keeps a thread's stack only when both copies agree (ruby/walk.c);
 * a tick whose read tore is read again, and only when that tears too is
 * the GVL's holder stopped (status.stopped).  A thread still torn is
 * counted (status.torn) and gives no sample.  With nonblocking, nothing
 * is ever stopped: torn stacks are dropped.
 *
 * Holding threads stopped (stop_gvl, on_cpu, pause_all, and the default's
 * fallback): a tick stops the GVL's holder (every thread with on_cpu or
 * pause_all, or when no thread holds the GVL), copies what can change, and
 * lets it go; labels and lines are decoded after.  opts.max_hold_ns bounds how long any thread stays
 * stopped: a tick whose threads take longer to stop, or whose copy takes
 * longer, lets them go at the bound and finishes its read without them
 * stopped, as --nonblocking does (its stacks may be torn, rarely); such
 * ticks still give samples and are counted in status.over_budget.
 */
#ifndef RBP_PROFILE_SAMPLER_H
#define RBP_PROFILE_SAMPLER_H

#include <stdint.h>

#include "profile/procset.h"
#include "profile/profile.h"
#include "proc/target.h"
#include "ruby/vm.h"

/* The default bound on a hold (opts.max_hold_ns): 300 us. */
#define RBP_DEFAULT_MAX_HOLD_NS 300000ull

enum rbp_stop_reason {
	RBP_STOP_NONE = 0,
	RBP_STOP_REQUESTED,   /* should_stop() said so (Ctrl-C, SIGTERM) */
	RBP_STOP_DURATION,    /* the duration elapsed */
	RBP_STOP_EXITED,      /* the target process exited */
	RBP_STOP_FAILING,     /* most ticks failed: see last_err */
};

/* How the sampling thread was scheduled (opts.realtime). */
enum rbp_sched_state {
	RBP_SCHED_NORMAL = 0,   /* not asked for, or not allowed (EPERM) */
	RBP_SCHED_REALTIME,     /* SCHED_FIFO for the whole recording */
	RBP_SCHED_DROPPED,      /* SCHED_FIFO until sampling took over half a CPU */
};

struct rbp_sampler_status {
	uint64_t elapsed_ns;
	uint64_t ticks;       /* deadlines reached */
	uint64_t samples;     /* stacks added to the profile */
	uint64_t late;        /* ticks started late (or skipped) */
	uint64_t skipped;     /* of those, deadlines skipped whole: not read at all */
	/*
	 * Reads that found no thread holding the GVL: an idle process, or one
	 * whose GVL was being handed from one thread to another at that
	 * instant.  With gvl_only such a tick gives no sample.
	 */
	uint64_t no_gvl_holder;
	uint64_t errors;      /* ticks whose read failed */
	int last_err;         /* the last read error, RBP_OK if none */
	enum rbp_stop_reason stop;
	/* per-tick cost of reading (pause + walk + resume), nanoseconds of wall time */
	uint64_t tick_ns_min, tick_ns_max, tick_ns_sum;
	/* paused reads: how long a thread of the target was held stopped
	 * (first stop to release), nanoseconds, over the reads that paused */
	uint64_t held_ns_max, held_ns_sum, holds;
	/* of those, reads whose threads were let go at opts.max_hold_ns, before
	 * the read was done: finished without pausing */
	uint64_t over_budget;
	/* reads that found a thread's stack torn (a tick reads at most twice
	 * before it stops one), ticks that stopped a thread because both
	 * tore, and threads left torn: not sampled (nonblocking, or torn
	 * again while stopped: a label that did not fit) */
	uint64_t torn_reads, stopped, torn;
	enum rbp_sched_state sched;   /* how the loop's thread was scheduled */
};

struct rbp_sampler_opts {
	uint32_t rate_hz;         /* ticks per second */
	uint64_t duration_ns;     /* 0: until stopped or the target exits */
	uint8_t on_cpu;           /* keep only threads running on a CPU */
	uint8_t gvl_only;         /* keep only the thread holding the GVL */
	uint8_t threads_as_roots; /* put a "thread TID (name)" frame at each stack's root */
	uint8_t by_function;      /* lines become the function's first line */
	uint8_t nonblocking;      /* never pause the target */
	/* stop the GVL's holder at every tick (--stop: what every tick did
	 * before the verified read; costs a busy target its CPU, see above) */
	uint8_t stop_gvl;
	/* pause every thread, not only the GVL's holder (RBP_PAUSE_ALL): what
	 * each thread was doing (running, blocked) is then known for all */
	uint8_t pause_all;
	uint8_t no_gc;            /* no "(GC: ...)" frame on the thread running the collector */
	uint8_t realtime;         /* try SCHED_FIFO for the loop's thread (see above) */
	/* longest a blocking read may keep a thread stopped, ns (see above);
	 * 0: RBP_DEFAULT_MAX_HOLD_NS, UINT64_MAX: no bound */
	uint64_t max_hold_ns;
	/* --native: unwind native stacks with this and merge them (never
	 * nonblocking; NULL: Ruby frames only).  Not owned. */
	struct rbp_native *native;
	/* Polled between ticks: nonzero stops the loop.  May be NULL. */
	int (*should_stop)(void *ctx);
	/*
	 * Polled between ticks, while no thread of any target is held: may
	 * block (job control: the caller stops its own process until SIGCONT)
	 * and returns nonzero when it did.  The schedule then starts again
	 * from the time it returned: the ticks missed while stopped are
	 * neither late nor counted, and the time stopped is not part of the
	 * recording's duration.  May be NULL.
	 */
	int (*suspend)(void *ctx);
	/* Called about every progress_ns with the status so far.  May be NULL. */
	void (*progress)(void *ctx, const struct rbp_sampler_status *st,
			 const struct rbp_profile *p);
	uint64_t progress_ns;
	/*
	 * --subprocesses: sample every member of this set (its root is the
	 * target passed to rbp_sample_loop), each under a "process PID:
	 * cmdline" root frame; members that exit are dropped quietly.  NULL:
	 * the one target.
	 */
	struct rbp_procset *procs;
	/*
	 * --sampler=bpf: take the stacks the kernel copied at each CPU's clock
	 * tick (profile/bpfsampler.h, t already watched) instead of reading
	 * them from outside: on-CPU samples only, no pause, no GVL or GC
	 * state.  The loop then wakes every 50 ms to decode what came, and
	 * refreshes the kernel's thread map every 250 ms; rate_hz is the
	 * engine's.  ticks counts the kernel's ticks on a thread of the
	 * target, tick_ns each wake-up's cost; never late.  Not with procs or
	 * native.  Not owned.
	 */
	struct rbp_bpf_sampler *bpf;
	/* For spawned children: nonzero once the child has exited (reaped).  May be NULL. */
	int (*child_exited)(void *ctx);
	void *ctx;
};

/*
 * Sample until stopped.  Returns RBP_OK in every case where the profile is
 * worth writing (st->stop says why it ended), or an error for failures of
 * rbpeek itself (RBP_ENOMEM).  p->meta gets rate, duration and counts.
 */
int rbp_sample_loop(struct rbp_target *t, struct rbp_vm *vm, const struct rbp_sampler_opts *o,
		    struct rbp_profile *p, struct rbp_sampler_status *st);

/*
 * One read of member m of a process set, its samples added to p: the step
 * of the loop, for a driver with its own schedule and one profile per
 * process (rbpeek agent).  The stacks hang from p's root (no process
 * frame).  m's caches (frame_ids, tid_names) hold ids of p: clear them
 * when p is replaced.  scratch: buffers kept between calls (zeroed at
 * first, rbp_stacks_free at the end).  t_ns: the sample's time.  Only
 * o's filters and pause options are used (on_cpu, gvl_only,
 * threads_as_roots, by_function, nonblocking, pause_all, no_gc).  Counts
 * into st->samples and st->no_gvl_holder; returns the read's error.
 */
int rbp_sample_member(struct rbp_procset_member *m, const struct rbp_sampler_opts *o,
		      struct rbp_profile *p, uint64_t t_ns, struct rbp_stacks *scratch,
		      struct rbp_sampler_status *st);

/*
 * Add thread th of stacks (decoded elsewhere: the in-kernel sampler's
 * copies, rbp_bpf_sampler_read) to p as member m's sample at t_ns with
 * flags (RBP_SAMPLE_*): what rbp_sample_member does with each thread it
 * reads, with the same caches and options (threads_as_roots,
 * by_function, no_gc).  Returns RBP_ENOMEM or the profile's error.
 */
int rbp_sample_add_stack(struct rbp_procset_member *m, const struct rbp_sampler_opts *o,
			 struct rbp_profile *p, const struct rbp_stacks *stacks,
			 const struct rbp_thread *th, uint64_t t_ns, uint8_t flags);

/*
 * Why ticks were late, for advice.  RBP_LATE_FEW: at most 1 % late, or
 * more but below 5 % with cheap ticks (scheduling noise of a busy host).
 * RBP_LATE_COST: over 1 % late and reading a sample took, on average, over
 * a quarter of the period: rbpeek's own work crowds the ticks, and a
 * lower rate helps.  RBP_LATE_HOST: over 5 % late although ticks were
 * cheap: the machine did not run the sampler on time (a busy host, a
 * hypervisor); a lower rate would not help, real-time scheduling would.
 */
enum rbp_late_cause { RBP_LATE_FEW, RBP_LATE_COST, RBP_LATE_HOST };
enum rbp_late_cause rbp_sampler_late_cause(const struct rbp_sampler_status *st, uint32_t rate_hz);

#endif
