/*
 * bpfcommon.h - what the loaders of rbpeek's eBPF programs (framecap.c,
 * oncpu.c) share: libbpf's messages, the thread map kept in step with a
 * thread list, and the frame-copy record read back.
 *
 * libbpf's messages: nothing below src/cli may print them.
 * libbpf reports through one print callback for the whole process, with no
 * context argument.  Between rbp_bpf_log_begin() and rbp_bpf_log_end() the
 * calling thread's libbpf warnings (the verifier's log among them when the
 * kernel refuses a program) are appended to the log given; outside, they
 * are dropped.  rbp_bpf_explain() turns a failure and that log into the
 * one sentence a loader hands back in its why.
 */
#ifndef RBP_PROC_BPFCOMMON_H
#define RBP_PROC_BPFCOMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/framecap.h"

struct rbp_bpf_log {
	char *s;        /* what libbpf said, lines ending in '\n' (owned) */
	size_t cap, len;
};

/* Start collecting into m (RBP_ENOMEM when its buffer cannot be had). */
int rbp_bpf_log_begin(struct rbp_bpf_log *m);
/* Stop collecting and free m's buffer. */
void rbp_bpf_log_end(struct rbp_bpf_log *m);
/*
 * why = "WHAT (strerror(e)): " then the last lines of m that fit, on one
 * line (the verifier's verdict ends its log); "WHAT (strerror(e))" alone
 * when e is EPERM (libbpf's lines then say nothing more).
 */
void rbp_bpf_explain(char *why, size_t why_len, const char *what, int e, const struct rbp_bpf_log *m);
/* A libbpf error (errno value, positive) as an RBP_E* code. */
int rbp_bpf_code(int e);

/*
 * One software perf event per CPU (PERF_TYPE_SOFTWARE, config, period,
 * sample_type): the BPF output rings of framecap.c, the sampling clocks of
 * oncpu.c.
 */
struct rbp_bpf_cpu_events {
	int *fd;           /* per CPU (0 .. n-1), -1 where none is open; owned, the caller
			    * closes what it keeps open and frees */
	size_t n;          /* CPUs (libbpf's possible CPUs, at least 1) */
	size_t opened;     /* events opened */
	int open_errno;    /* the last open that failed: its errno (0 none) ... */
	size_t open_cpu;   /* ... and CPU */
	int open_failed;   /* 1: the open of open_cpu is what failed (strict) */
};

/* The CPUs rbp_bpf_cpu_events_open() opens an event on (libbpf's possible CPUs, at least 1). */
size_t rbp_bpf_cpu_count(void);
/*
 * Open the event on every CPU, in order, and hand each to each(ctx, cpu,
 * fd, why, why_len) (NULL: none), whose first nonzero return stops and is
 * returned (with its sentence in why).  A
 * CPU that is offline (ENODEV) is skipped; so is one whose open fails
 * otherwise unless strict, when that ends it with open_failed set and
 * RBP_EPERM (EPERM, EACCES) or another RBP_E* code.  RBP_ENOMEM.  Opening
 * none is not an error here (opened says so).  ev's fds are left for the
 * caller to close (rbp_bpf_cpu_events_close), also on failure.
 */
int rbp_bpf_cpu_events_open(struct rbp_bpf_cpu_events *ev, uint32_t config, uint64_t period,
			    uint64_t sample_type, int strict,
			    int (*each)(void *ctx, size_t cpu, int fd, char *why, size_t why_len),
			    void *ctx, char *why, size_t why_len);
/* Close ev's fds (those >= 0: set one to -1 when something else owns it now), free it. */
void rbp_bpf_cpu_events_close(struct rbp_bpf_cpu_events *ev);

/*
 * Hash map fd map (u32 tid -> u64 thread) to hold tids[i] -> threads[i]:
 * the tids of *known (those put there before) not given are deleted, and
 * *known becomes tids.  RBP_OK or an RBP_E* code.
 */
int rbp_bpf_sync_threads(int map, pid_t **known, size_t *n_known, const pid_t *tids,
			 const uint64_t *threads, size_t n);
/*
 * The record a program emitted (struct fc_record's first size bytes, at
 * an 8-byte aligned b, frames of cfp_size bytes) as r, pointing into b.
 * 0 when it is malformed (then r is not to be used).
 */
int rbp_bpf_parse_record(const void *b, size_t size, uint16_t cfp_size,
			 struct rbp_framecap_record *r);

#endif
