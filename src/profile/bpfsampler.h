/*
 * bpfsampler.h - the in-kernel sampler as an engine (--sampler=bpf): the
 * kernel copies the interpreter frames of a watched process's thread at
 * each tick of a per-CPU clock, wherever that thread was interrupted on a
 * CPU (proc/oncpu.h); this decodes each copy with the ordinary walker
 * (rbp_vm_decode_frames, the reader seam over the copied bytes) into a
 * thread's stack.
 *
 * What it is and is not: on-CPU samples only (a thread blocked in a system
 * call is never interrupted, so never sampled); no pause, no ptrace; the
 * stack is consistent by construction.  No GVL or GC state (the copy holds
 * only frames).  One engine watches any number of processes (each with its
 * own Ruby, t and vm kept by the caller), at a kernel cost that follows
 * the CPU time they use, not their number.
 *
 * Life cycle: open (loads and attaches the program; says why not) ->
 * watch each process -> refresh every so often (threads started since
 * are not sampled until then) and read pending samples -> close.
 * rbp_sample_loop() drives it when rbp_sampler_opts.bpf is set.
 */
#ifndef RBP_PROFILE_BPFSAMPLER_H
#define RBP_PROFILE_BPFSAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/oncpu.h"
#include "proc/target.h"
#include "ruby/vm.h"

struct rbp_bpf_sampler;

/* One decoded sample. */
struct rbp_bpf_sample {
	pid_t pid;                 /* the process (as watched) */
	uint64_t time_ns;          /* CLOCK_MONOTONIC, the instant of the tick */
	struct rbp_target *t;      /* its target and VM (the caller's) */
	struct rbp_vm *vm;
	/* the thread (name and main-ness from the last refresh), its frames in
	 * the rbp_stacks given to rbp_bpf_sampler_read; NULL when the copy
	 * could not be decoded (err says why) */
	const struct rbp_thread *th;
	int err;
	int truncated;             /* outermost frames beyond the copy's limit dropped */
};

struct rbp_bpf_sampler_stats {
	struct rbp_oncpu_stats k;  /* the kernel's counts and timing */
	uint64_t decoded, decode_errors;
	uint64_t refreshes, refresh_errors;
};

/* Load and attach at rate_hz (per CPU second); on failure an RBP_E* code and why. */
int rbp_bpf_sampler_open(uint32_t rate_hz, struct rbp_bpf_sampler **out, char *why, size_t why_len);
/* Watch t's process (vm its Ruby; both the caller's, kept until unwatched), threads included. */
int rbp_bpf_sampler_watch(struct rbp_bpf_sampler *s, struct rbp_target *t, struct rbp_vm *vm);
void rbp_bpf_sampler_unwatch(struct rbp_bpf_sampler *s, pid_t pid);
/* Re-read every watched process's thread list into the kernel's map. */
int rbp_bpf_sampler_refresh(struct rbp_bpf_sampler *s);
/*
 * The same for one watched process: the read's error when its thread list
 * cannot be read (the process exited, or exec'd), RBP_EINVAL when it is
 * not watched, RBP_ENOMEM.
 */
int rbp_bpf_sampler_refresh_pid(struct rbp_bpf_sampler *s, pid_t pid);
/*
 * Decode every pending copy into *stacks (one thread each time, reused)
 * and hand it to fn; fn returning nonzero stops and is returned.  Only
 * RBP_ENOMEM and fn's returns are errors: a copy that cannot be decoded
 * comes with th NULL.
 */
int rbp_bpf_sampler_read(struct rbp_bpf_sampler *s, struct rbp_stacks *stacks,
			 int (*fn)(void *ctx, const struct rbp_bpf_sample *smp), void *ctx);
/* Have the kernel time the program (benchmarks). */
int rbp_bpf_sampler_enable_stats(struct rbp_bpf_sampler *s);
void rbp_bpf_sampler_stats(const struct rbp_bpf_sampler *s, struct rbp_bpf_sampler_stats *out);
void rbp_bpf_sampler_close(struct rbp_bpf_sampler *s);   /* NULL-safe */

#endif
