/*
 * uprobe.c - uprobe perf events on every thread of a process (see uprobe.h).
 *
 * Layout: one struct uthread per thread, holding one event per probe; the
 * first probe's event owns the thread's ring buffer and the others are
 * redirected into it (PERF_EVENT_IOC_SET_OUTPUT, allowed between events of
 * the same task), so a thread costs one buffer whatever the number of
 * probes.  Samples carry PERF_SAMPLE_IDENTIFIER, which names the event and
 * so the probe.  Samples do not wake the reader (a wakeup per sample costs
 * the probed thread an inter-processor interrupt, tens of microseconds in
 * a VM); the kernel wakes it when a ring is half full, and the reader polls
 * with a short timeout to see samples within about a millisecond.
 */
#include "proc/uprobe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proc/arch.h"
#include "proc/perfring.h"
#include "proc/target.h"
#include "util/err.h"
#include "util/vec.h"

#define RING_PAGES 256  /* data pages per thread (a power of two): ~16000 samples */
#define MIN_RING_PAGES 8 /* ... halved down to this while the mlock limit refuses */
#define UPROBE_TYPE_FILE "/sys/bus/event_source/devices/uprobe/type"


struct uthread {
	pid_t tid;
	int *fds;            /* one per probe; fds[0] owns the ring */
	uint64_t *ids;       /* the kernel's id of each event */
	struct rbp_perf_ring ring;   /* owned by fds[0] */
	int seen;            /* still listed in /proc at the last refresh */
};

struct rbp_uprobes {
	pid_t pid;
	int pmu_type;
	uint64_t period;
	struct rbp_uprobe_spec *specs;   /* paths owned */
	size_t n_specs;
	struct uthread *threads;
	size_t n_threads, cap_threads;
	struct pollfd *pfds;             /* scratch for poll, one per thread */
	size_t cap_pfds;
	const int *bpf_fds;              /* per probe: program to attach (rbp_uprobes_set_bpf), or NULL */
	int process;                     /* process mode: threads[0] holds the events, no ring */
	size_t n_tasks;                  /* process mode: threads at the last refresh */
	uint64_t samples, lost;
};

static int pmu_type(void)
{
	FILE *f = fopen(UPROBE_TYPE_FILE, "r");
	int type = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &type) != 1)
		type = -1;
	fclose(f);
	return type;
}

int rbp_uprobe_available(void)
{
	return pmu_type() < 0 ? RBP_ENOUPROBE : RBP_OK;
}

static int open_event(struct rbp_uprobes *u, size_t probe, pid_t tid)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.type = (uint32_t)u->pmu_type;
	a.size = sizeof(a);
	a.config = 0;   /* bit 0 would make it a return probe */
	a.config1 = (uint64_t)(uintptr_t)u->specs[probe].path;   /* uprobe_path */
	a.config2 = u->specs[probe].offset;                      /* probe_offset */
	a.sample_period = u->period;
	a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			PERF_SAMPLE_REGS_USER;
	a.sample_regs_user = rbp_arch_perf_arg_regs();   /* the first three arguments */
	a.wakeup_events = 0;   /* wake the reader only when the ring is half full */
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void close_thread(struct uthread *t, size_t n)
{
	if (t->ring.base)
		rbp_perf_ring_unmap(&t->ring);
	for (size_t i = 0; t->fds && i < n; i++)
		if (t->fds[i] >= 0)
			close(t->fds[i]);
	free(t->fds);
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

/*
 * The thread's ring buffer, as big as the locked-memory limit allows
 * (root: always RING_PAGES; others: kernel.perf_event_mlock_kb).
 */
static int map_ring(struct uthread *t)
{
	return rbp_perf_ring_map(&t->ring, t->fds[0], RING_PAGES, MIN_RING_PAGES);
}

/* Events for every probe in one thread, sharing the first one's ring. */
static int attach_thread(struct rbp_uprobes *u, pid_t tid, struct uthread *t)
{
	int err = RBP_OK;

	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->seen = 1;
	if (!(t->fds = malloc(u->n_specs * sizeof(*t->fds))) ||
	    !(t->ids = calloc(u->n_specs, sizeof(*t->ids)))) {
		close_thread(t, 0);
		return RBP_ENOMEM;
	}
	for (size_t i = 0; i < u->n_specs; i++)
		t->fds[i] = -1;
	for (size_t i = 0; i < u->n_specs && !err; i++) {
		if ((t->fds[i] = open_event(u, i, tid)) < 0 ||
		    ioctl(t->fds[i], PERF_EVENT_IOC_ID, &t->ids[i]))
			err = rbp_perf_errno(errno);
		else if (u->process)
			;   /* no ring: the program reports */
		else if (i == 0)
			err = map_ring(t);
		else if (ioctl(t->fds[i], PERF_EVENT_IOC_SET_OUTPUT, t->fds[0]))
			err = rbp_perf_errno(errno);
		if (!err && u->bpf_fds && ioctl(t->fds[i], PERF_EVENT_IOC_SET_BPF, u->bpf_fds[i]))
			err = rbp_perf_errno(errno);
	}
	if (err)
		close_thread(t, u->n_specs);
	return err;
}

static struct uthread *find_thread(struct rbp_uprobes *u, pid_t tid)
{
	for (size_t i = 0; i < u->n_threads; i++)
		if (u->threads[i].tid == tid)
			return &u->threads[i];
	return NULL;
}

int rbp_uprobes_refresh(struct rbp_uprobes *u)
{
	pid_t *tids = NULL;
	size_t n = 0, attached = 0;
	int err;

	if ((err = rbp_task_list(u->pid, &tids, &n)))
		return err;
	if (u->process) {
		free(tids);
		u->n_tasks = n;
		return n ? RBP_OK : RBP_ENOPROC;
	}
	for (size_t i = 0; i < u->n_threads; i++)
		u->threads[i].seen = 0;
	for (size_t i = 0; i < n && !err; i++) {
		struct uthread *t = find_thread(u, tids[i]);
		if (t) {
			t->seen = 1;
			continue;
		}
		if ((err = rbp_grow(&u->threads, &u->cap_threads, u->n_threads + 1,
				    sizeof(*u->threads))))
			break;
		err = attach_thread(u, tids[i], &u->threads[u->n_threads]);
		if (err == RBP_ENOPROC)
			err = RBP_OK;   /* the thread ended meanwhile */
		else if (!err)
			u->n_threads++, attached++;
	}
	free(tids);
	/* threads that ended: their events never fire again */
	for (size_t i = 0; i < u->n_threads;) {
		if (u->threads[i].seen) {
			i++;
			continue;
		}
		close_thread(&u->threads[i], u->n_specs);
		u->threads[i] = u->threads[--u->n_threads];
	}
	if (!err && !u->n_threads)
		err = RBP_ENOPROC;
	return err;
}

static int open_any(pid_t pid, const struct rbp_uprobe_spec *specs, size_t n, uint64_t period,
		    const int *prog_fds, struct rbp_uprobes **out)
{
	struct rbp_uprobes *u;
	int err;

	*out = NULL;
	if (!n || !period)
		return RBP_EINVAL;
	if (!(u = calloc(1, sizeof(*u))) || !(u->specs = calloc(n, sizeof(*u->specs)))) {
		free(u);
		return RBP_ENOMEM;
	}
	u->pid = pid;
	u->period = period;
	u->n_specs = n;
	for (size_t i = 0; i < n; i++) {
		u->specs[i].offset = specs[i].offset;
		if (!(u->specs[i].path = strdup(specs[i].path))) {
			rbp_uprobes_close(u);
			return RBP_ENOMEM;
		}
	}
	if ((u->pmu_type = pmu_type()) < 0) {
		rbp_uprobes_close(u);
		return RBP_ENOUPROBE;
	}
	if (prog_fds) {
		/* process mode: the main thread's events serve them all */
		u->process = 1;
		u->bpf_fds = prog_fds;
		if ((err = rbp_grow(&u->threads, &u->cap_threads, 1, sizeof(*u->threads))) ||
		    (err = attach_thread(u, pid, &u->threads[0]))) {
			rbp_uprobes_close(u);
			return err;
		}
		u->n_threads = 1;
	}
	if ((err = rbp_uprobes_refresh(u))) {
		rbp_uprobes_close(u);
		return err;
	}
	*out = u;
	return RBP_OK;
}

int rbp_uprobes_open(pid_t pid, const struct rbp_uprobe_spec *specs, size_t n, uint64_t period,
		     struct rbp_uprobes **out)
{
	return open_any(pid, specs, n, period, NULL, out);
}

int rbp_uprobes_open_process(pid_t pid, const struct rbp_uprobe_spec *specs, size_t n,
			     const int *prog_fds, struct rbp_uprobes **out)
{
	*out = NULL;
	return prog_fds ? open_any(pid, specs, n, 1, prog_fds, out) : RBP_EINVAL;
}

/* Decode one PERF_RECORD_SAMPLE (the fields in sample_type order). */
static int decode_sample(const struct rbp_uprobes *u, const struct uthread *t,
			 const uint64_t *w, size_t nw, struct rbp_uprobe_sample *s)
{
	if (nw < 5)
		return -1;
	memset(s, 0, sizeof(*s));
	s->probe = UINT32_MAX;
	for (size_t i = 0; i < u->n_specs; i++)
		if (t->ids[i] == w[0])
			s->probe = (uint32_t)i;
	s->tid = (pid_t)(w[1] >> 32);
	s->time_ns = w[2];
	if (s->probe == UINT32_MAX)
		return -1;
	if (w[3] != PERF_SAMPLE_REGS_ABI_NONE && nw >= 7)
		rbp_arch_perf_args(w + 4, 3, s->args);   /* in bit order */
	return 0;
}

/* One thread's drain: the uprobe and the callback the records go to. */
struct drain_ctx {
	struct rbp_uprobes *u;
	const struct uthread *t;
	int (*fn)(void *ctx, const struct rbp_uprobe_sample *s);
	void *ctx;
};

static int on_record(void *ctx, uint32_t type, void *body, size_t len)
{
	struct drain_ctx *d = ctx;
	struct rbp_uprobe_sample s;
	const uint64_t *w = body;

	if (type == PERF_RECORD_SAMPLE) {
		if (!decode_sample(d->u, d->t, w, len / 8, &s)) {
			d->u->samples++;
			return d->fn(d->ctx, &s);
		}
	} else if (type == PERF_RECORD_LOST && len >= 16) {
		d->u->lost += w[1];
	}
	return 0;
}

/* Hand a thread's pending records to fn; stops early when fn says so. */
static int drain(struct rbp_uprobes *u, struct uthread *t,
		 int (*fn)(void *ctx, const struct rbp_uprobe_sample *s), void *ctx)
{
	struct drain_ctx d = { u, t, fn, ctx };
	uint64_t w[16];

	return rbp_perf_ring_drain(&t->ring, w, sizeof(w), on_record, &d);
}

int rbp_uprobes_set_bpf(struct rbp_uprobes *u, const int *prog_fds)
{
	if (u->process)
		return RBP_EINVAL;   /* set once, at open */
	u->bpf_fds = prog_fds;
	for (size_t i = 0; i < u->n_threads; i++)
		for (size_t k = 0; k < u->n_specs; k++)
			if (ioctl(u->threads[i].fds[k], PERF_EVENT_IOC_SET_BPF, prog_fds[k])) {
				u->bpf_fds = NULL;
				return rbp_perf_errno(errno);
			}
	return RBP_OK;
}

int rbp_uprobes_read(struct rbp_uprobes *u, uint64_t timeout_us,
		     int (*fn)(void *ctx, const struct rbp_uprobe_sample *s), void *ctx)
{
	int rc;

	if (rbp_grow(&u->pfds, &u->cap_pfds, u->n_threads + 1, sizeof(*u->pfds)))
		return RBP_ENOMEM;
	if (u->process) {
		/* nothing to read: the program reports elsewhere; only the wait */
		struct timespec ts = { (time_t)(timeout_us / 1000000),
				       (long)(timeout_us % 1000000) * 1000 };
		ppoll(NULL, 0, &ts, NULL);
		return 0;
	}
	for (size_t i = 0; i < u->n_threads; i++)
		u->pfds[i] = (struct pollfd){ .fd = u->threads[i].fds[0], .events = POLLIN };
	/*
	 * The kernel wakes us only when a ring is half full: after the wait,
	 * drain every ring whatever woke us, so reports are never older than
	 * about timeout_us.  A signal ends the wait early.
	 */
	struct timespec ts = { (time_t)(timeout_us / 1000000), (long)(timeout_us % 1000000) * 1000 };
	ppoll(u->pfds, u->n_threads, &ts, NULL);
	for (size_t i = 0; i < u->n_threads; i++)
		if ((rc = drain(u, &u->threads[i], fn, ctx)))
			return rc;
	return 0;
}

void rbp_uprobes_stats(const struct rbp_uprobes *u, struct rbp_uprobe_stats *out)
{
	out->samples = u->samples;
	out->lost = u->lost;
	out->threads = u->process ? u->n_tasks : u->n_threads;
	out->events = u->n_threads * u->n_specs;
}

void rbp_uprobes_close(struct rbp_uprobes *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->n_threads; i++)
		close_thread(&u->threads[i], u->n_specs);
	for (size_t i = 0; u->specs && i < u->n_specs; i++)
		free((char *)u->specs[i].path);
	free(u->specs);
	free(u->threads);
	free(u->pfds);
	free(u);
}
