/*
 * agent_ptrace.c - the agent's ptrace sampler (agent.h): at each tick of a
 * fixed-rate schedule, read every member's stacks with the walker and add
 * them to the member's profile of the interval.
 *
 * By default it reads without stopping anything (process_vm_readv only):
 * an always-on agent must not stop a production process a hundred times a
 * second, and a stop costs the agent the time the target takes to get a
 * CPU and reach it (serially, process after process: on a loaded host most
 * ticks were late with ten processes).  A stack read while it changes can
 * fail to validate: that read is counted lost.  With --pause the thread
 * holding the GVL is stopped for each read, as record does.
 *
 * Its cost grows with the number of Ruby processes, idle ones included
 * (one read per process per tick); the in-kernel sampler (agent_bpf.c,
 * the default) reads only the threads that are on a CPU.
 */
#include "profile/agent.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/agent_int.h"
#include "profile/sampler.h"
#include "util/err.h"

struct ptrace_state {
	uint64_t period_ns;
	uint64_t deadline;            /* next tick, monotonic; 0 before the first */
	struct rbp_sampler_opts o;    /* filters for rbp_sample_member */
	struct rbp_stacks scratch;
};

static int pt_open(const struct rbp_agent_opts *o, void **state)
{
	struct ptrace_state *s = calloc(1, sizeof(*s));

	if (!s)
		return RBP_ENOMEM;
	s->period_ns = 1000000000ull / (o->rate_hz ? o->rate_hz : 100);
	s->o.nonblocking = !o->pause;
	s->o.stop_gvl = o->pause;   /* --pause: a stop at every read, as before the verified read */
	*state = s;
	return RBP_OK;
}

static void pt_close(void *state)
{
	struct ptrace_state *s = state;

	if (!s)
		return;
	rbp_stacks_free(&s->scratch);
	free(s);
}

/* One tick over every member. */
static int pt_tick(struct ptrace_state *s, struct rbp_procset *procs, uint64_t now,
		   const struct rbp_agent_sink *sink, struct rbp_agent_sampler_stats *st)
{
	struct rbp_sampler_status ss;

	for (size_t i = 0; i < rbp_procset_count(procs);) {
		struct rbp_procset_member *m = rbp_procset_member(procs, i);
		uint64_t t0 = now;
		struct rbp_profile *p = sink->profile(sink->ctx, m, &t0);
		if (!p) {
			st->lost++;
			i++;
			continue;
		}
		memset(&ss, 0, sizeof(ss));
		int err = rbp_sample_member(m, &s->o, p, now - t0, &s->scratch, &ss);
		st->samples += ss.samples;
		if (err == RBP_ENOMEM)
			return err;
		if (!err) {
			rbp_procset_ok(procs, i++);
			continue;
		}
		st->errors++;
		st->lost++;
		if (!rbp_procset_failed(procs, i))
			i++;
	}
	return RBP_OK;
}

static int pt_run(void *state, struct rbp_procset *procs, uint64_t until_ns,
		  const struct rbp_agent_sink *sink, int (*should_stop)(void *ctx), void *ctx,
		  struct rbp_agent_sampler_stats *st)
{
	struct ptrace_state *s = state;
	int err;

	if (!s->deadline)
		s->deadline = agent_mono_ns();
	while (s->deadline < until_ns && !(should_stop && should_stop(ctx))) {
		agent_sleep_until(s->deadline);
		uint64_t now = agent_mono_ns();
		if (now < s->deadline)
			continue;   /* a signal: check for a stop */
		st->ticks++;
		if (now - s->deadline > s->period_ns / 2)
			st->late++;
		if (now - s->deadline >= s->period_ns) {
			/* skip the deadlines missed whole rather than sample in a burst */
			uint64_t missed = (now - s->deadline) / s->period_ns;
			st->late += missed;
			st->ticks += missed;
			s->deadline += missed * s->period_ns;
		}
		if ((err = pt_tick(s, procs, now, sink, st)))
			return err;
		s->deadline += s->period_ns;
	}
	return RBP_OK;
}

const struct rbp_agent_sampler rbp_agent_ptrace_sampler = {
	.name = "ptrace",
	.open = pt_open,
	.run = pt_run,
	.close = pt_close,
};
