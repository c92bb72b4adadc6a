/*
 * diff.c - two recordings in one profile, function by function (diff.h).
 *
 * Each source's frames are mapped once (frame id -> frame of out), then its
 * nodes in id order (a node's parent always has a smaller id), so a sample
 * costs one array lookup: O(frames + nodes + samples) per source.
 */
#include "profile/diff.h"

#include <stdlib.h>

#include "util/err.h"

/* The frame of out standing for src's frame f: the function, not the line. */
static int function_frame(struct rbp_profile *out, const struct rbp_pframe *f, uint32_t *id)
{
	int cfunc = f->kind == RBP_PFRAME_CFUNC;
	int32_t line = cfunc ? 0 : f->first_line > 0 ? f->first_line : f->line;

	return rbp_profile_frame(out, f->label, cfunc ? "" : f->path, line, cfunc ? 0 : f->first_line,
				 f->kind, id);
}

static int add_source(struct rbp_profile *out, const struct rbp_profile *src, uint8_t drop,
		      uint8_t mark)
{
	uint32_t *frame_of = malloc((src->n_frames + 1) * sizeof(*frame_of));
	uint32_t *node_of = malloc((src->n_nodes + 1) * sizeof(*node_of));
	uint32_t *thread_of = malloc((src->n_threads + 1) * sizeof(*thread_of));
	int err = frame_of && node_of && thread_of ? RBP_OK : RBP_ENOMEM;

	for (uint32_t i = 0; i < src->n_frames && !err; i++)
		err = function_frame(out, &src->frames[i], &frame_of[i]);
	if (src->n_nodes)
		node_of[0] = 0;
	for (uint32_t i = 1; i < src->n_nodes && !err; i++) {
		const struct rbp_pnode *n = &src->nodes[i];
		if (n->parent >= i || n->frame >= src->n_frames) {   /* not a tree: a corrupt file */
			err = RBP_EBADRAW;
			break;
		}
		err = rbp_profile_child(out, node_of[n->parent], frame_of[n->frame], &node_of[i]);
	}
	for (uint32_t i = 0; i < src->n_threads && !err; i++)
		err = rbp_profile_thread(out, src->threads[i].pid, src->threads[i].tid,
					 src->threads[i].name, &thread_of[i]);
	for (size_t i = 0; i < src->n_samples && !err; i++) {
		const struct rbp_sample *s = &src->samples[i];
		uint8_t fl = src->sample_flags ? src->sample_flags[i] : 0;
		if ((fl & drop) || s->node >= src->n_nodes || s->thread >= src->n_threads)
			continue;
		err = rbp_profile_add(out, s->t_ns, thread_of[s->thread], node_of[s->node],
				      (uint8_t)((fl & ~RBP_SAMPLE_BASE) | mark));
	}
	free(frame_of);
	free(node_of);
	free(thread_of);
	return err;
}

int rbp_profile_diff(const struct rbp_profile *base, const struct rbp_profile *cur, uint8_t drop,
		     struct rbp_profile *out)
{
	int err = rbp_profile_init(out);

	if (!err)
		err = add_source(out, cur, drop, 0);
	if (!err)
		err = add_source(out, base, drop, RBP_SAMPLE_BASE);
	if (!err) {
		out->meta = cur->meta;
		out->meta.ruby_version = rbp_profile_str(out, cur->meta.ruby_version);
		out->meta.cmdline = rbp_profile_str(out, cur->meta.cmdline);
		out->meta.by_function = 1;
	}
	return err;
}

void rbp_diff_totals(const struct rbp_profile *p, uint64_t *n_new, uint64_t *n_base)
{
	uint64_t b = 0;

	for (size_t i = 0; i < p->n_samples; i++)
		b += p->sample_flags && (p->sample_flags[i] & RBP_SAMPLE_BASE);
	*n_base = b;
	*n_new = p->n_samples - b;
}
