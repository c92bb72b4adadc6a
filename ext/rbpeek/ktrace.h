/*
 * ktrace.h - the kernel streams of the in-process tracer: every syscall of
 * this process (enter/exit, so name and duration) and the scheduler state of
 * each of its threads (switched out as runnable/sleeping/blocked, switched in
 * on a CPU, woken up), recorded by the kernel into bounded ring buffers that
 * keep the newest events (a flight recorder), read on demand.
 *
 * Plain C11 + Linux headers, no Ruby headers: it runs inside the traced
 * process.  Part of the tracer library ($(BUILD)/libtracer.a, with
 * tracepoints.c and syscall_names.c), which the Ruby extension, the unit
 * tests and bench/bench_ktrace.c link.
 *
 * Mechanism: perf_event_open(2) on the tracepoints raw_syscalls:sys_enter,
 * raw_syscalls:sys_exit, sched:sched_switch and sched:sched_waking, plus
 * perf's own context-switch records (attr.context_switch) for "switched in".
 * No eBPF: nothing to compile at build time, no clang, no libbpf.
 *   - Scope: syscalls and switches: one event per (thread, CPU, tracepoint),
 *     opened for every thread present at rbk_open, with attr.inherit +
 *     attr.inherit_thread so threads created later (by any traced thread) get
 *     copies; fork()ed children do not.  Per-task events see only what their
 *     thread does, so no filter is needed.  Wakeups mostly happen in another
 *     task's context (an interrupt, another process), where the kernel does
 *     not sample per-task events, so sched_waking is one event per CPU with a
 *     kernel filter on the woken tid ("pid==..."), refreshed from
 *     /proc/self/task by rbk_update_threads.
 *   - Buffers: one ring per CPU (every event of that CPU is redirected into it
 *     with PERF_EVENT_IOC_SET_OUTPUT), mapped read-only with write_backward, so
 *     the kernel overwrites the oldest records and never stops or blocks.
 *     rbk_drain pauses a ring for the time of one memcpy, so tracing goes on.
 *   - Time: use_clockid=1 with CLOCK_MONOTONIC, the clock the Ruby side of
 *     the tracer calibrates its cycle counter against.
 *   - Payload layout: field offsets are read from each tracepoint's `format`
 *     file in tracefs at open time, never hard-coded (tracepoints.h).  tracefs is looked for
 *     at /sys/kernel/tracing and /sys/kernel/debug/tracing; when neither is
 *     mounted and the process is root, rbk_open mounts it at
 *     /sys/kernel/tracing (a visible side effect, documented).
 *
 * Privilege: tracepoint samples with raw data need CAP_PERFMON (or
 * CAP_SYS_ADMIN, i.e. root) unless kernel.perf_event_paranoid is -1.
 * Without it rbk_open returns -EACCES and a one-line reason naming what is
 * missing; nothing else in the process is affected.
 *
 * Remote handles: `sudo rbpeek trace` runs the program as the invoking
 * user with no capability (CAP_PERFMON would let it sample every process).
 * rbpeek, as root, opens the events for the program's process itself
 * (rbk_open_pid, before the program's exec, so that every thread inherits
 * them), keeps the rings and fds, and names one end of a socket pair in
 * $RBPEEK_TRACE_KFD ("FD:PID").  rbk_open in that process (PID) then makes
 * a remote handle: rbk_drain, rbk_reset and rbk_update_threads become
 * requests that rbpeek answers with rbk_serve, and what comes back is only
 * the decoded events of the program's own threads (a wakeup's waker is
 * left out: it may be any process).  The program holds no perf event and
 * no privilege.
 *
 * Threads: the rbk_* calls must not run concurrently on one handle (the
 * caller serializes them).  After fork() the child must only rbk_close the
 * inherited handle (rbk_drain there returns -ECHILD).
 *
 * Costs (docs/trace-kernel.md, bench/bench_ktrace.c): roughly 0.35-1 us per
 * event on the development VM (2 events per syscall); file descriptors:
 * 3 per CPU per thread present at rbk_open, plus 1 per CPU; memory: one
 * ring of bytes_per_buffer per CPU.
 */
#ifndef RBK_KTRACE_H
#define RBK_KTRACE_H

#include <stddef.h>
#include <stdint.h>

struct rbk_trace;   /* opaque: fds, rings, tracepoint field offsets */

enum rbk_kind {
	RBK_SYS_ENTER = 1,        /* nr_or_ret = syscall number */
	RBK_SYS_EXIT,             /* nr_or_ret = return value (-errno on failure) */
	RBK_SCHED_SWITCH_OUT,     /* the thread left the CPU; state says why */
	RBK_SCHED_SWITCH_IN,      /* the thread started running on cpu */
	RBK_SCHED_WAKEUP,         /* the thread is being woken (sched_waking: the
	                             start of the wakeup, on the waker's CPU); cpu =
	                             the CPU it last ran on, nr_or_ret = the tid
	                             running on the waking CPU (the waker, or the
	                             task an interrupt interrupted; 0 = idle).  It
	                             can come just before the thread's switch-out
	                             when the wakeup races with its going to sleep:
	                             that sleep then ends at once (runnable). */
};

enum rbk_state {              /* for RBK_SCHED_SWITCH_OUT, else RBK_STATE_NONE */
	RBK_STATE_NONE = 0,
	RBK_RUNNABLE,             /* preempted or yielded: still wants the CPU */
	RBK_SLEEPING,             /* interruptible wait (S): futex, poll, nanosleep... */
	RBK_BLOCKED,              /* uninterruptible wait (D): disk I/O, page fault... */
	RBK_STOPPED,              /* stopped or ptrace-stopped (T, t) */
	RBK_DEAD,                 /* exiting (X, Z) */
};

struct rbk_event {
	uint64_t ts_ns;     /* CLOCK_MONOTONIC, nanoseconds */
	int32_t  tid;       /* the thread the event is about */
	int32_t  cpu;       /* CPU it happened on (wakeup: the CPU it last ran on) */
	uint16_t kind;      /* enum rbk_kind */
	uint16_t state;     /* enum rbk_state */
	int64_t  nr_or_ret; /* see enum rbk_kind */
};

/* Start the kernel streams for the current process: all its threads, present
 * and future.  bytes_per_buffer is the size of each per-CPU ring (rounded up
 * to a power of two pages; 0 means 1 MiB; about 100 bytes per event).
 * Returns 0 and *out, or -errno and a one-line reason in why (e.g. "kernel
 * streams need CAP_PERFMON or root, or kernel.perf_event_paranoid=-1 (it is
 * 2); this process has none").  Not async-signal-safe. */
int rbk_open(struct rbk_trace **out, size_t bytes_per_buffer, char *why, size_t why_len);

/* Call cb for every buffered event since the last rbk_reset (or open), in
 * timestamp order across all rings.  cb returning nonzero stops the walk and
 * that value is returned; otherwise returns 0, or -errno (-ENOMEM, -ECHILD
 * after fork).  Tracing continues; events recorded while a ring is being
 * copied (microseconds) may be lost.  Allocates a scratch buffer. */
int rbk_drain(struct rbk_trace *t, int (*cb)(void *ctx, const struct rbk_event *ev), void *ctx);

/* Forget what is buffered: the next rbk_drain starts here.  Cheap (one read
 * of each ring's head, no syscall); async-signal-safe. */
void rbk_reset(struct rbk_trace *t);

/* Tell the kernel streams about threads created since rbk_open (or the last
 * call): their wakeups are recorded only from then on (their syscalls and
 * switches are recorded from their start regardless).  Call it from a
 * thread-start hook; rbk_drain calls it too.  Not async-signal-safe; 0 or
 * -errno.  -E2BIG: too many threads with scattered tids for the kernel's
 * one-page filter; the threads that fit are covered, the others' wakeups
 * are not recorded (their syscalls and switches still are). */
int rbk_update_threads(struct rbk_trace *t);

/* Stop tracing, unmap the rings, close the fds, free t (NULL is fine).
 * A remote handle's socket stays open for a later rbk_open. */
void rbk_close(struct rbk_trace *t);

/* rbk_open for another process, pid (its threads present now and, through
 * inheritance, later), to be read by this one: rbpeek opens its child's
 * streams this way before the child execs.  Needs the privilege and
 * ptrace rights over pid.  Same returns as rbk_open. */
#include <sys/types.h>
int rbk_open_pid(struct rbk_trace **out, pid_t pid, size_t bytes_per_buffer, char *why, size_t why_len);

/* Answer one request of a remote handle read from socket fd, about t (NULL
 * when rbk_open_pid failed: then open_rc and open_why are the answer to an
 * open).  0, or -errno (-EPIPE: the other side closed; -EPROTO: not a
 * request).  Blocks until the request is read and answered. */
int rbk_serve(struct rbk_trace *t, int open_rc, const char *open_why, int fd);

/* perf_event_attr.inherit_thread (Linux 5.13) is bit 35 of the flag word
 * that follows read_format.  It is set through that word, so that the same
 * code builds with older kernel headers (Debian 11's) that lack the field:
 * what matters is the running kernel, and one that predates the flag
 * refuses it with EINVAL (then the streams go on without it). */
#define RBK_INHERIT_THREAD (1ull << 35)
struct perf_event_attr;
void rbk_attr_inherit_thread(struct perf_event_attr *a, int on);

#endif
