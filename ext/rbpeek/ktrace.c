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
#include <sys/socket.h>
#include <sys/stat.h>
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
	pid_t pid;                 /* the process that opened it; another pid means forked */
	pid_t target;              /* the process traced (pid, or another: rbk_open_pid) */
	int remote;                /* >= 0: a remote handle, this socket to the opener */
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

/* ---- remote handles -------------------------------------------------------- */

/*
 * A remote handle asks the process that opened the events (rbpeek, as
 * root, for its child: see ktrace.h) over a stream socket.  Requests are
 * one byte: 'O' open (reset), 'R' reset, 'U' update threads, 'D' drain.
 * Every reply starts with an int32 rc (0 or -errno); 'O' then sends a
 * uint32 length and that many bytes of reason, 'D' a uint32 count and that
 * many struct rbk_event.
 */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* $RBPEEK_TRACE_KFD ("FD:PID") when it is for this process and FD is still
 * the socket our parent (root's rbpeek) made; else -1. */
static int remote_fd(void)
{
	const char *env = getenv("RBPEEK_TRACE_KFD");
	int fd, pid;
	struct stat st;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (!env || sscanf(env, "%d:%d", &fd, &pid) != 2 || fd < 3 || pid != getpid()) return -1;
	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode)) return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid != getppid() || cred.uid != 0)
		return -1;
	return fd;
}

/* Send request op; read rc and, for 'O', the reason into why, for 'D', the
 * count into *n (events follow, for the caller to read). */
static int remote_call(struct rbk_trace *t, char op, uint32_t *n, char *why, size_t why_len)
{
	int32_t rc;
	int e = write_all(t->remote, &op, 1);
	if (!e) e = read_all(t->remote, &rc, sizeof(rc));
	if (e) return e;
	if (op == 'O' || op == 'D') {
		uint32_t len;
		if ((e = read_all(t->remote, &len, sizeof(len)))) return e;
		if (op == 'D') {
			*n = len;
			return rc;
		}
		char buf[512];
		size_t keep = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
		if ((e = read_all(t->remote, buf, keep))) return e;
		for (size_t left = len - keep; left;) {      /* the rest is dropped */
			char skip[64];
			size_t k = left < sizeof(skip) ? left : sizeof(skip);
			if ((e = read_all(t->remote, skip, k))) return e;
			left -= k;
		}
		buf[keep] = 0;
		if (why && why_len) snprintf(why, why_len, "%s", buf);
	}
	return rc;
}

static int remote_open(struct rbk_trace **out, int fd, char *why, size_t why_len)
{
	struct rbk_trace *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(why, why_len, "kernel streams: out of memory");
		return -ENOMEM;
	}
	t->pid = t->target = getpid();
	t->remote = fd;
	int rc = remote_call(t, 'O', NULL, why, why_len);
	if (rc) {
		if (!*why) snprintf(why, why_len, "kernel streams: from rbpeek: %s", strerror(-rc));
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

static int remote_drain(struct rbk_trace *t, int (*cb)(void *ctx, const struct rbk_event *ev), void *ctx)
{
	uint32_t n = 0;
	int rc = remote_call(t, 'D', &n, NULL, 0);
	struct rbk_event ev[256];
	/* the events come whatever rc is (none on failure): read them all */
	for (uint32_t at = 0; at < n;) {
		uint32_t k = n - at < 256 ? n - at : 256;
		int e = read_all(t->remote, ev, k * sizeof(*ev));
		if (e) return e;
		for (uint32_t i = 0; i < k && !rc; i++) rc = cb(ctx, &ev[i]);
		at += k;
	}
	return rc;
}

struct serve_buf {
	struct rbk_event *ev;
	size_t n, cap;
};

static int serve_push(void *ctx, const struct rbk_event *ev)
{
	struct serve_buf *b = ctx;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;
		struct rbk_event *nv = realloc(b->ev, nc * sizeof(*nv));
		if (!nv) return -ENOMEM;
		b->ev = nv;
		b->cap = nc;
	}
	b->ev[b->n] = *ev;
	/* the waker may be any process: the traced one learns nothing of others */
	if (ev->kind == RBK_SCHED_WAKEUP) b->ev[b->n].nr_or_ret = 0;
	b->n++;
	return 0;
}

int rbk_serve(struct rbk_trace *t, int open_rc, const char *open_why, int fd)
{
	char op;
	int e = read_all(fd, &op, 1);
	if (e) return e;
	int32_t rc = t ? 0 : (open_rc ? open_rc : -ENODEV);
	switch (op) {
	case 'O': {
		if (t) rbk_reset(t);
		const char *why = t ? "" : open_why ? open_why : "";
		uint32_t len = (uint32_t)strlen(why);
		if (!(e = write_all(fd, &rc, sizeof(rc))) && !(e = write_all(fd, &len, sizeof(len))))
			e = write_all(fd, why, len);
		return e;
	}
	case 'R':
		if (t) rbk_reset(t);
		return write_all(fd, &rc, sizeof(rc));
	case 'U':
		if (t) rc = rbk_update_threads(t);
		return write_all(fd, &rc, sizeof(rc));
	case 'D': {
		struct serve_buf b = { 0 };
		if (t) rc = rbk_drain(t, serve_push, &b);
		uint32_t n = rc ? 0 : (uint32_t)b.n;
		if (!(e = write_all(fd, &rc, sizeof(rc))) && !(e = write_all(fd, &n, sizeof(n))))
			e = write_all(fd, b.ev, n * sizeof(*b.ev));
		free(b.ev);
		return e;
	}
	default:
		return -EPROTO;
	}
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
	char task[48];
	snprintf(task, sizeof(task), "/proc/%d/task", (int)t->target);
	DIR *d = opendir(task);
	if (!d && !rc) {
		rc = -errno;
		snprintf(why, why_len, "kernel streams: %s: %s", task, strerror(errno));
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
	if (t->remote >= 0) return remote_call(t, 'U', NULL, NULL, 0);
	int *tids = NULL, rc = 0, big = 0;
	size_t n = 0, cap = 0;
	char task[48];
	snprintf(task, sizeof(task), "/proc/%d/task", (int)t->target);
	DIR *d = opendir(task);
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

/* A handle for process pid (0: this one), opened by this process. */
static int open_handle(struct rbk_trace **out, pid_t pid, size_t bytes_per_buffer, char *why, size_t why_len)
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
	t->target = pid ? pid : t->pid;
	t->remote = -1;
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

int rbk_open_pid(struct rbk_trace **out, pid_t pid, size_t bytes_per_buffer, char *why, size_t why_len)
{
	return open_handle(out, pid, bytes_per_buffer, why, why_len);
}

int rbk_open(struct rbk_trace **out, size_t bytes_per_buffer, char *why, size_t why_len)
{
	int fd = remote_fd();
	if (fd >= 0) return remote_open(out, fd, why, why_len);
	return open_handle(out, 0, bytes_per_buffer, why, why_len);
}

int rbk_drain(struct rbk_trace *t, int (*cb)(void *ctx, const struct rbk_event *ev), void *ctx)
{
	if (getpid() != t->pid) return -ECHILD;
	if (t->remote >= 0) return remote_drain(t, cb, ctx);
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
	if (t->remote >= 0) {
		remote_call(t, 'R', NULL, NULL, 0);
		return;
	}
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].pg) t->rings[c].mark = __atomic_load_n(&t->rings[c].pg->data_head, __ATOMIC_ACQUIRE);
}

void rbk_close(struct rbk_trace *t)
{
	if (!t) return;
	/* a remote handle's socket stays open: a later rbk_open uses it again */
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
