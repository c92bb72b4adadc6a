/*
 * allocwatch.h - watch a running Ruby process allocate objects: every
 * allocation counted by class, the allocating stacks of a random subset
 * (about opts.rate a second) as profile samples (see alloccount.h).
 *
 * Mechanism: a uprobe (perf_event_open on the kernel's uprobe PMU, see
 * proc/uprobe.h) on each of Ruby's allocation entry points (see
 * ruby/alloc.h).  Every call is counted by its class argument, so the
 * count per class is exact: with exact sites by the eBPF program, in the
 * kernel, on one event per probe for the whole process (uprobe.h, process
 * mode; read every second and at the end); otherwise by rbpeek, from a
 * report per call on per-thread events.  (Reporting only
 * every Nth call, which perf offers, aliases with loops: a loop making 3
 * Strings and 1 Array per round, sampled every 16th call, only ever shows
 * the same String; the cost is the breakpoint trap taken on every call
 * anyway, not the report.)
 *
 * The allocating site is the thread's Ruby stack, for a random subset of
 * the allocations.  Two ways to take a stack:
 *
 *  - exact (default where the kernel allows eBPF): a small eBPF program on
 *    the same uprobes (proc/framecap.h) copies the allocating thread's
 *    control frames and their environment words in the kernel, at the
 *    allocation; pick is its threshold, updated every 100 ms; the copies
 *    are decoded by the ordinary walker (rbp_vm_decode_frames).  It keeps
 *    a map tid -> rb_thread_t, refreshed with the thread list.
 *  - approximate (opts.no_bpf, or bpf() refused: status.approx_why says
 *    why): the stack is read from outside as soon as the report arrives,
 *    without pausing the thread; usually still in the same method, not
 *    always at the same line, and at chance when methods alternate every
 *    few microseconds.  status.age_* say how old the reports were.
 *
 * Nothing stays attached to the target: the perf events are rbpeek's file
 * descriptors and vanish with it, even on SIGKILL.  The watcher never
 * prints: it reports through the progress callback and the status.
 */
#ifndef RBP_PROFILE_ALLOCWATCH_H
#define RBP_PROFILE_ALLOCWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "profile/alloccount.h"
#include "profile/profile.h"
#include "profile/sampler.h"
#include "profile/subject.h"
#include "ruby/vm.h"

struct rbp_alloc_status {
	uint64_t elapsed_ns;         /* since the watch began */
	enum rbp_stop_reason stop;   /* REQUESTED, DURATION or EXITED */
	size_t probes;               /* allocation functions probed */
	/* the uprobes' reports (final figures once rbp_allocwatch_run returns) */
	uint64_t lost;               /* reports the kernel dropped (ring full) */
	size_t threads;              /* threads probed */
	size_t events;               /* uprobe events (probes, or probes x threads without eBPF) */
	/* exact sites: the kernel's copies */
	int exact;                   /* 1: sites from frames copied in the kernel */
	uint64_t copies, copies_lost;
	uint64_t uncounted;          /* allocations of classes beyond the kernel's map (counted in
				      * the total, not per class) */
	int copy_max_frames;         /* frames a copy holds at most (deeper: outermost cut) */
	uint64_t bpf_runs, bpf_run_ns;   /* the program's runs and time (opts.bpf_stats) */
	int bpf_stats_err;           /* opts.bpf_stats asked, and the kernel refused */
	/* approximate sites: why ("" when exact), and the error behind it */
	char approx_why[512];
	int approx_err;
	uint64_t thread_errors;      /* thread list reads that failed */
};

struct rbp_allocwatch;

struct rbp_allocwatch_opts {
	uint32_t rate;               /* about this many stacks per second */
	uint64_t duration_ns;        /* 0: until stopped or the target exits */
	uint8_t no_bpf;              /* approximate sites, without trying eBPF */
	uint8_t bpf_stats;           /* have the kernel time the program (benchmarks) */
	/* Polled between drains: nonzero stops the watch.  May be NULL. */
	int (*should_stop)(void *ctx);
	/* Polled between drains (job control: may block).  May be NULL. */
	int (*suspend)(void *ctx);
	/* Called about every second with the watch so far.  May be NULL. */
	void (*progress)(void *ctx, const struct rbp_allocwatch *w);
	void *ctx;
};

/*
 * Find the allocation functions of the Ruby subject s is attached to (s
 * stays the caller's and must outlive the watch), load the frame-copying
 * program (unless no_bpf; where the kernel refuses, sites are approximate
 * and status.approx_why says why) and open the uprobes: from here the
 * target's allocations trap.  Samples go to p.  Errors: RBP_ENOUPROBE,
 * RBP_ENOPROBE (no allocation function exported), RBP_EPERM, RBP_EINVAL
 * (the kernel refused a uprobe), RBP_ENOPROC, RBP_ENOMEM.  On failure *out
 * is NULL and nothing stays open.
 */
int rbp_allocwatch_open(const struct rbp_subject *s, const struct rbp_allocwatch_opts *o,
			struct rbp_profile *p, struct rbp_allocwatch **out);
/*
 * Watch until should_stop, the duration, or the target's exit
 * (status.stop says which); then the probes leave the target and
 * p->meta.duration_ns is set.  Returns RBP_OK, or an error of rbpeek
 * itself (RBP_ENOMEM) or of the kernel's rings.
 */
int rbp_allocwatch_run(struct rbp_allocwatch *w);
const struct rbp_alloc_status *rbp_allocwatch_status(const struct rbp_allocwatch *w);
/* The counts so far (tables: rbp_alloc_tally_*). */
const struct rbp_alloc_count *rbp_allocwatch_count(const struct rbp_allocwatch *w);
/* Close the probes (if still open) and free w.  NULL-safe. */
void rbp_allocwatch_close(struct rbp_allocwatch *w);

#endif
