/*
 * uprobe.h - count and sample calls of functions in a running process with
 * the kernel's uprobe perf PMU (perf_event_open, no tracefs; an eBPF
 * program may be attached to the events, see rbp_uprobes_set_bpf).
 *
 * A probe is (file, file offset).  For each thread of the process and each
 * probe one perf event is opened (uprobe events are per task); every
 * `period`-th hit of a probe in a thread writes a sample (thread id, time,
 * the argument registers) into that thread's ring buffer, which all of its
 * probes share.  Threads started later are picked up by
 * rbp_uprobes_refresh().
 *
 * Process mode (rbp_uprobes_open_process): one event per probe, on the
 * process's main thread, with an eBPF program that does all the work.
 * The kernel runs a uprobe event's handler, and so its program, for a hit
 * by any thread sharing the event's task's memory (its filter compares
 * the memory, not the thread), so one event serves every thread, now and
 * later, at one program run per hit; with an event per thread each hit ran
 * the handlers of all of them.  Closing an event unregisters its uprobe,
 * which waits for RCU grace periods (about 0.1 s each on a loaded VM,
 * under a global lock, so closing in parallel does not help): n_specs
 * closes instead of n_specs x threads.  No samples, no rings: the program
 * reports through its own maps (see framecap.h, count_pid).
 *
 * Nothing outlives rbpeek: the events are file descriptors, so the kernel
 * removes the breakpoints when they are closed, including when rbpeek is
 * killed.  No global state (tracefs uprobe_events) is ever written.
 *
 * Needs root, or CAP_PERFMON (kernel >= 5.8) / CAP_SYS_ADMIN, to open
 * uprobe events at all: RBP_EPERM otherwise.  RBP_ENOUPROBE when the
 * kernel has no uprobe PMU.  x86-64 and aarch64 (the argument registers:
 * arch.h).
 */
#ifndef RBP_PROC_UPROBE_H
#define RBP_PROC_UPROBE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rbp_uprobe_spec {
	const char *path;   /* the file, as this process can open it
			       (e.g. "/proc/PID/root/usr/lib/.../libruby.so") */
	uint64_t offset;    /* file offset of the probed instruction */
};

struct rbp_uprobe_sample {
	uint32_t probe;     /* index into the specs given to rbp_uprobes_open() */
	pid_t tid;          /* thread that hit the probe */
	uint64_t time_ns;   /* CLOCK_MONOTONIC at the hit */
	uint64_t args[3];   /* the first three integer arguments at the hit (x86-64: rdi, rsi, rdx; aarch64: x0-x2) */
};

struct rbp_uprobe_stats {
	uint64_t samples;   /* samples read */
	uint64_t lost;      /* samples the kernel dropped (ring buffer full) */
	size_t threads;     /* threads probed now (process mode: the process's threads) */
	size_t events;      /* perf events open now */
};

struct rbp_uprobes;

/* 0 when uprobe perf events can be opened here, else RBP_ENOUPROBE. */
int rbp_uprobe_available(void);

/*
 * Probe every thread of pid at specs[0..n) (copied), sampling every
 * period-th hit (>= 1).  RBP_EPERM, RBP_ENOPROC, RBP_ENOUPROBE, RBP_EINVAL
 * (the kernel refused an offset), RBP_ENOMEM.
 */
int rbp_uprobes_open(pid_t pid, const struct rbp_uprobe_spec *specs, size_t n, uint64_t period,
		     struct rbp_uprobes **out);
/*
 * Process mode (see above): one event per probe on pid's main thread,
 * running prog_fds[i] (which must return 0: the events have no ring) at
 * every hit of probe i by any thread of pid.  Errors as rbp_uprobes_open.
 * rbp_uprobes_read only waits; rbp_uprobes_refresh checks that the process
 * is still there (RBP_ENOPROC) and counts its threads.
 */
int rbp_uprobes_open_process(pid_t pid, const struct rbp_uprobe_spec *specs, size_t n,
			     const int *prog_fds, struct rbp_uprobes **out);
/*
 * Run eBPF program prog_fds[i] (a BPF_PROG_TYPE_KPROBE program, see
 * framecap.h) at every hit of probe i, in every thread probed now and
 * later (PERF_EVENT_IOC_SET_BPF).  prog_fds must stay valid while u is
 * open.  A program returning 0 suppresses the hit's sample.  On failure
 * some events may already run it: close u to be rid of them.
 */
int rbp_uprobes_set_bpf(struct rbp_uprobes *u, const int *prog_fds);
/* Attach to threads that appeared since the last call (and forget dead ones). */
int rbp_uprobes_refresh(struct rbp_uprobes *u);
/*
 * Wait up to timeout_us (less when a ring fills up), then hand every
 * pending sample to fn in the order of each thread's buffer.  fn returning nonzero stops the read
 * (the rest stay for the next call) and is returned.  A signal ends the
 * wait early (returns 0).
 */
int rbp_uprobes_read(struct rbp_uprobes *u, uint64_t timeout_us,
		     int (*fn)(void *ctx, const struct rbp_uprobe_sample *s), void *ctx);
void rbp_uprobes_stats(const struct rbp_uprobes *u, struct rbp_uprobe_stats *out);
/* Close every event: the kernel removes the breakpoints.  NULL-safe. */
void rbp_uprobes_close(struct rbp_uprobes *u);

#endif
