/*
 * recording.h - the one entry point of a recording (record, top): the
 * subject a command opened, and everything sampling it needs -- the process
 * set (--subprocesses), the native unwinder (--native), the in-kernel
 * sampler (--sampler=bpf) -- opened from one config, run with the sampling
 * loop's options (rate, duration, filters, the pause policy) and closed
 * with one call.
 *
 * What opening decided is a status value, not words: when --sampler=bpf
 * cannot run, the recording samples with ptrace and says why in its status;
 * the front end words it.  Nothing here prints.
 */
#ifndef RBP_PROFILE_RECORDING_H
#define RBP_PROFILE_RECORDING_H

#include <stddef.h>
#include <stdint.h>

#include "profile/procset.h"
#include "profile/profile.h"
#include "profile/sampler.h"
#include "profile/subject.h"

struct rbp_recording_config {
	/* --subprocesses: sample the subject's Ruby descendants too, each
	 * under its own process frame; the subject need not be Ruby itself */
	uint8_t subprocesses;
	uint8_t native;         /* --native: unwind native stacks and merge them */
	/* --sampler=bpf: the kernel copies the stacks at each CPU's clock
	 * tick (profile/bpfsampler.h); when it cannot (eBPF refused, not
	 * root, built without eBPF, the subject not Ruby), ptrace, and the
	 * status says why */
	uint8_t bpf;
	uint32_t rate_hz;       /* the in-kernel sampler's rate (bpf) */
	const struct rbp_vm_opts *vo;   /* how members of the process set attach */
};

struct rbp_recording_status {
	uint8_t bpf;            /* the in-kernel sampler is set up */
	int bpf_err;            /* bpf asked for and not set up: why (RBP_E*); else RBP_OK */
	char bpf_why[768];      /* the same in words ("" when bpf_err is RBP_OK) */
};

/* The native unwinding a recording did, over every process it read. */
struct rbp_recording_native {
	uint64_t unwinds;       /* native stacks unwound */
	uint64_t frames;        /* addresses they held */
	uint64_t symbolized;    /* addresses symbolized (not found in a cache) */
};

struct rbp_recording;

/*
 * Take over subject s -- opened by the caller and attached to its Ruby VM,
 * or, with c->subprocesses, a process that is not Ruby itself -- (s is
 * zeroed) and open what c asks for, in this order: the native unwinder,
 * the process set, the in-kernel sampler (whose failure is no error: see
 * st).  On failure everything, s's target too, is closed, *out is NULL and
 * the RBP_E* code says what failed.  st may be NULL.
 */
int rbp_recording_open(struct rbp_subject *s, const struct rbp_recording_config *c,
		       struct rbp_recording **out, struct rbp_recording_status *st);
/*
 * Sample until stopped (rbp_sample_loop): o gives the rate, duration,
 * filters, pause policy and callbacks; its native, procs and bpf are the
 * recording's.  The in-kernel sampler, when set up, is closed when the
 * loop ends.  Returns what rbp_sample_loop returns.
 */
int rbp_recording_run(struct rbp_recording *r, const struct rbp_sampler_opts *o,
		      struct rbp_profile *p, struct rbp_sampler_status *st);
/* The subject's PID. */
int rbp_recording_pid(const struct rbp_recording *r);
/* The subject's Ruby version, NULL when it is not Ruby itself. */
const char *rbp_recording_ruby(const struct rbp_recording *r);
/* The Ruby version the profile is of: the subject's, else the set's first member's ("" before any). */
const char *rbp_recording_version(const struct rbp_recording *r);
/* The process set (--subprocesses), NULL without one. */
struct rbp_procset *rbp_recording_procs(const struct rbp_recording *r);
/* 1 when native stacks are unwound (--native). */
int rbp_recording_native(const struct rbp_recording *r);
/* The native unwinding done: the subject's and every member's. */
void rbp_recording_native_stats(const struct rbp_recording *r, struct rbp_recording_native *out);
void rbp_recording_close(struct rbp_recording *r);   /* NULL-safe */

#endif
