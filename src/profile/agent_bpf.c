/*
 * agent_bpf.c - the agent's in-kernel sampler (agent.h): one engine
 * (profile/bpfsampler.h) watches every member of the process set; the
 * kernel copies the interpreter frames of a watched thread wherever a
 * CPU's clock interrupts it, and this decodes the copies (with the walker,
 * as record --sampler=bpf does) into the member's profile of the interval.
 *
 * Its cost follows the CPU time the Ruby processes use, not their number:
 * an idle process costs nothing per tick (no read from outside, no
 * wake-up of its own).  What it does per process is refresh the kernel's
 * thread map once per run (every scan_ms: threads started since are
 * sampled from then on), which also finds the processes that exited or
 * exec'd (their thread list cannot be read: rbp_procset_failed drops them
 * once gone).  Between refreshes it wakes every READ_NS to decode what
 * came.
 *
 * What it does not give (the copy holds only frames, taken on a CPU):
 * samples of threads that are not running (idle, blocked in a system
 * call or waiting for the GVL), the collector's "(GC: ...)" frames, GVL
 * state.  Every sample is flagged on-CPU.
 */
#include "profile/agent.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/bpfsampler.h"
#include "profile/sampler.h"
#include "profile/agent_int.h"
#include "util/err.h"
#include "util/hmap.h"

#define READ_NS 50000000ull   /* the ring decoded every 50 ms */

struct bpf_state {
	struct rbp_bpf_sampler *bs;   /* the caller's engine (opts.bpf), not owned */
	struct rbp_sampler_opts so;   /* for rbp_sample_add_stack: defaults */
	struct rbp_stacks stacks;     /* one decoded copy at a time, reused */
	struct rbp_hmap members;      /* pid -> member pointer, rebuilt before each read */
	uint64_t k_lost;              /* the kernel's dropped + no_thread counted so far */
	/* during a read */
	const struct rbp_agent_sink *sink;
	struct rbp_agent_sampler_stats *st;
};

static int bpf_open(const struct rbp_agent_opts *o, void **state)
{
	struct bpf_state *s;

	if (!o->bpf)
		return RBP_EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return RBP_ENOMEM;
	s->bs = o->bpf;
	*state = s;
	return RBP_OK;
}

static void bpf_close(void *state)
{
	struct bpf_state *s = state;

	if (!s)
		return;
	rbp_stacks_free(&s->stacks);
	rbp_hmap_clear(&s->members);
	free(s);
}

/* A member that could not be watched now is tried again at the next refresh. */
static int bpf_watch(void *state, struct rbp_procset_member *m)
{
	struct bpf_state *s = state;
	int err = rbp_bpf_sampler_watch(s->bs, m->t, m->vm);

	return err == RBP_ENOMEM ? err : RBP_OK;
}

static void bpf_unwatch(void *state, struct rbp_procset_member *m)
{
	struct bpf_state *s = state;

	rbp_bpf_sampler_unwatch(s->bs, m->pid);
}

/* Every member's threads to the kernel; members that cannot be read are failed. */
static int refresh(struct bpf_state *s, struct rbp_procset *procs,
		   struct rbp_agent_sampler_stats *st)
{
	for (size_t i = 0; i < rbp_procset_count(procs);) {
		struct rbp_procset_member *m = rbp_procset_member(procs, i);
		int err = rbp_bpf_sampler_refresh_pid(s->bs, m->pid);
		if (err == RBP_EINVAL)   /* its watch failed: again */
			err = rbp_bpf_sampler_watch(s->bs, m->t, m->vm);
		if (err == RBP_ENOMEM)
			return err;
		if (!err) {
			rbp_procset_ok(procs, i++);
			continue;
		}
		st->errors++;
		if (!rbp_procset_failed(procs, i))
			i++;
	}
	return RBP_OK;
}

/* One decoded copy: a sample of a thread on a CPU, to its process's profile. */
static int on_sample(void *ctx, const struct rbp_bpf_sample *smp)
{
	struct bpf_state *s = ctx;
	struct rbp_procset_member *m;
	struct rbp_profile *p;
	uint64_t v, t0 = 0;
	int err;

	if (!rbp_hmap_get(&s->members, (uint64_t)smp->pid, &v))
		return RBP_OK;   /* left the set meanwhile */
	m = (struct rbp_procset_member *)(uintptr_t)v;
	if (!smp->th) {
		s->st->errors++;
		s->st->lost++;
		return RBP_OK;
	}
	if (!smp->th->n_frames)
		return RBP_OK;
	if (!(p = s->sink->profile(s->sink->ctx, m, &t0))) {
		s->st->lost++;
		return RBP_OK;
	}
	err = rbp_sample_add_stack(m, &s->so, p, &s->stacks, smp->th,
				   smp->time_ns > t0 ? smp->time_ns - t0 : 0,
				   RBP_SAMPLE_ONCPU | (smp->th->has_gvl ? RBP_SAMPLE_GVL : 0));
	if (err == RBP_ENOMEM)
		return err;
	if (err)
		s->st->lost++;
	else
		s->st->samples++;
	return RBP_OK;
}

/* Decode what the kernel copied since the last read. */
static int read_ring(struct bpf_state *s, struct rbp_procset *procs,
		     const struct rbp_agent_sink *sink, struct rbp_agent_sampler_stats *st)
{
	struct rbp_bpf_sampler_stats bs;
	int err;

	rbp_hmap_reset(&s->members);
	for (size_t i = 0; i < rbp_procset_count(procs); i++) {
		struct rbp_procset_member *m = rbp_procset_member(procs, i);
		if ((err = rbp_hmap_put(&s->members, (uint64_t)m->pid, (uint64_t)(uintptr_t)m)))
			return err;
	}
	s->sink = sink;
	s->st = st;
	err = rbp_bpf_sampler_read(s->bs, &s->stacks, on_sample, s);
	rbp_bpf_sampler_stats(s->bs, &bs);
	/* ticks that hit a watched process; those the ring had no room for, or
	 * that hit a thread not yet in the kernel's map, are lost samples */
	st->ticks = bs.k.watched;
	st->lost += bs.k.dropped + bs.k.no_thread - s->k_lost;
	s->k_lost = bs.k.dropped + bs.k.no_thread;
	return err;
}

static int bpf_run(void *state, struct rbp_procset *procs, uint64_t until_ns,
		   const struct rbp_agent_sink *sink, int (*should_stop)(void *ctx), void *ctx,
		   struct rbp_agent_sampler_stats *st)
{
	struct bpf_state *s = state;
	int err;

	if ((err = refresh(s, procs, st)))
		return err;
	for (;;) {
		uint64_t now = agent_mono_ns();
		if (now >= until_ns || (should_stop && should_stop(ctx)))
			break;
		uint64_t wake = until_ns - now < READ_NS ? until_ns : now + READ_NS;
		agent_sleep_until(wake);
		if ((err = read_ring(s, procs, sink, st)))
			return err;
	}
	return RBP_OK;
}

const struct rbp_agent_sampler rbp_agent_bpf_sampler = {
	.name = "bpf",
	.on_cpu = 1,
	.open = bpf_open,
	.run = bpf_run,
	.watch = bpf_watch,
	.unwatch = bpf_unwatch,
	.close = bpf_close,
};

void rbp_agent_sampler_open(struct rbp_agent_opts *o, int want_bpf, int *bpf_err, char *why,
			    size_t why_len)
{
	o->sampler = &rbp_agent_ptrace_sampler;
	o->bpf = NULL;
	*bpf_err = RBP_OK;
	if (why_len)
		why[0] = 0;
	if (!want_bpf)
		return;
	if (!(*bpf_err = rbp_bpf_sampler_open(o->rate_hz, &o->bpf, why, why_len)))
		o->sampler = &rbp_agent_bpf_sampler;
	else
		o->bpf = NULL;
}

void rbp_agent_sampler_close(struct rbp_agent_opts *o)
{
	rbp_bpf_sampler_close(o->bpf);
	o->bpf = NULL;
}
