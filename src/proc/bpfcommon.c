/*
 * bpfcommon.c - what the loaders of the eBPF programs share (see
 * bpfcommon.h).
 */
#include "proc/bpfcommon.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/framecap_record.h"
#include "proc/perfring.h"
#include "util/err.h"

#define LOG_CAP 8192   /* the tail is what matters: the verifier's verdict */

/*
 * Where libbpf's warnings go on this thread (NULL: dropped).  The one
 * piece of state outside a caller's objects: libbpf's print hook has no
 * context argument.
 */
static _Thread_local struct rbp_bpf_log *collect_to;

static int collect(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	struct rbp_bpf_log *m = collect_to;

	char *text = NULL;

	if (!m || level == LIBBPF_DEBUG || vasprintf(&text, fmt, ap) < 0)
		return 0;
	/* keep the tail (a verifier log comes in one piece, its verdict last) */
	size_t n = strlen(text), keep = m->cap - 1;
	const char *from = n > keep ? text + (n - keep) : text;
	n = strlen(from);
	if (m->len + n > keep) {
		size_t drop = m->len + n - keep;
		memmove(m->s, m->s + drop, m->len - drop);
		m->len -= drop;
	}
	memcpy(m->s + m->len, from, n);
	m->len += n;
	m->s[m->len] = 0;
	free(text);
	return 0;
}

int rbp_bpf_log_begin(struct rbp_bpf_log *m)
{
	*m = (struct rbp_bpf_log){ .cap = LOG_CAP };
	if (!(m->s = calloc(1, m->cap)))
		return RBP_ENOMEM;
	libbpf_set_print(collect);
	collect_to = m;
	return RBP_OK;
}

void rbp_bpf_log_end(struct rbp_bpf_log *m)
{
	collect_to = NULL;
	free(m->s);
	*m = (struct rbp_bpf_log){ 0 };
}

void rbp_bpf_explain(char *why, size_t why_len, const char *what, int e, const struct rbp_bpf_log *m)
{
	size_t at = (size_t)snprintf(why, why_len, "%s (%s)", what, strerror(e));
	/*
	 * Refused for want of privilege, libbpf's lines only restate it (and
	 * point at RLIMIT_MEMLOCK, which kernels that account eBPF memory to
	 * the cgroup, 5.11+, do not use): the caller says what is missing.
	 */
	if (!m->len || e == EPERM || at + 8 >= why_len)
		return;
	/* from the end, back over lines while they fit */
	size_t room = why_len - at - 3, start = m->len;
	while (start > 0) {
		size_t p = start - 1;
		while (p > 0 && m->s[p - 1] != '\n')
			p--;
		if (m->len - p > room)
			break;
		start = p;
	}
	if (start == m->len)   /* the last line alone is too long: its end */
		start = m->len - room;
	char *o = why + at;
	*o++ = ':', *o++ = ' ';
	for (size_t i = start; i < m->len; i++)
		*o++ = m->s[i] == '\n' ? (i + 1 < m->len ? ' ' : '\0') : m->s[i];
	*o = 0;
}

int rbp_bpf_code(int e)
{
	return e == EPERM ? RBP_EPERM
	       : e == ENOSYS || e == EOPNOTSUPP || e == ENOENT ? RBP_ENOUPROBE
	       : e == ENOMEM ? RBP_ENOMEM
	       : RBP_EINVAL;
}

size_t rbp_bpf_cpu_count(void)
{
	int n = libbpf_num_possible_cpus();
	return n > 0 ? (size_t)n : 1;
}

int rbp_bpf_cpu_events_open(struct rbp_bpf_cpu_events *ev, uint32_t config, uint64_t period,
			    uint64_t sample_type, int strict,
			    int (*each)(void *ctx, size_t cpu, int fd, char *why, size_t why_len),
			    void *ctx, char *why, size_t why_len)
{
	struct perf_event_attr a;
	int err;

	*ev = (struct rbp_bpf_cpu_events){ .n = rbp_bpf_cpu_count() };
	if (!(ev->fd = malloc(ev->n * sizeof(*ev->fd))))
		return RBP_ENOMEM;
	for (size_t i = 0; i < ev->n; i++)
		ev->fd[i] = -1;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = config;
	a.sample_period = period;
	a.sample_type = sample_type;
	for (size_t i = 0; i < ev->n; i++) {
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, (int)i, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			ev->open_errno = e;
			ev->open_cpu = i;
			if (e == ENODEV || !strict)
				continue;   /* an offline CPU runs nothing */
			ev->open_failed = 1;
			return e == EACCES || e == EPERM ? RBP_EPERM : rbp_perf_errno(e);
		}
		ev->fd[i] = fd;
		ev->opened++;
		if (each && (err = each(ctx, i, fd, why, why_len)))
			return err;
	}
	return RBP_OK;
}

void rbp_bpf_cpu_events_close(struct rbp_bpf_cpu_events *ev)
{
	for (size_t i = 0; ev->fd && i < ev->n; i++)
		if (ev->fd[i] >= 0)
			close(ev->fd[i]);
	free(ev->fd);
	*ev = (struct rbp_bpf_cpu_events){ 0 };
}

int rbp_bpf_sync_threads(int map, pid_t **known, size_t *n_known, const pid_t *tids,
			 const uint64_t *threads, size_t n)
{
	pid_t *kept;

	for (size_t i = 0; i < *n_known; i++) {
		size_t k = 0;
		while (k < n && tids[k] != (*known)[i])
			k++;
		uint32_t key = (uint32_t)(*known)[i];
		if (k == n)
			bpf_map_delete_elem(map, &key);
	}
	*n_known = 0;
	if (!(kept = realloc(*known, (n ? n : 1) * sizeof(*kept))))
		return RBP_ENOMEM;
	*known = kept;
	for (size_t i = 0; i < n; i++) {
		uint32_t key = (uint32_t)tids[i];
		if (bpf_map_update_elem(map, &key, &threads[i], BPF_ANY))
			return rbp_perf_errno(errno);
		kept[(*n_known)++] = tids[i];
	}
	return RBP_OK;
}

int rbp_bpf_parse_record(const void *b, size_t size, uint16_t cfp_size,
			 struct rbp_framecap_record *r)
{
	const uint8_t *p = b;
	struct fc_record h;   /* its header only */

	if (size < FC_HDR)
		return 0;
	memcpy(&h, p, FC_HDR);
	if (h.n_frames > FC_MAX_FRAMES ||
	    FC_HDR + (size_t)h.n_frames * (cfp_size + 8u * FC_ENV_WORDS) > size)
		return 0;
	memset(r, 0, sizeof(*r));
	r->probe = h.probe;
	r->tid = (pid_t)h.tid;
	r->time_ns = h.time_ns;
	r->arg = h.arg;
	r->cfp = h.cfp;
	r->n_frames = h.n_frames;
	r->truncated = h.truncated != 0;
	r->frames = p + FC_HDR;
	r->gc_flags = p + offsetof(struct fc_record, gc_flags);
	r->gvl_owner = h.gvl_owner;
	r->env = (const uint64_t *)(const void *)(p + FC_HDR + (size_t)h.n_frames * cfp_size);
	return 1;
}
