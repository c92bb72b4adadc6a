/*
 * framecap_none.c - framecap.h for a build without eBPF (make BPF=0, what
 * the gem does when libbpf-dev, clang or bpftool is missing): no program
 * can be loaded, and rbp_framecap_open says why (RBP_ENOBPF).  Its users
 * fall back as when the kernel refuses eBPF.
 */
#include "proc/framecap.h"

#include <stdio.h>

#include "util/err.h"

int rbp_framecap_open(const struct rbp_framecap_layout *L, const uint8_t *arg_reg, size_t n_probes,
		      pid_t count_pid, struct rbp_framecap **out, char *why, size_t why_len)
{
	(void)L, (void)arg_reg, (void)n_probes, (void)count_pid;
	*out = NULL;
	snprintf(why, why_len, "%s", rbp_strerror(RBP_ENOBPF));
	return RBP_ENOBPF;
}

int rbp_framecap_prog_fd(const struct rbp_framecap *c, size_t probe)
{
	(void)c, (void)probe;
	return -1;
}

int rbp_framecap_set_threads(struct rbp_framecap *c, const pid_t *tids, const uint64_t *threads,
			     size_t n)
{
	(void)c, (void)tids, (void)threads, (void)n;
	return RBP_ENOBPF;
}

int rbp_framecap_totals(const struct rbp_framecap *c, uint64_t *hits, uint64_t *uncounted)
{
	(void)c;
	*hits = *uncounted = 0;
	return RBP_ENOBPF;
}

int rbp_framecap_counts(const struct rbp_framecap *c,
			int (*fn)(void *ctx, uint64_t arg, uint64_t hits), void *ctx)
{
	(void)c, (void)fn, (void)ctx;
	return RBP_ENOBPF;
}

int rbp_framecap_stop(struct rbp_framecap *c)
{
	(void)c;
	return RBP_ENOBPF;
}

int rbp_framecap_set_pick(struct rbp_framecap *c, uint32_t pick)
{
	(void)c, (void)pick;
	return RBP_ENOBPF;
}

int rbp_framecap_read(struct rbp_framecap *c,
		      int (*fn)(void *ctx, const struct rbp_framecap_record *r), void *ctx)
{
	(void)c, (void)fn, (void)ctx;
	return RBP_ENOBPF;
}

int rbp_framecap_enable_stats(struct rbp_framecap *c)
{
	(void)c;
	return RBP_ENOBPF;
}

void rbp_framecap_stats(const struct rbp_framecap *c, struct rbp_framecap_stats *out)
{
	(void)c;
	*out = (struct rbp_framecap_stats){ 0 };
}

void rbp_framecap_close(struct rbp_framecap *c)
{
	(void)c;
}
