/*
 * framecap.h - copy a thread's interpreter frames inside the kernel at the
 * moment a uprobe fires: a small eBPF program (src/bpf/framecap.bpf.c,
 * compiled by clang, embedded as a libbpf skeleton and loaded by libbpf)
 * attached to uprobe perf events (PERF_EVENT_IOC_SET_BPF, see
 * rbp_uprobes_set_bpf()).
 *
 * At each hit the program:
 *   1. draws a random number and goes on only when it is below the "pick"
 *      threshold the caller sets (rbp_framecap_set_pick): the caller keeps
 *      the number of copies per second bounded;
 *   2. looks the thread id (as the caller's PID namespace numbers it) up
 *      in a map the caller fills (tid -> address of the thread's
 *      descriptor, rb_thread_t for Ruby);
 *   3. reads the execution context from it (th->ec, read at every hit: a
 *      fiber switch changes it), then ec->cfp, ec->vm_stack and
 *      ec->vm_stack_size;
 *   4. copies the control frames [cfp, vm_stack + size) - contiguous
 *      records, innermost first - at most RBP_FRAMECAP_MAX_FRAMES of them
 *      (the outermost are dropped and the record says so), and for each
 *      frame the three words around its environment pointer (ep[-2..0]);
 *   5. emits it all with the thread id, the time and one argument
 *      register, through a per-CPU perf ring (bpf_perf_event_output).
 * Opened with count_pid, it first counts every hit of that process by its
 * argument register (the class, for rbpeek alloc) in a map the caller
 * reads (rbp_framecap_counts) and suppresses the uprobe's own perf sample:
 * one uprobe event per probe then serves every thread of the process
 * (rbp_uprobes_open_process), at one program run per hit.  Without it the
 * program returns 1, so the uprobe's own perf sample is written as before:
 * the program only adds.
 *
 * Nothing outlives the caller: programs, maps and rings are file
 * descriptors.  Needs root (CAP_BPF + CAP_PERFMON) and a kernel with
 * CONFIG_BPF_EVENTS (5.7+ for bpf_get_ns_current_pid_tgid);
 * rbp_framecap_open() says why not otherwise, quoting libbpf and the
 * verifier.  A build without eBPF (make BPF=0: framecap_none.c) fails
 * every open with RBP_ENOBPF.
 * x86-64 and aarch64 (the argument register: libbpf's PT_REGS_PARM*).
 */
#ifndef RBP_PROC_FRAMECAP_H
#define RBP_PROC_FRAMECAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The limits and struct rbp_framecap_layout (where things are in the
 * interpreter's structures) are the eBPF programs' own, shared with them.
 */
#include "bpf/framecap_record.h"

#define RBP_FRAMECAP_MAX_FRAMES FC_MAX_FRAMES     /* control frames copied per hit */
#define RBP_FRAMECAP_GC_FLAGS FC_GC_FLAGS         /* bytes of rb_objspace's head copied (oncpu) */
#define RBP_FRAMECAP_MAX_PROBES FC_MAX_PROBES
#define RBP_FRAMECAP_MAX_COUNTED FC_MAX_COUNTED   /* distinct arguments counted (count_pid) */

/* One copy, as read back (pointers into the reader's buffer: valid in the callback). */
struct rbp_framecap_record {
	uint32_t probe;           /* which program (one per probe) fired */
	pid_t tid;                /* the thread, as the caller's PID namespace numbers it */
	uint64_t time_ns;         /* CLOCK_MONOTONIC at the hit */
	uint64_t arg;             /* the argument register chosen for the probe */
	uint64_t cfp;             /* address frames[0] was copied from */
	size_t n_frames;
	int truncated;            /* more frames than RBP_FRAMECAP_MAX_FRAMES: outermost dropped */
	const uint8_t *frames;    /* n_frames * cfp_size bytes */
	const uint64_t *env;      /* n_frames * 3 words: ep[-2], ep[-1], ep[0]; a frame whose
				   * words could not be read has all three 0 */
	const uint8_t *gc_flags;  /* RBP_FRAMECAP_GC_FLAGS bytes of rb_objspace's head at the
				   * hit, when the layout's gc_len asked for them (else stale) */
	uint64_t gvl_owner;       /* the GVL's owner (a thread descriptor) at the hit; 0 unknown */
};

struct rbp_framecap_stats {
	uint64_t records;         /* read */
	uint64_t lost;            /* dropped by the kernel (ring full) */
	uint64_t runs, run_ns;    /* the programs' runs and time in them, all probes
				   * (0 unless rbp_framecap_enable_stats) */
};

struct rbp_framecap;

/*
 * Load one program per probe (arg_reg[i]: which argument register the
 * record carries for probe i: 0 %rdi, 1 %rsi, 2 %rdx) and the per-CPU
 * rings.  On failure returns RBP_EPERM (bpf() refused), RBP_ENOUPROBE (no
 * BPF events in this kernel), RBP_EINVAL (the verifier refused: a bug),
 * RBP_ENOBPF (built without eBPF), ... with a sentence in why: what
 * failed, then libbpf's last messages (the verifier's log ends them) as
 * far as why_len allows.
 */
int rbp_framecap_open(const struct rbp_framecap_layout *L, const uint8_t *arg_reg, size_t n_probes,
		      pid_t count_pid, struct rbp_framecap **out, char *why, size_t why_len);
/* The program for probe i, for rbp_uprobes_set_bpf(). */
int rbp_framecap_prog_fd(const struct rbp_framecap *c, size_t probe);
/*
 * The threads to copy from: tids[i] -> threads[i]; tids not given are
 * removed from the map.
 */
int rbp_framecap_set_threads(struct rbp_framecap *c, const pid_t *tids, const uint64_t *threads,
			     size_t n);
/*
 * Counting (count_pid given): the hits so far, and of them those the
 * per-argument map had no room for (more than RBP_FRAMECAP_MAX_COUNTED
 * distinct arguments).
 */
int rbp_framecap_totals(const struct rbp_framecap *c, uint64_t *hits, uint64_t *uncounted);
/* Counting: fn(ctx, argument, hits so far) for every argument counted; nonzero stops. */
int rbp_framecap_counts(const struct rbp_framecap *c,
			int (*fn)(void *ctx, uint64_t arg, uint64_t hits), void *ctx);
/* Copy at a hit when a random 32-bit number is below pick (UINT32_MAX: ~always, 0 never). */
int rbp_framecap_set_pick(struct rbp_framecap *c, uint32_t pick);
/* From now on the programs do nothing (no count, no copy), until closed. */
int rbp_framecap_stop(struct rbp_framecap *c);
/* Hand every pending record to fn (no waiting); fn returning nonzero stops and is returned. */
int rbp_framecap_read(struct rbp_framecap *c,
		      int (*fn)(void *ctx, const struct rbp_framecap_record *r), void *ctx);
/*
 * Have the kernel time the programs (BPF_ENABLE_STATS: on, for every
 * program of the machine, while c is open; a few tens of ns per run).
 * For benchmarks.
 */
int rbp_framecap_enable_stats(struct rbp_framecap *c);
void rbp_framecap_stats(const struct rbp_framecap *c, struct rbp_framecap_stats *out);
void rbp_framecap_close(struct rbp_framecap *c);   /* NULL-safe */

#endif
