/*
 * oncpu_none.c - oncpu.h for a build without eBPF (make BPF=0): nothing
 * can be loaded, and rbp_oncpu_open says why (RBP_ENOBPF); its users fall
 * back as when the kernel refuses eBPF.
 */
#include "proc/oncpu.h"

#include <stdio.h>
#include <string.h>

#include "util/err.h"

int rbp_oncpu_open(uint32_t rate_hz, struct rbp_oncpu **out, char *why, size_t why_len)
{
	(void)rate_hz;
	*out = NULL;
	snprintf(why, why_len, "%s", rbp_strerror(RBP_ENOBPF));
	return RBP_ENOBPF;
}

int rbp_oncpu_watch(struct rbp_oncpu *s, pid_t pid, const struct rbp_framecap_layout *L)
{
	(void)s, (void)pid, (void)L;
	return RBP_ENOBPF;
}

void rbp_oncpu_unwatch(struct rbp_oncpu *s, pid_t pid)
{
	(void)s, (void)pid;
}

int rbp_oncpu_set_threads(struct rbp_oncpu *s, pid_t pid, const pid_t *tids,
			  const uint64_t *threads, size_t n)
{
	(void)s, (void)pid, (void)tids, (void)threads, (void)n;
	return RBP_ENOBPF;
}

int rbp_oncpu_read(struct rbp_oncpu *s, int (*fn)(void *ctx, const struct rbp_framecap_record *r),
		   void *ctx)
{
	(void)s, (void)fn, (void)ctx;
	return RBP_ENOBPF;
}

int rbp_oncpu_enable_stats(struct rbp_oncpu *s)
{
	(void)s;
	return RBP_ENOBPF;
}

void rbp_oncpu_stats(const struct rbp_oncpu *s, struct rbp_oncpu_stats *out)
{
	(void)s;
	memset(out, 0, sizeof(*out));
}

void rbp_oncpu_close(struct rbp_oncpu *s)
{
	(void)s;
}
