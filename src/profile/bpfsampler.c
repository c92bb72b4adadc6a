/*
 * bpfsampler.c - the in-kernel sampler's user side (see bpfsampler.h):
 * the watched processes, their thread lists handed to the kernel, and the
 * copies decoded by the walker.
 */
#include "profile/bpfsampler.h"

#include <stdlib.h>
#include <string.h>

#include "ruby/gc.h"
#include "util/err.h"
#include "util/vec.h"

#define MAX_THREADS 4096   /* per process, handed to the kernel */

struct watched {
	struct rbp_target *t;
	struct rbp_vm *vm;
	struct rbp_stacks threads;   /* the last thread list (names, main) */
	int gc;                      /* the copies carry the collector's flags */
	int gvl;                     /* ... and the GVL's owner */
};

struct rbp_bpf_sampler {
	struct rbp_oncpu *k;
	struct watched *w;
	size_t n_w, cap_w;
	pid_t *tids;                 /* scratch for refresh */
	uint64_t *addrs;
	uint64_t decoded, decode_errors, refreshes, refresh_errors;
	/* during a read */
	struct rbp_stacks *stacks;
	int (*fn)(void *ctx, const struct rbp_bpf_sample *smp);
	void *ctx;
};

int rbp_bpf_sampler_open(uint32_t rate_hz, struct rbp_bpf_sampler **out, char *why, size_t why_len)
{
	struct rbp_bpf_sampler *s;
	int err;

	*out = NULL;
	if (!(s = calloc(1, sizeof(*s))) || !(s->tids = malloc(MAX_THREADS * sizeof(*s->tids))) ||
	    !(s->addrs = malloc(MAX_THREADS * sizeof(*s->addrs)))) {
		rbp_bpf_sampler_close(s);
		return RBP_ENOMEM;
	}
	if ((err = rbp_oncpu_open(rate_hz, &s->k, why, why_len))) {
		rbp_bpf_sampler_close(s);
		return err;
	}
	*out = s;
	return RBP_OK;
}

static struct watched *find(const struct rbp_bpf_sampler *s, pid_t pid)
{
	for (size_t i = 0; i < s->n_w; i++)
		if (s->w[i].t->pid == pid)
			return &s->w[i];
	return NULL;
}

/*
 * One process's threads to the kernel (those with an OS thread and
 * readable); a list that cannot be read is tried next time (*read_err
 * says why, may be NULL).
 */
static int refresh_one(struct rbp_bpf_sampler *s, struct watched *w, int *read_err)
{
	size_t n = 0;
	int err;

	s->refreshes++;
	if (read_err)
		*read_err = RBP_OK;
	if ((err = rbp_vm_read_threads(w->vm, &w->threads))) {
		s->refresh_errors++;
		if (read_err)
			*read_err = err;
		return err == RBP_ENOMEM ? err : RBP_OK;   /* next time */
	}
	if (!w->gvl) {   /* the GVL's owner found since the watch began: to the kernel */
		struct rbp_framecap_layout L;
		rbp_vm_framecap_layout(w->vm, &L);
		rbp_vm_framecap_gc(w->vm, &L);
		if (L.gvl_addr && !rbp_oncpu_watch(s->k, w->t->pid, &L)) {
			w->gvl = 1;
			w->gc = L.gc_len != 0;
		}
	}
	for (size_t i = 0; i < w->threads.n_threads && n < MAX_THREADS; i++)
		if (w->threads.threads[i].tid && !w->threads.threads[i].err) {
			s->tids[n] = w->threads.threads[i].tid;
			s->addrs[n++] = w->threads.threads[i].addr;
		}
	return rbp_oncpu_set_threads(s->k, w->t->pid, s->tids, s->addrs, n);
}

int rbp_bpf_sampler_watch(struct rbp_bpf_sampler *s, struct rbp_target *t, struct rbp_vm *vm)
{
	struct rbp_framecap_layout L;
	struct watched *w;
	int err;

	if (t->is_core)
		return RBP_EINVAL;
	if (!(w = find(s, t->pid))) {
		if ((err = rbp_grow(&s->w, &s->cap_w, s->n_w + 1, sizeof(*s->w))))
			return err;
		w = &s->w[s->n_w++];
		memset(w, 0, sizeof(*w));
	}
	w->t = t;
	w->vm = vm;
	rbp_vm_framecap_layout(vm, &L);
	(void)rbp_vm_read_threads(vm, &w->threads);   /* where the GVL's owner is named */
	rbp_vm_framecap_gc(vm, &L);   /* the collector's flags and the GVL, copied with each sample */
	w->gvl = L.gvl_addr != 0;
	w->gc = L.gc_len != 0;
	if ((err = rbp_oncpu_watch(s->k, t->pid, &L)) || (err = refresh_one(s, w, NULL))) {
		rbp_bpf_sampler_unwatch(s, t->pid);
		return err;
	}
	return RBP_OK;
}

void rbp_bpf_sampler_unwatch(struct rbp_bpf_sampler *s, pid_t pid)
{
	struct watched *w = find(s, pid);

	rbp_oncpu_unwatch(s->k, pid);
	if (!w)
		return;
	rbp_stacks_free(&w->threads);
	*w = s->w[--s->n_w];
}

int rbp_bpf_sampler_refresh(struct rbp_bpf_sampler *s)
{
	int err;

	for (size_t i = 0; i < s->n_w; i++)
		if ((err = refresh_one(s, &s->w[i], NULL)) == RBP_ENOMEM)
			return err;
	return RBP_OK;
}

int rbp_bpf_sampler_refresh_pid(struct rbp_bpf_sampler *s, pid_t pid)
{
	struct watched *w = find(s, pid);
	int err, read_err;

	if (!w)
		return RBP_EINVAL;
	if ((err = refresh_one(s, w, &read_err)))
		return err;
	return read_err;
}

/* The thread list's entry for tid (for its name), or NULL. */
static const struct rbp_thread *listed(const struct watched *w, pid_t tid)
{
	for (size_t i = 0; i < w->threads.n_threads; i++)
		if (w->threads.threads[i].tid == tid)
			return &w->threads.threads[i];
	return NULL;
}

/* One copy from the kernel: decoded, handed on. */
static int on_copy(void *ctx, const struct rbp_framecap_record *c)
{
	struct rbp_bpf_sampler *s = ctx;
	struct watched *w = find(s, (pid_t)c->arg);
	struct rbp_frame_copy fc = { c->tid, c->frames, c->env, c->n_frames };
	struct rbp_bpf_sample smp = { .pid = (pid_t)c->arg, .time_ns = c->time_ns,
				      .truncated = c->truncated };

	if (!w)
		return RBP_OK;   /* unwatched meanwhile */
	smp.t = w->t;
	smp.vm = w->vm;
	smp.err = rbp_vm_decode_frames(w->vm, &fc, s->stacks);
	if (smp.err == RBP_ENOMEM)
		return smp.err;
	if (!smp.err && s->stacks->n_threads) {
		struct rbp_thread *th = &s->stacks->threads[0];
		const struct rbp_thread *known = listed(w, c->tid);
		if (known) {
			th->name = known->name;
			th->is_main = known->is_main;
		}
		/*
		 * The collector ran at this tick on the thread holding the GVL:
		 * this one when it holds it (where the owner is not known, a
		 * thread that released the GVL in C code on another CPU at that
		 * instant is marked too)
		 */
		th->has_gvl = w->gvl && known && c->gvl_owner && c->gvl_owner == known->addr;
		th->gc = w->gc && c->gc_flags ? (uint8_t)rbp_vm_gc_phase_of(w->vm, c->gc_flags) : 0;
		if (w->gvl && c->gvl_owner && !th->has_gvl)
			th->gc = 0;   /* the collector runs on the GVL's holder: not this thread */
		smp.th = th;
		s->decoded++;
	} else {
		s->decode_errors++;
		if (!smp.err)
			smp.err = RBP_ECORRUPT;
	}
	return s->fn(s->ctx, &smp);
}

int rbp_bpf_sampler_read(struct rbp_bpf_sampler *s, struct rbp_stacks *stacks,
			 int (*fn)(void *ctx, const struct rbp_bpf_sample *smp), void *ctx)
{
	s->stacks = stacks;
	s->fn = fn;
	s->ctx = ctx;
	int err = rbp_oncpu_read(s->k, on_copy, s);
	s->fn = NULL;
	return err;
}

int rbp_bpf_sampler_enable_stats(struct rbp_bpf_sampler *s)
{
	return rbp_oncpu_enable_stats(s->k);
}

void rbp_bpf_sampler_stats(const struct rbp_bpf_sampler *s, struct rbp_bpf_sampler_stats *out)
{
	memset(out, 0, sizeof(*out));
	rbp_oncpu_stats(s->k, &out->k);
	out->decoded = s->decoded;
	out->decode_errors = s->decode_errors;
	out->refreshes = s->refreshes;
	out->refresh_errors = s->refresh_errors;
}

void rbp_bpf_sampler_close(struct rbp_bpf_sampler *s)
{
	if (!s)
		return;
	rbp_oncpu_close(s->k);
	for (size_t i = 0; i < s->n_w; i++)
		rbp_stacks_free(&s->w[i].threads);
	free(s->w);
	free(s->tids);
	free(s->addrs);
	free(s);
}
