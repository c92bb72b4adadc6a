/*
 * recording.c - one recording's parts opened, run and closed as one
 * (recording.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/bpfsampler.h"
#include "profile/recording.h"
#include "util/err.h"

struct rbp_recording {
	struct rbp_subject s;             /* owned */
	struct rbp_procset *procs;        /* owned; --subprocesses, else NULL */
	struct rbp_bpf_sampler *bpf;      /* owned; --sampler=bpf when it runs, else NULL */
};

/* The in-kernel sampler watching r's subject, or NULL with why in st. */
static void open_bpf(struct rbp_recording *r, uint32_t rate_hz, struct rbp_recording_status *st)
{
	int err;

	if (!(err = rbp_bpf_sampler_open(rate_hz, &r->bpf, st->bpf_why, sizeof(st->bpf_why))) &&
	    (err = rbp_bpf_sampler_watch(r->bpf, r->s.t, r->s.vm)))
		snprintf(st->bpf_why, sizeof(st->bpf_why), "cannot watch process %d: %s",
			 (int)r->s.t->pid, rbp_strerror(err));
	if (err) {
		rbp_bpf_sampler_close(r->bpf);
		r->bpf = NULL;
	}
	st->bpf = !err;
	st->bpf_err = err;
}

int rbp_recording_open(struct rbp_subject *s, const struct rbp_recording_config *c,
		       struct rbp_recording **out, struct rbp_recording_status *st)
{
	struct rbp_recording_status scratch;
	struct rbp_recording *r = calloc(1, sizeof(*r));
	int err = RBP_OK;

	*out = NULL;
	if (!st)
		st = &scratch;
	memset(st, 0, sizeof(*st));
	if (!r) {
		rbp_subject_close(s);
		return RBP_ENOMEM;
	}
	r->s = *s;
	memset(s, 0, sizeof(*s));
	if (c->native && !r->s.native && (err = rbp_subject_native(&r->s)))
		goto fail;
	if (c->subprocesses && (err = rbp_subject_procset(&r->s, c->vo, &r->procs)))
		goto fail;
	/* the in-kernel sampler reads one Ruby process: the subject's VM */
	if (c->bpf && r->s.vm)
		open_bpf(r, c->rate_hz, st);
	*out = r;
	return RBP_OK;
fail:
	rbp_recording_close(r);
	return err;
}

int rbp_recording_run(struct rbp_recording *r, const struct rbp_sampler_opts *o,
		      struct rbp_profile *p, struct rbp_sampler_status *st)
{
	struct rbp_sampler_opts so = *o;
	int err;

	so.native = r->s.native;
	so.procs = r->procs;
	so.bpf = r->bpf;
	err = rbp_sample_loop(r->s.t, r->s.vm, &so, p, st);
	rbp_bpf_sampler_close(r->bpf);   /* done: the kernel's programs go now */
	r->bpf = NULL;
	return err;
}

int rbp_recording_pid(const struct rbp_recording *r)
{
	return (int)r->s.t->pid;
}

const char *rbp_recording_ruby(const struct rbp_recording *r)
{
	return r->s.vm ? rbp_vm_info(r->s.vm)->version : NULL;
}

const char *rbp_recording_version(const struct rbp_recording *r)
{
	return r->s.vm ? rbp_vm_info(r->s.vm)->version : rbp_procset_version(r->procs);
}

struct rbp_procset *rbp_recording_procs(const struct rbp_recording *r)
{
	return r->procs;
}

int rbp_recording_native(const struct rbp_recording *r)
{
	return r->s.native != NULL;
}

void rbp_recording_native_stats(const struct rbp_recording *r, struct rbp_recording_native *out)
{
	struct rbp_native_stats ns;

	rbp_subject_native_stats(&r->s, r->procs, &ns);
	out->unwinds = ns.unwinds;
	out->frames = ns.frames;
	out->symbolized = ns.sym_misses;
}

void rbp_recording_close(struct rbp_recording *r)
{
	if (!r)
		return;
	rbp_bpf_sampler_close(r->bpf);
	rbp_procset_free(r->procs);
	rbp_subject_close(&r->s);
	free(r);
}
