/*
 * oncpu.h - the in-kernel on-CPU sampler: a software clock perf event per
 * CPU (PERF_COUNT_SW_CPU_CLOCK, rate_hz ticks per second of CPU time) runs
 * an eBPF program (src/bpf/oncpu.bpf.c) that, when the interrupted thread
 * belongs to a watched process, copies its interpreter frames - as
 * framecap.h does at a uprobe - into a BPF ring buffer.  No ptrace, no
 * stop: the stack is read at the instant the thread was interrupted.
 *
 * Knows nothing of Ruby: the caller gives each process's layout and its
 * threads (tid -> thread descriptor), and decodes the copies.  Only
 * threads running on a CPU are sampled.  The kernel's work per tick does
 * not grow with the number of processes watched (two hash lookups, then a
 * copy only when a watched thread was on that CPU).
 *
 * Needs root (CAP_BPF + CAP_PERFMON), a kernel with BPF ring buffers (5.8+)
 * and bpf_get_ns_current_pid_tgid (5.7+); rbp_oncpu_open() says why not
 * otherwise, quoting libbpf and the verifier.  Built without eBPF (make
 * BPF=0: oncpu_none.c) every open fails with RBP_ENOBPF.  x86-64 and aarch64.
 */
#ifndef RBP_PROC_ONCPU_H
#define RBP_PROC_ONCPU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/framecap.h"

struct rbp_oncpu_stats {
	uint64_t watched;     /* ticks that interrupted a watched process */
	uint64_t copied;      /* ... of which copied into the ring */
	uint64_t dropped;     /* ... dropped: the ring was full */
	uint64_t no_thread;   /* ... on a thread not yet in the threads map */
	uint64_t records;     /* records read */
	uint64_t runs, run_ns;   /* the program's runs and time in them
				  * (0 unless rbp_oncpu_enable_stats) */
};

struct rbp_oncpu;

/*
 * Load the program and attach it to a clock event on every online CPU at
 * rate_hz (1..10000).  On failure an RBP_E* code and a sentence in why.
 */
int rbp_oncpu_open(uint32_t rate_hz, struct rbp_oncpu **out, char *why, size_t why_len);
/* Watch process pid (as our PID namespace numbers it) whose interpreter has layout L. */
int rbp_oncpu_watch(struct rbp_oncpu *s, pid_t pid, const struct rbp_framecap_layout *L);
/* Stop watching pid: its entry and its threads go. */
void rbp_oncpu_unwatch(struct rbp_oncpu *s, pid_t pid);
/*
 * pid's threads: tids[i] -> threads[i]; its threads not given are removed
 * from the map.
 */
int rbp_oncpu_set_threads(struct rbp_oncpu *s, pid_t pid, const pid_t *tids,
			  const uint64_t *threads, size_t n);
/*
 * Hand every pending copy to fn (no waiting): r->arg is the process id,
 * r->probe 0.  fn returning nonzero stops and is returned.
 */
int rbp_oncpu_read(struct rbp_oncpu *s, int (*fn)(void *ctx, const struct rbp_framecap_record *r),
		   void *ctx);
/* Have the kernel time the program (BPF_ENABLE_STATS, while s is open). */
int rbp_oncpu_enable_stats(struct rbp_oncpu *s);
void rbp_oncpu_stats(const struct rbp_oncpu *s, struct rbp_oncpu_stats *out);
void rbp_oncpu_close(struct rbp_oncpu *s);   /* NULL-safe */

#endif
