/*
 * nokernel.c - the kernel-streams interface (ktrace.h) for builds whose
 * kernel headers are too old for ktrace.c (no perf_event_attr.inherit_thread,
 * Linux < 5.13, e.g. Debian 11): every call says the streams are absent, so
 * the tracer records everything else.  extconf.rb picks this file or
 * ktrace.c.
 */
#include <errno.h>
#include <stdio.h>

#include "ktrace.h"

int rbk_open(struct rbk_trace **out, size_t bytes_per_buffer, char *why, size_t why_len)
{
	*out = NULL;
	snprintf(why, why_len, "kernel streams: this build of rbpeek has none (its kernel headers "
		 "predate perf_event_attr.inherit_thread, Linux 5.13)");
	return -ENOSYS;
}

int rbk_drain(struct rbk_trace *t, int (*cb)(void *ctx, const struct rbk_event *ev), void *ctx)
{
	return 0;
}

void rbk_reset(struct rbk_trace *t)
{
}

int rbk_update_threads(struct rbk_trace *t)
{
	return 0;
}

void rbk_close(struct rbk_trace *t)
{
}

const char *rbk_syscall_name(long nr)
{
	return NULL;
}
