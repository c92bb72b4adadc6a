/*
 * sampler.c - the sampling loop (see sampler.h for the scheduling rules).
 *
 * Hot path per tick: [task states when --on-cpu] -> pause -> read all
 * stacks -> resume -> for each thread, map its frames to profile frame ids
 * through a cache keyed by the walker's interned string pointers (no string
 * hashing for frames seen before) and descend the stack tree.
 *
 * Waking on time.  On a 2-vCPU Firecracker guest with a spinning target,
 * traced with sched/timer/irq events (bench/late_ticks.sh), a tick's sleep
 * ends ~19 us after its deadline in the common case: the timer interrupt
 * itself arrives ~10 us late (the hypervisor's timer path) and the switch
 * to our thread takes ~9 us more.  At 10 kHz a tick is late after 50 us.
 * Causes of late wake-ups, in order: (1) under SCHED_OTHER the woken
 * thread waits for the current task's slice when its CPU is busy (hundreds
 * of us, skipping deadlines: 35 % late ticks under load); SCHED_FIFO
 * removes most of that -- the rest is the guest kernel itself, which runs
 * without preemption ("Dynamic Preempt: none"); (2) the tail of the
 * wake-up latency, which an early wake-up plus a short spin absorbs;
 * (3) timer interrupts ~100 us late with nothing at all on that guest CPU
 * in the trace meanwhile: the hypervisor did not run the vCPU -- not ours
 * to fix.  See bench/README.md.
 */
#include "profile/sampler.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/bpfsampler.h"
#include "ruby/gc.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/vec.h"

#define DUTY_WINDOW_NS 100000000ull  /* real-time duty cycle checked over 100 ms */
#define BPF_READ_NS 50000000ull      /* --sampler=bpf: the kernel's copies decoded every 50 ms */
#define BPF_REFRESH 5                /* ... and its thread map refreshed every 5th time */

/* Real-time class and early wake-up of the loop's thread (sampler.h). */
struct waker {
	int rt;                   /* SCHED_FIFO set by us and still in force */
	int old_policy;           /* to restore at the end */
	struct sched_param old_param;
	uint64_t period;
	uint64_t q;               /* upper envelope of recent over-sleeps, ns */
	uint64_t win_start, win_cpu;  /* duty-cycle window: wall and thread CPU at its start */
};

struct loop {
	struct rbp_target *t;
	struct rbp_vm *vm;
	struct rbp_native *native;   /* --native: the unwinder of t's process, else NULL */
	const struct rbp_sampler_opts *o;
	struct rbp_profile *p;
	struct rbp_stacks stacks;
	/* the caches of t's process: the loop's own below, or a procset member's */
	struct rbp_hmap *frame_ids;  /* mix(label*, path*, line, kind) -> frame id + 1 */
	struct rbp_hmap *tid_names;  /* tid -> interned OS thread name (profile pool) */
	struct rbp_hmap own_ids, own_names;
	struct rbp_hmap states;      /* tid -> state char, this tick (--on-cpu) */
	pid_t *runnable;             /* --on-cpu: the tids /proc shows runnable, this tick */
	size_t n_runnable, cap_runnable;
	uint32_t root_node;          /* stacks hang below it (a process root), 0: the root */
};

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 0 when the process is gone or a zombie (a zombie main thread alone is not). */
static int target_alive(pid_t pid)
{
	return rbp_live_task(pid) != 0;
}

/* Profile frame id for a walker frame, through the pointer-keyed cache. */
static int frame_id(struct loop *l, const struct rbp_frame *f, uint32_t *id)
{
	int by_fn = l->o->by_function;
	int32_t line = by_fn ? (f->kind == RBP_FRAME_CFUNC ? 0 : f->first_line) : f->line;
	const char *path = by_fn && f->kind == RBP_FRAME_CFUNC ? "" : f->path;
	uint64_t key = rbp_mix64(rbp_mix64((uintptr_t)f->label, (uintptr_t)path),
				 (uint64_t)(uint32_t)line << 2 | f->kind), v;
	int err;

	if (rbp_hmap_get(l->frame_ids, key, &v)) {
		*id = (uint32_t)v - 1;
		return RBP_OK;
	}
	if ((err = rbp_profile_frame(l->p, f->label, path, line, f->first_line,
				     f->kind == RBP_FRAME_CFUNC ? RBP_PFRAME_CFUNC :
				     f->kind == RBP_FRAME_NATIVE ? RBP_PFRAME_NATIVE : RBP_PFRAME_RUBY, id)))
		return err;
	return rbp_hmap_put(l->frame_ids, key, *id + 1ull);
}

/* Thread#name, else "main" for the main thread, else the OS name (cached). */
static const char *thread_name(struct loop *l, const struct rbp_thread *th)
{
	uint64_t v;
	struct rbp_task_info ti;

	const char *ruby_name = rbp_thread_ruby_name(th);
	if (ruby_name)
		return ruby_name;
	if (!th->tid)
		return "";
	if (rbp_hmap_get(l->tid_names, (uint64_t)th->tid, &v))
		return (const char *)(uintptr_t)v;
	const char *name = rbp_profile_str(l->p, l->t->is_core ||
					   rbp_task_info(l->t->pid, th->tid, &ti) ? "" : ti.comm);
	rbp_hmap_put(l->tid_names, (uint64_t)th->tid, (uint64_t)(uintptr_t)name);
	return name;
}

/*
 * One sample of th.  runnable_waits: a thread runnable in a wait (no GVL)
 * may be flagged idle -- read from outside, runnable is not running (a CPU
 * may not have taken it yet); not for samples of CPU time (--on-cpu, the
 * in-kernel sampler's).
 */
static int add_thread(struct loop *l, const struct rbp_thread *th, uint64_t t_ns, uint8_t flags,
		      int runnable_waits)
{
	const struct rbp_frame *frames = l->stacks.frames + th->first_frame;
	const char *name = thread_name(l, th);
	uint32_t node = l->root_node, id, idx;
	int err;

	if (l->o->threads_as_roots) {
		char label[128];
		snprintf(label, sizeof(label), "thread %d%s%s%s", (int)th->tid, *name ? " (" : "",
			 name, *name ? ")" : "");
		if ((err = rbp_profile_frame(l->p, label, "", 0, 0, RBP_PFRAME_THREAD, &id)) ||
		    (err = rbp_profile_child(l->p, node, id, &node)))
			return err;
	}
	for (size_t i = th->n_frames; i-- > 0;) {
		if ((err = frame_id(l, &frames[i], &id)) ||
		    (err = rbp_profile_child(l->p, node, id, &node)))
			return err;
	}
	/* the collector runs on top of this thread's Ruby stack */
	if (th->gc && !l->o->no_gc &&
	    ((err = rbp_profile_frame(l->p, rbp_gc_label(th->gc), "", 0, 0, RBP_PFRAME_GC, &id)) ||
	     (err = rbp_profile_child(l->p, node, id, &node))))
		return err;
	if ((err = rbp_profile_thread(l->p, (int32_t)l->t->pid, th->tid, name, &idx)))
		return err;
	/*
	 * waiting for work: judged by the innermost Ruby-level frame (not
	 * --native's), when the thread does not hold the GVL and is blocked, or
	 * runnable in the wait: a thread woken from it stays there, runnable,
	 * until a CPU takes it and it gets the GVL back (milliseconds on a
	 * loaded machine, at every wake-up) -- no work, as rbp_profile_waiters
	 * judges it too.
	 */
	size_t top = 0;
	while (top + 1 < th->n_frames && frames[top].kind == RBP_FRAME_NATIVE)
		top++;
	if (!(flags & RBP_SAMPLE_GVL) && !th->gc &&
	    (runnable_waits || (!(flags & RBP_SAMPLE_ONCPU) && th->running <= 0)) &&
	    rbp_waiting_for_work(frames[top].label, top + 1 < th->n_frames ? frames[top + 1].label : NULL,
				 th->n_frames - top, th->is_main))
		flags |= RBP_SAMPLE_IDLE;
	return rbp_profile_add(l->p, t_ns, idx, node, flags);
}

/* Scheduler state of every task, read before pausing (paused ones show 't'). */
static void read_states(struct loop *l)
{
	pid_t *tids = NULL;
	size_t n = 0;
	struct rbp_task_info ti;

	rbp_hmap_clear(&l->states);
	l->n_runnable = 0;
	if (rbp_task_list(l->t->pid, &tids, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (rbp_task_info(l->t->pid, tids[i], &ti))
			continue;
		rbp_hmap_put(&l->states, (uint64_t)tids[i], (uint64_t)(unsigned char)ti.state);
		if (ti.state == 'R' &&
		    !rbp_grow(&l->runnable, &l->cap_runnable, l->n_runnable + 1, sizeof(*l->runnable)))
			l->runnable[l->n_runnable++] = tids[i];
	}
	free(tids);
}

/* One tick: read every stack (paused unless nonblocking) and add samples. */
static int tick(struct loop *l, uint64_t t_ns, struct rbp_sampler_status *st)
{
	int err;

	/*
	 * --on-cpu: /proc's states first.  Read paused, only the threads it
	 * shows runnable are stopped (what each was doing is then read at its
	 * stop); a sleeping one is left alone, and left out.
	 */
	int runnable_only = l->o->on_cpu && !l->o->nonblocking && !l->t->is_core && !l->native;
	if (l->o->on_cpu && !l->native)
		read_states(l);
	rbp_vm_set_hold_budget(l->vm, l->o->max_hold_ns == UINT64_MAX ? 0 :
			       l->o->max_hold_ns ? l->o->max_hold_ns : RBP_DEFAULT_MAX_HOLD_NS);
	err = l->native ? rbp_vm_read_stacks_native(l->vm, l->native, &l->stacks) :
	      runnable_only ? rbp_vm_read_stacks_tids(l->vm, l->runnable, l->n_runnable, &l->stacks) :
	      rbp_vm_read_stacks_paused(l->vm, l->o->nonblocking ? RBP_PAUSE_NONE :
					l->o->on_cpu || l->o->pause_all ? RBP_PAUSE_ALL :
					l->o->stop_gvl ? RBP_PAUSE_GVL : RBP_PAUSE_VERIFY, &l->stacks);
	st->over_budget += l->stacks.over_budget;
	st->torn_reads += l->stacks.torn_reads;
	st->stopped += l->stacks.stopped;
	if (l->stacks.held_ns) {
		st->holds++;
		st->held_ns_sum += l->stacks.held_ns;
		if (l->stacks.held_ns > st->held_ns_max)
			st->held_ns_max = l->stacks.held_ns;
	}
	if (err)
		return err;
	int holder = 0;
	for (size_t i = 0; i < l->stacks.n_threads; i++) {
		const struct rbp_thread *th = &l->stacks.threads[i];
		holder |= th->has_gvl;
		uint64_t state = 0;
		/* on-CPU is known for free when read paused: flag it even without --on-cpu */
		uint8_t flags = (th->has_gvl ? RBP_SAMPLE_GVL : 0) |
				(th->running > 0 ? RBP_SAMPLE_ONCPU : 0);
		if (th->err == RBP_ETORN)
			st->torn++;
		if (th->err || !th->n_frames)
			continue;
		if (l->o->on_cpu) {
			/* exact when read paused; else /proc's state from before the read */
			int on = th->running >= 0 ? th->running :
				 rbp_hmap_get(&l->states, (uint64_t)th->tid, &state) && state == 'R';
			if (!on)
				continue;
			flags |= RBP_SAMPLE_ONCPU;
		}
		if (l->o->gvl_only && !th->has_gvl)
			continue;
		if ((err = add_thread(l, th, t_ns, flags, !l->o->on_cpu)))
			return err;
		st->samples++;
	}
	st->no_gvl_holder += !holder;
	return RBP_OK;
}

struct bpf_tick {
	struct loop *l;
	struct rbp_sampler_status *st;
	uint64_t start;   /* the loop's start, CLOCK_MONOTONIC */
};

/* One stack the kernel copied, decoded: a sample of a thread on a CPU. */
static int on_bpf_sample(void *ctx, const struct rbp_bpf_sample *smp)
{
	struct bpf_tick *bt = ctx;
	int err;

	if (!smp->th) {
		bt->st->errors++;
		bt->st->last_err = smp->err;
		return RBP_OK;
	}
	if (!smp->th->n_frames)
		return RBP_OK;
	if (bt->l->o->gvl_only && !smp->th->has_gvl) {   /* --gvl: on a CPU without the GVL */
		bt->st->no_gvl_holder++;
		return RBP_OK;
	}
	uint64_t t_ns = smp->time_ns > bt->start ? smp->time_ns - bt->start : 0;
	if ((err = add_thread(bt->l, smp->th, t_ns,
			      RBP_SAMPLE_ONCPU | (smp->th->has_gvl ? RBP_SAMPLE_GVL : 0), 0)))
		return err;
	bt->st->samples++;
	return RBP_OK;
}

/* --sampler=bpf: decode what the kernel copied since the last time. */
static int tick_bpf(struct loop *l, uint64_t start, uint64_t reads, struct rbp_sampler_status *st)
{
	struct bpf_tick bt = { l, st, start };
	struct rbp_bpf_sampler_stats bs;
	int err;

	if (reads % BPF_REFRESH == BPF_REFRESH - 1) {   /* (open refreshed it) */
		if (!target_alive(l->t->pid))
			return RBP_ENOPROC;
		if ((err = rbp_bpf_sampler_refresh(l->o->bpf)))
			return err;
	}
	err = rbp_bpf_sampler_read(l->o->bpf, &l->stacks, on_bpf_sample, &bt);
	rbp_bpf_sampler_stats(l->o->bpf, &bs);
	st->ticks = bs.k.watched;
	return err;
}

/* The "process PID: cmdline" node of a member, made on its first sample. */
static int process_node(struct loop *l, struct rbp_procset_member *m)
{
	char label[256];
	uint32_t id;
	int err;

	if (m->root_node)
		return RBP_OK;
	snprintf(label, sizeof(label), "process %d%s%s", (int)m->pid, *m->cmdline ? ": " : "",
		 m->cmdline);
	if ((err = rbp_profile_frame(l->p, label, "", 0, 0, RBP_PFRAME_PROCESS, &id)))
		return err;
	return rbp_profile_child(l->p, 0, id, &m->root_node);
}

/* tick() on one member of the process set, with that process's own caches. */
static int tick_member(struct loop *l, struct rbp_procset_member *m, uint64_t t_ns,
		       struct rbp_sampler_status *st)
{
	int err;

	if ((err = process_node(l, m)))
		return err;
	if (l->o->native && m->owned && !m->native && !m->native_err)
		m->native_err = rbp_native_open(m->t, &m->native);
	l->t = m->t;
	l->vm = m->vm;
	/* the root's is the caller's; NULL (Ruby frames only) if it could not be opened */
	l->native = m->owned ? m->native : l->o->native;
	l->root_node = m->root_node;
	l->frame_ids = &m->frame_ids;
	l->tid_names = &m->tid_names;
	return tick(l, t_ns, st);
}

int rbp_sample_member(struct rbp_procset_member *m, const struct rbp_sampler_opts *o,
		      struct rbp_profile *p, uint64_t t_ns, struct rbp_stacks *scratch,
		      struct rbp_sampler_status *st)
{
	struct loop l = { .t = m->t, .vm = m->vm, .o = o, .p = p, .stacks = *scratch,
			  .frame_ids = &m->frame_ids, .tid_names = &m->tid_names };
	int err = tick(&l, t_ns, st);

	*scratch = l.stacks;
	rbp_hmap_clear(&l.states);
	return err;
}

int rbp_sample_add_stack(struct rbp_procset_member *m, const struct rbp_sampler_opts *o,
			 struct rbp_profile *p, const struct rbp_stacks *stacks,
			 const struct rbp_thread *th, uint64_t t_ns, uint8_t flags)
{
	struct loop l = { .t = m->t, .vm = m->vm, .o = o, .p = p, .stacks = *stacks,
			  .frame_ids = &m->frame_ids, .tid_names = &m->tid_names };

	return add_thread(&l, th, t_ns, flags, 0);
}

/*
 * --subprocesses: look for new processes (procset.c decides when), then
 * sample each member.  Fails only when no member could be read and the
 * set is empty or every read failed.
 */
static int tick_procs(struct loop *l, uint64_t t_ns, struct rbp_sampler_status *st)
{
	struct rbp_procset *ps = l->o->procs;
	struct rbp_target *t = l->t;
	struct rbp_vm *vm = l->vm;
	int err, last = RBP_OK, any = 0;

	if ((err = rbp_procset_refresh(ps, now_ns(CLOCK_MONOTONIC))))
		return err;
	for (size_t i = 0; i < rbp_procset_count(ps);) {
		err = tick_member(l, rbp_procset_member(ps, i), t_ns, st);
		if (err == RBP_ENOMEM)
			break;
		if (!err) {
			rbp_procset_ok(ps, i++);
			any = 1;
			continue;
		}
		last = err;
		err = RBP_OK;
		if (!rbp_procset_failed(ps, i))
			i++;
	}
	l->t = t;
	l->vm = vm;
	l->root_node = 0;
	l->frame_ids = &l->own_ids;
	l->tid_names = &l->own_names;
	if (err)
		return err;
	if (!rbp_procset_count(ps) && !target_alive(t->pid))
		return RBP_ENOPROC;
	return any || !last ? RBP_OK : last;
}

/* Why the loop should end before the next tick, or RBP_STOP_NONE. */
static enum rbp_stop_reason check_stop(struct loop *l, uint64_t elapsed)
{
	const struct rbp_sampler_opts *o = l->o;

	if (o->should_stop && o->should_stop(o->ctx))
		return RBP_STOP_REQUESTED;
	if (o->duration_ns && elapsed >= o->duration_ns)
		return RBP_STOP_DURATION;
	if (o->child_exited && o->child_exited(o->ctx))
		return RBP_STOP_EXITED;
	return RBP_STOP_NONE;
}

/* Sleep until the absolute time; returns early when a signal arrives. */
static void sleep_until(uint64_t t)
{
	struct timespec ts = { (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* SCHED_FIFO priority 1 for this thread when allowed; never forked children. */
static void waker_init(struct waker *w, uint64_t period, int realtime, struct rbp_sampler_status *st)
{
	struct sched_param rt = { .sched_priority = 1 };

	memset(w, 0, sizeof(*w));
	w->period = period;
	w->win_start = now_ns(CLOCK_MONOTONIC);
	w->win_cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
	w->old_policy = sched_getscheduler(0);
	if (!realtime || w->old_policy < 0 || sched_getparam(0, &w->old_param))
		return;
	/* EPERM (no CAP_SYS_NICE, RLIMIT_RTPRIO 0): stay as we are */
	w->rt = !sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &rt);
	st->sched = w->rt ? RBP_SCHED_REALTIME : RBP_SCHED_NORMAL;
}

/* Back to the policy the thread had before the loop. */
static void waker_drop(struct waker *w)
{
	if (w->rt)
		sched_setscheduler(0, w->old_policy, &w->old_param);
	w->rt = 0;
}

/*
 * The duty-cycle guard: over each 100 ms window, the loop's thread may use
 * at most half of a CPU while real-time; beyond that it returns to its old
 * policy for the rest of the recording (and stops spinning).
 */
static void waker_check(struct waker *w, uint64_t now, struct rbp_sampler_status *st)
{
	if (now - w->win_start < DUTY_WINDOW_NS)
		return;
	uint64_t cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
	if (w->rt && (cpu - w->win_cpu) * 2 > now - w->win_start) {
		waker_drop(w);
		st->sched = RBP_SCHED_DROPPED;
	}
	w->win_start = now;
	w->win_cpu = cpu;
}

/*
 * Sleep until the deadline.  While real-time, when recent wake-ups came
 * late by more than an eighth of the period, wake that much early (at most
 * a sixth of the period: a quarter cost 4-5 us more CPU per tick at 10 kHz
 * for no fewer late ticks) and spin the rest.  Not under SCHED_OTHER,
 * where a spinning thread only loses its place to the target.  Returns the
 * time, which is before the deadline only when a signal ended the sleep.
 */
static uint64_t waker_sleep(struct waker *w, uint64_t deadline)
{
	uint64_t early = w->rt && w->q > w->period / 8 ?
			 (w->q < w->period / 6 ? w->q : w->period / 6) : 0;
	uint64_t target = deadline - early, now = now_ns(CLOCK_MONOTONIC);

	if (now >= deadline)
		return now;
	if (now < target) {
		sleep_until(target);
		now = now_ns(CLOCK_MONOTONIC);
		if (now < target)
			return now;   /* a signal */
		/* rises fast, decays slowly: an upper envelope (a high percentile) */
		uint64_t x = now - target;
		w->q = x > w->q ? w->q + (x - w->q) / 4 : w->q - (w->q - x) / 64;
	}
	while (now < deadline)
		now = now_ns(CLOCK_MONOTONIC);
	return now;
}

static void account_tick_cost(struct rbp_sampler_status *st, uint64_t cost)
{
	if (!st->tick_ns_min || cost < st->tick_ns_min)
		st->tick_ns_min = cost;
	if (cost > st->tick_ns_max)
		st->tick_ns_max = cost;
	st->tick_ns_sum += cost;
}

int rbp_sample_loop(struct rbp_target *t, struct rbp_vm *vm, const struct rbp_sampler_opts *o,
		    struct rbp_profile *p, struct rbp_sampler_status *st)
{
	struct loop l = { .t = t, .vm = vm, .native = o->native, .o = o, .p = p };
	l.frame_ids = &l.own_ids;
	l.tid_names = &l.own_names;
	uint64_t period = o->bpf ? BPF_READ_NS : 1000000000ull / (o->rate_hz ? o->rate_hz : 100);
	uint64_t reads = 0;   /* --sampler=bpf: wake-ups */
	uint64_t start = now_ns(CLOCK_MONOTONIC), deadline = start, next_progress;
	struct waker w;
	int err = RBP_OK;

	memset(st, 0, sizeof(*st));
	waker_init(&w, period, o->realtime && !o->bpf, st);
	next_progress = start + (o->progress_ns ? o->progress_ns : 1000000000ull);
	p->meta.pid = (int32_t)t->pid;
	p->meta.rate_hz = o->rate_hz;
	p->meta.by_function = o->by_function;
	p->meta.on_cpu = o->on_cpu;
	p->meta.start_unix_ns = now_ns(CLOCK_REALTIME);
	while (!(st->stop = check_stop(&l, now_ns(CLOCK_MONOTONIC) - start))) {
		if (o->suspend) {
			uint64_t before = now_ns(CLOCK_MONOTONIC);
			if (o->suspend(o->ctx)) {
				uint64_t stopped = now_ns(CLOCK_MONOTONIC) - before;
				start += stopped;
				next_progress += stopped;
				deadline = now_ns(CLOCK_MONOTONIC);
				continue;
			}
		}
		uint64_t now = waker_sleep(&w, deadline);
		if (now < deadline)
			continue;   /* woken by a signal: re-check for a stop */
		if (o->bpf) {
			/* the kernel sampled on time; this only collects */
			err = tick_bpf(&l, start, reads++, st);
			account_tick_cost(st, now_ns(CLOCK_MONOTONIC) - now);
			deadline = now + period;
			goto checked;
		}
		uint64_t lateness = now - deadline;
		if (lateness > period / 2)
			st->late++;
		if (lateness >= period) {
			uint64_t skipped = lateness / period;
			st->late += skipped;
			st->skipped += skipped;
			st->ticks += skipped;
			deadline += skipped * period;
		}
		st->ticks++;
		err = o->procs ? tick_procs(&l, now - start, st) : tick(&l, now - start, st);
		account_tick_cost(st, now_ns(CLOCK_MONOTONIC) - now);
		deadline += period;
checked:
		if (err == RBP_ENOMEM)
			break;
		if (err) {
			st->errors++;
			st->last_err = err;
			if (!target_alive(t->pid)) {
				st->stop = RBP_STOP_EXITED;
				err = RBP_OK;
				break;
			}
			if (st->ticks >= 20 && st->errors * 2 > st->ticks) {
				st->stop = RBP_STOP_FAILING;
				err = RBP_OK;
				break;
			}
			err = RBP_OK;
		}
		st->elapsed_ns = now_ns(CLOCK_MONOTONIC) - start;
		if (o->progress && now >= next_progress) {
			o->progress(o->ctx, st, p);
			next_progress = now + (o->progress_ns ? o->progress_ns : 1000000000ull);
		}
		waker_check(&w, now, st);
	}
	waker_drop(&w);
	st->elapsed_ns = now_ns(CLOCK_MONOTONIC) - start;
	p->meta.duration_ns = st->elapsed_ns;
	p->meta.ticks = st->ticks;
	p->meta.late = st->late;
	p->meta.errors = st->errors;
	rbp_stacks_free(&l.stacks);
	rbp_hmap_clear(&l.own_ids);
	rbp_hmap_clear(&l.own_names);
	rbp_hmap_clear(&l.states);
	free(l.runnable);
	return err;
}

enum rbp_late_cause rbp_sampler_late_cause(const struct rbp_sampler_status *st, uint32_t rate_hz)
{
	if (!st->ticks || !rate_hz || st->late * 100 <= st->ticks)
		return RBP_LATE_FEW;
	/* average tick cost against a quarter of the period (1e9 / rate / 4) */
	if ((double)st->tick_ns_sum / (double)st->ticks * 4.0 * rate_hz > 1e9)
		return RBP_LATE_COST;
	return st->late * 20 > st->ticks ? RBP_LATE_HOST : RBP_LATE_FEW;
}
