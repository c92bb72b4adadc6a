/*
 * ktrace.c - the kernel streams of the tracer: syscalls and scheduler states
 * of the current process from perf tracepoints (see ktrace.h for the design).
 *
 * Layout of one handle:
 *   rings[c]   one perf ring per CPU c, mapped read-only + write_backward:
 *              the kernel writes each record below the previous one and
 *              moves data_head down (it starts at 0 and wraps as a u64), so
 *              the newest record starts at data_head and older ones follow
 *              at higher offsets; `mark` is data_head at the last reset.
 *   fds        3 events per (thread present at open, CPU): sys_enter,
 *              sys_exit, sched_switch (which also asks for perf's switch
 *              and fork records).  The first fd opened on a CPU owns its
 *              ring; all others are SET_OUTPUT into it.
 *   wake_fd    per CPU, sched_waking of the whole CPU filtered in the kernel
 *              on the woken tid being one of ours (see open_wakeup).
 *
 * Opening races with thread creation: a thread made by an already-covered
 * thread inherits the events (and its creator's events log a FORK record),
 * one made by a not-yet-covered thread does not.  So open rescans
 * /proc/self/task until a pass finds no thread that is neither opened nor
 * announced by a FORK record (opening an inherited thread again would
 * double its events).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* syscall(), O_CLOEXEC; builds outside our Makefile too */
#endif
#include "ktrace.h"
#include "tracepoints.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RBK_FILTER_MAX 4096        /* the kernel takes filters of up to a page */

struct rbk_ring {
	int fd;                               /* owner of the ring (-1: CPU offline) */
	int wake_fd;                          /* this CPU's sched_waking event (-1: none) */
	struct perf_event_mmap_page *pg;      /* NULL when unmapped */
	unsigned char *data;                  /* pg + one page */
	uint64_t size;                        /* data area bytes, a power of two */
	uint64_t mark;                        /* data_head at the last reset */
};

struct rbk_trace {
	pid_t pid;                 /* the process traced; another pid means forked */
	int ncpu;
	struct rbk_ring *rings;    /* [ncpu] */
	int *fds;                  /* every event fd (ring owners included) */
	size_t nfds, capfds;
	int *tids;                 /* threads opened explicitly */
	size_t ntids, captids;
	int inherit_thread;        /* kernel knows attr.inherit_thread (5.13+) */
	char *filter;              /* the wakeup events' filter: our tids */
	struct rbk_tp tp[NTP];
};

/* ---- opening events ------------------------------------------------------ */

static int push_int(int **v, size_t *n, size_t *cap, int x)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		int *nv = realloc(*v, nc * sizeof(**v));
		if (!nv) return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* One event: of thread tid on cpu, or for TP_WAKEUP (tid -1) of the whole
 * CPU, created disabled until open_wakeup has narrowed it to our threads. */
void rbk_attr_inherit_thread(struct perf_event_attr *a, int on)
{
	char *word = (char *)a + offsetof(struct perf_event_attr, read_format) + sizeof(a->read_format);
	uint64_t w;

	memcpy(&w, word, sizeof(w));
	w = on ? w | RBK_INHERIT_THREAD : w & ~RBK_INHERIT_THREAD;
	memcpy(word, &w, sizeof(w));
}

static int open_event(struct rbk_trace *t, int tp, pid_t tid, int cpu)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_TRACEPOINT;
	a.size = sizeof(a);
	a.config = (uint64_t)t->tp[tp].id;
	a.sample_period = 1;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW;
	a.inherit = tp != TP_WAKEUP;
	rbk_attr_inherit_thread(&a, tp != TP_WAKEUP && t->inherit_thread);
	a.disabled = tp == TP_WAKEUP;
	a.write_backward = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	a.sample_id_all = 1;
	if (tp == TP_SWITCH) {
		a.context_switch = 1;   /* PERF_RECORD_SWITCH: gives "switched in" */
		a.task = 1;             /* PERF_RECORD_FORK: tells open which threads inherited */
	}
	for (;;) {
		int fd = (int)syscall(SYS_perf_event_open, &a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0) return fd;
		if (errno == EINVAL && tp != TP_WAKEUP && t->inherit_thread) {   /* kernels before 5.13 */
			t->inherit_thread = 0;
			rbk_attr_inherit_thread(&a, 0);
			continue;
		}
		return -errno;
	}
}

static int map_ring(struct rbk_ring *r, int fd, size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 1;
	while (n * page < bytes) n *= 2;
	void *m = mmap(NULL, (n + 1) * page, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) return -errno;
	r->fd = fd;
	r->pg = m;
	r->data = (unsigned char *)m + page;
	r->size = n * page;
	r->mark = 0;
	return 0;
}

static int open_thread(struct rbk_trace *t, pid_t tid, size_t bytes, char *why, size_t why_len)
{
	for (int cpu = 0; cpu < t->ncpu; cpu++) {
		struct rbk_ring *r = &t->rings[cpu];
		for (int tp = 0; tp < TP_WAKEUP; tp++) {
			int fd = open_event(t, tp, tid, cpu), rc = 0;
			if (fd == -ENODEV && tp == 0 && r->fd < 0) break;   /* offline CPU */
			if (fd == -ESRCH) return 0;                         /* thread exited */
			if (fd < 0) {
				char msg[128];
				snprintf(msg, sizeof(msg), "perf_event_open: %s", strerror(-fd));
				if (fd == -EACCES || fd == -EPERM) return rbk_check_privilege(why, why_len, msg);
				snprintf(why, why_len, "kernel streams: %s%s", msg, fd != -EMFILE ? "" :
				         " (3 per CPU per thread present at open: start tracing before "
				         "threads are created, or raise RLIMIT_NOFILE)");
				return fd;
			}
			if ((rc = push_int(&t->fds, &t->nfds, &t->capfds, fd))) { close(fd); return rc; }
			if (r->fd >= 0) {
				if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) == 0) continue;
				rc = -errno;
				snprintf(why, why_len, "kernel streams: PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(-rc));
				return rc;
			}
			if ((rc = map_ring(r, fd, bytes))) {
				snprintf(why, why_len, "kernel streams: mmap of a %zu-byte ring: %s (see "
				         "kernel.perf_event_mlock_kb and RLIMIT_MEMLOCK)", bytes, strerror(-rc));
				return rc;
			}
		}
	}
	return push_int(&t->tids, &t->ntids, &t->captids, tid);
}

/* ---- reading rings -------------------------------------------------------- */

struct rec_sample {            /* PERF_SAMPLE_TID | TIME | CPU, then u32 raw size + raw */
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
};

struct rec_id {                /* sample_id trailer of non-sample records */
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
};

/* Copy what r holds since its mark into buf (newest record first); the ring
 * is paused meanwhile so the kernel does not overwrite what we copy. */
static size_t copy_ring(struct rbk_ring *r, unsigned char *buf)
{
	ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
	uint64_t head = __atomic_load_n(&r->pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t len = r->mark - head;
	if (len > r->size) len = r->size;
	uint64_t at = head & (r->size - 1), first = r->size - at < len ? r->size - at : len;
	memcpy(buf, r->data + at, first);
	memcpy(buf + first, r->data, len - first);
	ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
	return (size_t)len;
}

static int64_t field(const unsigned char *raw, uint32_t len, const struct rbk_field *f)
{
	if ((uint32_t)f->off + (uint32_t)f->size > len) return 0;
	const unsigned char *p = raw + f->off;
	switch (f->size) {
	case 1: { uint8_t v = p[0]; return f->sign ? (int64_t)(int8_t)v : (int64_t)v; }
	case 2: { uint16_t v; memcpy(&v, p, 2); return f->sign ? (int64_t)(int16_t)v : (int64_t)v; }
	case 4: { uint32_t v; memcpy(&v, p, 4); return f->sign ? (int64_t)(int32_t)v : (int64_t)v; }
	default: { int64_t v; memcpy(&v, p, 8); return v; }
	}
}

/* prev_state of sched_switch: one TASK_REPORT bit (S=1, D=2, T=4, t=8, X=16,
 * Z=32, P=64, I=128) or none (R); the bit above them flags preemption. */
static uint16_t switch_state(int64_t s)
{
	s &= 0xff;
	if (s == 0) return RBK_RUNNABLE;
	if (s & 0x02) return RBK_BLOCKED;
	if (s & 0x0c) return RBK_STOPPED;
	if (s & 0x30) return RBK_DEAD;
	return RBK_SLEEPING;                       /* S, P (parked), I (idle) */
}

/* Turn one sample into an event; 0 when it is not one of ours. */
static int sample_event(const struct rbk_trace *t, const unsigned char *p, size_t len, struct rbk_event *ev)
{
	struct rec_sample s;
	uint32_t raw_size;
	if (len < sizeof(s) + 4) return 0;
	memcpy(&s, p, sizeof(s));
	memcpy(&raw_size, p + sizeof(s), 4);
	const unsigned char *raw = p + sizeof(s) + 4;
	if (raw_size < 2 || raw_size > len - sizeof(s) - 4) return 0;
	uint16_t type;
	memcpy(&type, raw, 2);
	memset(ev, 0, sizeof(*ev));
	ev->ts_ns = s.time;
	ev->tid = (int32_t)s.tid;
	ev->cpu = (int32_t)s.cpu;
	const struct rbk_tp *tp = t->tp;
	if (type == tp[TP_ENTER].id) {
		ev->kind = RBK_SYS_ENTER;
		ev->nr_or_ret = field(raw, raw_size, &tp[TP_ENTER].f[0]);
	} else if (type == tp[TP_EXIT].id) {
		ev->kind = RBK_SYS_EXIT;
		ev->nr_or_ret = field(raw, raw_size, &tp[TP_EXIT].f[0]);
	} else if (type == tp[TP_SWITCH].id) {
		ev->kind = RBK_SCHED_SWITCH_OUT;
		ev->tid = (int32_t)field(raw, raw_size, &tp[TP_SWITCH].f[0]);
		ev->state = switch_state(field(raw, raw_size, &tp[TP_SWITCH].f[1]));
	} else if (type == tp[TP_WAKEUP].id) {
		ev->kind = RBK_SCHED_WAKEUP;
		ev->tid = (int32_t)field(raw, raw_size, &tp[TP_WAKEUP].f[0]);
		ev->cpu = (int32_t)field(raw, raw_size, &tp[TP_WAKEUP].f[1]);
		ev->nr_or_ret = (int32_t)s.tid;
	} else {
		return 0;
	}
	return 1;
}

/* Visit the records of buf (as copied by copy_ring): fn gets each header and
 * the bytes after it; stops at the first torn or unwritten record. */
static int walk_records(const unsigned char *buf, size_t len,
                        int (*fn)(void *ctx, const struct perf_event_header *h, const unsigned char *body, size_t blen),
                        void *ctx)
{
	size_t at = 0;
	while (at + sizeof(struct perf_event_header) <= len) {
		struct perf_event_header h;
		memcpy(&h, buf + at, sizeof(h));
		if (h.size < sizeof(h) || h.size > len - at) break;
		int rc = fn(ctx, &h, buf + at + sizeof(h), h.size - sizeof(h));
		if (rc) return rc;
		at += h.size;
	}
	return 0;
}

struct evbuf {
	const struct rbk_trace *t;
	struct rbk_event *ev;
	size_t n, cap;
	int *forks;                /* with record_fork: tids in FORK records */
	size_t nforks, capforks;
};

static int evbuf_push(struct evbuf *b, const struct rbk_event *ev)
{
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;
		struct rbk_event *nv = realloc(b->ev, nc * sizeof(*nv));
		if (!nv) return -ENOMEM;
		b->ev = nv;
		b->cap = nc;
	}
	b->ev[b->n++] = *ev;
	return 0;
}

static int record_event(void *ctx, const struct perf_event_header *h, const unsigned char *body, size_t blen)
{
	struct evbuf *b = ctx;
	struct rbk_event ev;
	if (h->type == PERF_RECORD_SAMPLE) {
		if (!sample_event(b->t, body, blen, &ev)) return 0;
	} else if (h->type == PERF_RECORD_SWITCH && !(h->misc & PERF_RECORD_MISC_SWITCH_OUT)) {
		struct rec_id id;      /* switched out comes from sched_switch, with the state */
		if (blen < sizeof(id)) return 0;
		memcpy(&id, body, sizeof(id));
		ev = (struct rbk_event){ id.time, (int32_t)id.tid, (int32_t)id.cpu, RBK_SCHED_SWITCH_IN, 0, 0 };
	} else {
		return 0;
	}
	return evbuf_push(b, &ev);
}

static int record_fork(void *ctx, const struct perf_event_header *h, const unsigned char *body, size_t blen)
{
	struct evbuf *b = ctx;
	uint32_t ids[4];           /* pid, ppid, tid, ptid */
	if (h->type != PERF_RECORD_FORK || blen < sizeof(ids)) return 0;
	memcpy(ids, body, sizeof(ids));
	return push_int(&b->forks, &b->nforks, &b->capforks, (int)ids[2]);
}

/* Run fn over every ring's records since its mark. */
static int walk_rings(struct rbk_trace *t, struct evbuf *b,
                      int (*fn)(void *, const struct perf_event_header *, const unsigned char *, size_t))
{
	uint64_t max = 0;
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].pg && t->rings[c].size > max) max = t->rings[c].size;
	unsigned char *buf = max ? malloc(max) : NULL;
	if (max && !buf) return -ENOMEM;
	int rc = 0;
	for (int c = 0; c < t->ncpu && !rc; c++) {
		struct rbk_ring *r = &t->rings[c];
		if (!r->pg) continue;
		size_t first = b->n, len = copy_ring(r, buf);
		rc = walk_records(buf, len, fn, b);
		for (size_t i = first, j = b->n; i + 1 < j; i++, j--) {   /* oldest first */
			struct rbk_event tmp = b->ev[i];
			b->ev[i] = b->ev[j - 1];
			b->ev[j - 1] = tmp;
		}
	}
	free(buf);
	return rc;
}

/* Stable sort by time (each ring's run is already in order; ties keep it). */
static int sort_events(struct rbk_event *ev, size_t n)
{
	struct rbk_event *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	if (!tmp) return -ENOMEM;
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) tmp[k++] = ev[j].ts_ns < ev[i].ts_ns ? ev[j++] : ev[i++];
			while (i < mid) tmp[k++] = ev[i++];
			while (j < hi) tmp[k++] = ev[j++];
		}
		memcpy(ev, tmp, n * sizeof(*ev));
	}
	free(tmp);
	return 0;
}

/* ---- the interface -------------------------------------------------------- */

static int contains(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x) return 1;
	return 0;
}

/* One pass over /proc/self/task: open the threads neither opened nor
 * inherited (announced by a FORK record).  *added counts the opened ones. */
static int scan_threads(struct rbk_trace *t, size_t bytes, int *added, char *why, size_t why_len)
{
	struct evbuf b = { .t = t };
	int rc = t->ntids ? walk_rings(t, &b, record_fork) : 0;
	DIR *d = opendir("/proc/self/task");
	if (!d && !rc) {
		rc = -errno;
		snprintf(why, why_len, "kernel streams: /proc/self/task: %s", strerror(errno));
	}
	for (struct dirent *de; !rc && d && (de = readdir(d));) {
		int tid = atoi(de->d_name);
		if (tid <= 0 || contains(t->tids, t->ntids, tid) || contains(b.forks, b.nforks, tid))
			continue;
		rc = open_thread(t, tid, bytes, why, why_len);
		++*added;
	}
	if (d) closedir(d);
	free(b.forks);
	free(b.ev);
	return rc;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* "pid==5||(pid>=7&&pid<=9)" for the sorted tids.  Past the kernel's limit
 * (hundreds of threads with scattered tids) it keeps the runs that fit and
 * returns -E2BIG. */
static int build_filter(char *f, size_t len, const int *tids, size_t n)
{
	size_t at = 0;
	f[0] = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && tids[j + 1] == tids[j] + 1) j++;
		int w = j == i ? snprintf(f + at, len - at, "%spid==%d", at ? "||" : "", tids[i])
		               : snprintf(f + at, len - at, "%s(pid>=%d&&pid<=%d)", at ? "||" : "", tids[i], tids[j]);
		if (w < 0 || (size_t)w >= len - at) {
			f[at] = 0;
			return at ? -E2BIG : -ESRCH;
		}
		at += (size_t)w;
		i = j + 1;
	}
	return at ? 0 : -ESRCH;
}

/* The wakeup events are per CPU, not per thread: the kernel (6.x) counts
 * but does not sample a tracepoint in the events of a task that is not the
 * current one, and a wakeup mostly runs in someone else's context (the
 * timer or network interrupt, another process).  The tracepoint is
 * sched_waking, which fires in try_to_wake_up on the waker's CPU, in the
 * waker's context.  sched_wakeup fires where the wakeup completes: for a
 * wakeup queued to an idle CPU that is the target CPU, in the context of
 * whatever runs there (the IPI or idle loop), so its "waker" was wrong and
 * it was lost whenever that context was one perf does not sample; a wakeup
 * by a traced thread was then missing (issue 6; docs/trace-kernel.md).
 * A filter cannot be changed once set, so a new filter means new events,
 * opened before the old ones close so no wakeup falls between them. */
static int open_wakeup(struct rbk_trace *t, int cpu, const char *filter)
{
	struct rbk_ring *r = &t->rings[cpu];
	int fd = open_event(t, TP_WAKEUP, -1, cpu), rc = 0;
	if (fd < 0) return fd;
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) != 0 || ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter) != 0 ||
	    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (r->wake_fd >= 0) close(r->wake_fd);
	r->wake_fd = fd;
	return 0;
}

int rbk_update_threads(struct rbk_trace *t)
{
	int *tids = NULL, rc = 0, big = 0;
	size_t n = 0, cap = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d) return -errno;
	for (struct dirent *de; !rc && (de = readdir(d));)
		if (atoi(de->d_name) > 0) rc = push_int(&tids, &n, &cap, atoi(de->d_name));
	closedir(d);
	char *f = rc ? NULL : malloc(RBK_FILTER_MAX);
	if (!rc && !f) rc = -ENOMEM;
	if (!rc) {
		qsort(tids, n, sizeof(*tids), cmp_int);
		rc = build_filter(f, RBK_FILTER_MAX, tids, n);
		if (rc == -E2BIG) big = rc, rc = 0;     /* the threads that fit */
	}
	free(tids);
	if (rc || (t->filter && !strcmp(t->filter, f))) {   /* same threads: nothing to do */
		free(f);
		return rc ? rc : big;
	}
	for (int c = 0; !rc && c < t->ncpu; c++)
		if (t->rings[c].fd >= 0) rc = open_wakeup(t, c, f);
	free(t->filter);
	t->filter = f;
	return rc ? rc : big;
}

int rbk_open(struct rbk_trace **out, size_t bytes_per_buffer, char *why, size_t why_len)
{
	*out = NULL;
	int rc = rbk_check_privilege(why, why_len, NULL);
	if (rc) return rc;
	struct rbk_trace *t = calloc(1, sizeof(*t));
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	if (!t || ncpu < 1 || !(t->rings = calloc((size_t)ncpu, sizeof(*t->rings)))) {
		free(t);
		snprintf(why, why_len, "kernel streams: out of memory");
		return -ENOMEM;
	}
	t->pid = getpid();
	t->ncpu = (int)ncpu;
	t->inherit_thread = 1;
	for (int c = 0; c < t->ncpu; c++) t->rings[c].fd = t->rings[c].wake_fd = -1;
	if (!bytes_per_buffer) bytes_per_buffer = 1 << 20;
	rc = rbk_tp_load(t->tp, why, why_len);
	for (int pass = 0, added = 1; !rc && added; pass++) {
		added = 0;
		rc = scan_threads(t, bytes_per_buffer, &added, why, why_len);
		if (!rc && added && pass == 100) {
			snprintf(why, why_len, "kernel streams: threads keep appearing faster than they can be traced");
			rc = -EAGAIN;
		}
	}
	if (!rc) {
		rc = rbk_update_threads(t);
		if (rc == -E2BIG) rc = 0;   /* some threads' wakeups are missing; see ktrace.h */
		else if (rc) snprintf(why, why_len, "kernel streams: sched_waking events: %s", strerror(-rc));
	}
	if (rc) {
		rbk_close(t);
		return rc;
	}
	rbk_reset(t);   /* the FORK records of open are not part of the window */
	*out = t;
	return 0;
}

int rbk_drain(struct rbk_trace *t, int (*cb)(void *ctx, const struct rbk_event *ev), void *ctx)
{
	if (getpid() != t->pid) return -ECHILD;
	rbk_update_threads(t);   /* best effort: threads made since the last update */
	struct evbuf b = { .t = t };
	int rc = walk_rings(t, &b, record_event);
	if (!rc) rc = sort_events(b.ev, b.n);
	for (size_t i = 0; !rc && i < b.n; i++) rc = cb(ctx, &b.ev[i]);
	free(b.ev);
	return rc;
}

void rbk_reset(struct rbk_trace *t)
{
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].pg) t->rings[c].mark = __atomic_load_n(&t->rings[c].pg->data_head, __ATOMIC_ACQUIRE);
}

void rbk_close(struct rbk_trace *t)
{
	if (!t) return;
	for (size_t i = 0; i < t->nfds; i++) close(t->fds[i]);
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].wake_fd >= 0) close(t->rings[c].wake_fd);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].pg) munmap(t->rings[c].pg, t->rings[c].size + page);
	free(t->rings);
	free(t->fds);
	free(t->tids);
	free(t->filter);
	free(t);
}
