/*
 * allocwatch.c - the allocation watcher (see allocwatch.h): probes in,
 * a poll loop draining the kernel's rings into the counts (alloccount.c),
 * probes out.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/allocwatch.h"
#include "proc/framecap.h"
#include "proc/uprobe.h"
#include "ruby/alloc.h"
#include "util/err.h"

/*
 * How often the rings are drained: mostly the delay between an allocation
 * and the read of its stack.  Shorter costs rbpeek more wakeups, so while
 * nothing arrives the interval doubles up to DRAIN_IDLE_US.
 */
#define DRAIN_US 250
#define DRAIN_IDLE_US 20000
#define MAX_THREADS 512   /* threads in the kernel's map */

struct rbp_allocwatch {
	struct rbp_allocwatch_opts o;
	struct rbp_target *t;               /* not owned */
	struct rbp_vm *vm;                  /* not owned */
	struct rbp_profile *p;              /* not owned */
	struct rbp_alloc_probe probes[RBP_ALLOC_MAX_PROBES];
	struct rbp_uprobe_spec specs[RBP_ALLOC_MAX_PROBES];
	struct rbp_uprobes *u;
	struct rbp_framecap *cap;           /* exact sites; NULL approximate */
	int prog_fds[RBP_ALLOC_MAX_PROBES];
	uint32_t cap_pick;                  /* the threshold the kernel has now */
	uint64_t drain_us;                  /* the next wait for reports (DRAIN_US while busy) */
	struct rbp_alloc_count c;
	struct rbp_alloc_status st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The thread list, and the kernel's map tid -> rb_thread_t from it. */
static int update_threads(struct rbp_allocwatch *w)
{
	pid_t tids[MAX_THREADS];
	uint64_t addrs[MAX_THREADS];
	size_t n;
	int err;

	if ((err = rbp_alloc_count_threads(&w->c, tids, addrs, MAX_THREADS, &n))) {
		w->st.thread_errors++;
		return err == RBP_ENOMEM ? err : RBP_OK;   /* next time */
	}
	return rbp_framecap_set_threads(w->cap, tids, addrs, n);
}

static int on_sample(void *ctx, const struct rbp_uprobe_sample *s)
{
	struct rbp_allocwatch *w = ctx;

	return rbp_alloc_count_report(&w->c, s->tid, s->time_ns,
				      s->args[w->probes[s->probe].klass_arg], !w->cap);
}

/* Exact sites: a copy the kernel made at the allocation. */
static int on_copy(void *ctx, const struct rbp_framecap_record *c)
{
	struct rbp_allocwatch *w = ctx;
	struct rbp_frame_copy fc = { c->tid, c->frames, c->env, c->n_frames };

	if (c->probe >= RBP_ALLOC_MAX_PROBES)
		return RBP_OK;
	return rbp_alloc_count_copy(&w->c, &fc, c->time_ns, c->arg, c->truncated);
}

static void approximate(struct rbp_allocwatch *w, int err, const char *why)
{
	snprintf(w->st.approx_why, sizeof(w->st.approx_why), "%s", why);
	w->st.approx_err = err;
}

/*
 * Exact sites: load the frame-copying eBPF program (one per probe) and
 * fill its thread map, before the uprobes exist (loading takes a while,
 * and the uprobes' rings are not drained meanwhile).  Where the kernel
 * refuses, say why in the status and go on with approximate sites (w->cap
 * NULL).  Only RBP_ENOMEM is an error.
 */
static int setup_copies(struct rbp_allocwatch *w, size_t n)
{
	struct rbp_framecap_layout L;
	uint8_t regs[RBP_ALLOC_MAX_PROBES];
	char why[512];
	int err;

	if (w->o.no_bpf) {
		approximate(w, 0, "--no-bpf given");
		return RBP_OK;
	}
	rbp_vm_framecap_layout(w->vm, &L);
	for (size_t i = 0; i < n; i++)
		regs[i] = w->probes[i].klass_arg;
	err = rbp_framecap_open(&L, regs, n, w->t->pid, &w->cap, why, sizeof(why));
	for (size_t i = 0; !err && i < n; i++)
		w->prog_fds[i] = rbp_framecap_prog_fd(w->cap, i);
	if (!err && !(err = update_threads(w))) {
		if (w->o.bpf_stats && rbp_framecap_enable_stats(w->cap))
			w->st.bpf_stats_err = 1;
		return RBP_OK;
	}
	if (w->cap)
		snprintf(why, sizeof(why), "filling the thread map failed: %s", rbp_strerror(err));
	rbp_framecap_close(w->cap);
	w->cap = NULL;
	if (err == RBP_ENOMEM)
		return err;
	approximate(w, err, why);
	return RBP_OK;
}

/*
 * Exact sites: one uprobe event per probe for the whole process, the
 * program counting every allocation and copying some stacks (see
 * uprobe.h, process mode).  Should the kernel refuse the program on the
 * events, sites are approximate: per-thread uprobes reporting every
 * allocation, as without eBPF.
 */
static int open_probes(struct rbp_allocwatch *w, size_t n)
{
	char why[512];
	int err;

	if (!w->cap)
		return rbp_uprobes_open(w->t->pid, w->specs, n, 1, &w->u);
	err = rbp_uprobes_open_process(w->t->pid, w->specs, n, w->prog_fds, &w->u);
	if (err != RBP_EINVAL && err != RBP_EPERM)
		return err;
	snprintf(why, sizeof(why), "attaching the BPF program to the uprobes failed: %s",
		 rbp_strerror(err));
	approximate(w, err, why);
	rbp_framecap_close(w->cap);
	w->cap = NULL;
	return rbp_uprobes_open(w->t->pid, w->specs, n, 1, &w->u);
}

/* Exact sites: the kernel's total of allocations (c->allocs), cheap: every 100 ms. */
static void sync_total(struct rbp_allocwatch *w)
{
	uint64_t hits, uncounted;

	if (w->cap && !rbp_framecap_totals(w->cap, &hits, &uncounted)) {
		w->c.allocs = hits;
		w->c.uncounted = uncounted;
	}
}

static int on_count(void *ctx, uint64_t klass, uint64_t n)
{
	return rbp_alloc_count_class_total(ctx, klass, n);
}

/* Exact sites: the kernel's counts per class into the class table (every second, and at the end). */
static int sync_counts(struct rbp_allocwatch *w)
{
	int err;

	if (!w->cap)
		return RBP_OK;
	sync_total(w);
	err = rbp_framecap_counts(w->cap, on_count, &w->c);
	return err == RBP_ENOMEM ? err : RBP_OK;
}

int rbp_allocwatch_open(const struct rbp_subject *s, const struct rbp_allocwatch_opts *o,
			struct rbp_profile *p, struct rbp_allocwatch **out)
{
	struct rbp_target *t = s->t;
	struct rbp_vm *vm = s->vm;
	struct rbp_allocwatch *w = calloc(1, sizeof(*w));
	size_t n = 0;
	int err;

	*out = NULL;
	if (!w)
		return RBP_ENOMEM;
	w->o = *o;
	w->t = t;
	w->vm = vm;
	w->p = p;
	rbp_alloc_count_init(&w->c, vm, p, t->pid, o->rate);
	if ((err = rbp_uprobe_available()) ||
	    (err = rbp_alloc_probes(vm, w->probes, RBP_ALLOC_MAX_PROBES, &n)))
		goto fail;
	w->st.probes = n;
	for (size_t i = 0; i < n; i++)
		w->specs[i] = (struct rbp_uprobe_spec){ w->probes[i].path, w->probes[i].offset };
	if ((err = setup_copies(w, n)) || (err = open_probes(w, n)))
		goto fail;
	w->st.exact = w->cap != NULL;
	w->st.copy_max_frames = RBP_FRAMECAP_MAX_FRAMES;
	*out = w;
	return RBP_OK;
fail:
	rbp_allocwatch_close(w);
	return err;
}

/* The last reports, once the target is gone. */
static void drain_last(struct rbp_allocwatch *w)
{
	rbp_uprobes_read(w->u, 0, on_sample, w);
	if (w->cap)
		rbp_framecap_read(w->cap, on_copy, w);
}

/* Read samples until stopped, the duration, or the target's exit. */
static int watch(struct rbp_allocwatch *w)
{
	struct rbp_alloc_count *c = &w->c;
	uint64_t start = c->start;
	uint64_t deadline = w->o.duration_ns ? start + w->o.duration_ns : 0;
	uint64_t next_refresh = start + 200000000ull, next_progress = start + 1000000000ull;
	int err;

	w->st.stop = RBP_STOP_REQUESTED;
	while (!(w->o.should_stop && w->o.should_stop(w->o.ctx))) {
		if (w->o.suspend)
			w->o.suspend(w->o.ctx);   /* Ctrl-Z: nothing is held here */
		uint64_t now = now_ns();
		if (deadline && now >= deadline) {
			w->st.stop = RBP_STOP_DURATION;
			break;
		}
		rbp_alloc_refill(c, now);
		uint64_t before = c->allocs + c->samples;
		if ((err = rbp_uprobes_read(w->u, w->drain_us, on_sample, w)) ||
		    (w->cap && (err = rbp_framecap_read(w->cap, on_copy, w))))
			return err;
		w->drain_us = c->allocs + c->samples != before ? DRAIN_US :
			      w->drain_us * 2 > DRAIN_IDLE_US ? DRAIN_IDLE_US : w->drain_us * 2;
		now = now_ns();
		if (now >= c->adapt_time + 100000000ull) {
			sync_total(w);
			uint32_t pick = rbp_alloc_adapt_pick(c, now);
			if (w->cap && pick != w->cap_pick && !rbp_framecap_set_pick(w->cap, pick))
				w->cap_pick = pick;
		}
		if (now >= next_refresh) {
			err = rbp_uprobes_refresh(w->u);
			if (err == RBP_ENOPROC || kill(w->t->pid, 0)) {
				drain_last(w);
				w->st.stop = RBP_STOP_EXITED;
				break;
			}
			if (w->cap && (err = update_threads(w)))
				return err;
			next_refresh = now + 200000000ull;
		}
		if (now >= next_progress) {
			if ((err = sync_counts(w)))
				return err;
			w->st.elapsed_ns = now_ns() - start;
			if (w->o.progress)
				w->o.progress(w->o.ctx, w);
			next_progress = now + 1000000000ull;
		}
	}
	return RBP_OK;
}

/* The probes out of the target, then the kernel's figures. */
static int finish(struct rbp_allocwatch *w)
{
	struct rbp_uprobe_stats us;
	int err;

	rbp_uprobes_stats(w->u, &us);
	w->st.lost = us.lost;
	w->st.threads = us.threads;
	w->st.events = us.events;
	/*
	 * The watch ends now, though the probes leave one after the other
	 * (closing each waits for the kernel): stop the programs first, or
	 * the last probes would count alone while the others go.
	 */
	if (w->cap)
		rbp_framecap_stop(w->cap);
	rbp_uprobes_close(w->u);   /* the probes leave the target before anything else */
	w->u = NULL;
	if (w->cap) {
		rbp_framecap_read(w->cap, on_copy, w);   /* the last copies */
		if ((err = sync_counts(w)))
			return err;
		struct rbp_framecap_stats cs;
		rbp_framecap_stats(w->cap, &cs);
		w->st.copies = cs.records;
		w->st.copies_lost = cs.lost;
		w->st.bpf_runs = cs.runs;
		w->st.bpf_run_ns = cs.run_ns;
	}
	w->st.uncounted = w->c.uncounted;
	rbp_framecap_close(w->cap);
	w->cap = NULL;
	return RBP_OK;
}

int rbp_allocwatch_run(struct rbp_allocwatch *w)
{
	uint64_t start = now_ns();
	int err;

	rbp_alloc_count_begin(&w->c, start);
	/*
	 * The kernel copies a stack when its random number is below its
	 * threshold: until the allocation rate is known (100 ms), assume a
	 * busy 200,000 allocations/s rather than flood the rings.
	 */
	if (w->cap) {
		w->cap_pick = rbp_alloc_pick_for(w->o.rate, 200000.0);
		if (rbp_framecap_set_pick(w->cap, w->cap_pick))
			w->cap_pick = 0;
	}
	w->drain_us = DRAIN_US;
	err = watch(w);
	w->st.elapsed_ns = now_ns() - start;
	w->p->meta.duration_ns = w->st.elapsed_ns;
	int ferr = finish(w);
	return err ? err : ferr;
}

const struct rbp_alloc_status *rbp_allocwatch_status(const struct rbp_allocwatch *w)
{
	return &w->st;
}

const struct rbp_alloc_count *rbp_allocwatch_count(const struct rbp_allocwatch *w)
{
	return &w->c;
}

void rbp_allocwatch_close(struct rbp_allocwatch *w)
{
	if (!w)
		return;
	rbp_uprobes_close(w->u);
	rbp_framecap_close(w->cap);
	rbp_alloc_count_free(&w->c);
	free(w);
}
