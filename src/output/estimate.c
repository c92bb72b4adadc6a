/*
 * estimate.c - how many bytes a writer would write, from the profile's
 * interned frames and stacks alone, before anything is written.
 *
 * A raw file is small and its stacks are shared (a prefix tree, frames and
 * strings interned once), but most formats write every stack out in full:
 * a 7.8 KB raw file of deep, wide stacks and long labels asked the
 * collapsed writer for about 16 GB.  `rbpeek report` compares these
 * estimates with a bound proportional to the raw file's size and refuses
 * before writing (see rbp_output_estimate in output.h).
 *
 * Each estimate is an upper bound of the writer's output, close enough to
 * it for real profiles (within a small factor): strings count with the
 * worst escaping any writer gives their bytes (JSON, XML, text), stacks
 * with their real depth and frame names.  The work is linear in the
 * profile's nodes, frames and samples, except chrome's, whose walk between
 * consecutive samples adds at least one slice (over 100 bytes) per step:
 * every estimate stops as soon as it passes the limit, so the work is
 * bounded by the limit too.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/hmap.h"

#define NAME_CAP 8191   /* the longest frame name the folded writers build */

struct est {
	const struct rbp_profile *p;
	uint64_t limit;
	struct rbp_hmap lens;   /* interned string pointer -> escaped length + 1 */
	uint32_t *name;         /* per frame: its display name's length, escaped, capped */
	uint64_t *json;         /* per frame: label + path, escaped */
	uint64_t *count;        /* per node: samples whose leaf it is */
	int err;
};

/* Bytes of s as the most expanding writer escapes it. */
static uint64_t escaped_len(struct est *e, const char *s)
{
	uint64_t key = (uint64_t)(uintptr_t)s, v, n = 0;

	if (rbp_hmap_get(&e->lens, key, &v))
		return v - 1;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c < 0x20 || *c == 0x7f || *c == '"')
			n += 6;   /* "\u001b", "&quot;" */
		else if (*c == '&' || *c == '\'' || *c == '<' || *c == '>')
			n += 5;
		else if (*c >= 0x80)
			n += 3;   /* a C1 control, "\u0080", is 2 bytes */
		else
			n += 1 + (*c == '\\');
	}
	if (!e->err)
		e->err = rbp_hmap_put(&e->lens, key, n + 1);
	return n;
}

static uint64_t digits(uint64_t v)
{
	uint64_t n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static int est_init(struct est *e, const struct rbp_profile *p, uint64_t limit)
{
	memset(e, 0, sizeof(*e));
	e->p = p;
	e->limit = limit;
	e->name = calloc(p->n_frames + 1, sizeof(*e->name));
	e->json = calloc(p->n_frames + 1, sizeof(*e->json));
	e->count = calloc(p->n_nodes + 1, sizeof(*e->count));
	if (!e->name || !e->json || !e->count)
		return RBP_ENOMEM;
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct rbp_pframe *f = &p->frames[i];
		uint64_t label = escaped_len(e, f->label), path = escaped_len(e, f->path);
		uint64_t n = label;
		if (f->kind != RBP_PFRAME_THREAD && f->kind != RBP_PFRAME_PROCESS && f->path[0])
			n += path + 15;   /* " (path:line)" */
		e->name[i] = (uint32_t)(n > NAME_CAP * 6 ? NAME_CAP * 6 : n);
		e->json[i] = label + path;
	}
	for (size_t i = 0; i < p->n_samples; i++)
		e->count[p->samples[i].node]++;
	return e->err;
}

static void est_free(struct est *e)
{
	rbp_hmap_clear(&e->lens);
	free(e->name);
	free(e->json);
	free(e->count);
}

/*
 * Per node, what its stack adds up to when every frame of it costs
 * per_frame(frame) and a separator sep: acc[node] (n_nodes entries,
 * malloc'd).  Parents have smaller ids than their children.
 */
static uint64_t *stack_sums(struct est *e, uint64_t (*per_frame)(struct est *, uint32_t),
			    uint64_t sep)
{
	const struct rbp_profile *p = e->p;
	uint64_t *acc = calloc(p->n_nodes + 1, sizeof(*acc));

	if (!acc)
		return NULL;
	for (size_t n = 1; n < p->n_nodes; n++) {
		const struct rbp_pnode *nd = &p->nodes[n];
		acc[n] = acc[nd->parent] + per_frame(e, nd->frame) + (nd->parent ? sep : 0);
	}
	return acc;
}

static uint64_t frame_name(struct est *e, uint32_t f) { return e->name[f]; }
static uint64_t frame_index(struct est *e, uint32_t f) { (void)e; return digits(f); }
static uint64_t frame_varint(struct est *e, uint32_t f)
{
	(void)e;
	return f < 127 ? 1 : f < 16383 ? 2 : f < 2097151 ? 3 : 5;
}

/* Folded stacks: one line per sampled stack, "a;b;c COUNT". */
static uint64_t est_collapsed(struct est *e)
{
	uint64_t *text = stack_sums(e, frame_name, 1), total = 0;

	if (!text)
		return e->err = RBP_ENOMEM, 0;
	for (size_t n = 1; n < e->p->n_nodes && total <= e->limit; n++)
		if (e->count[n])
			total += text[n] + 22;
	free(text);
	return total;
}

/* The flame graph: one element per node of at least 1/1000 of the samples. */
static uint64_t est_flamegraph(struct est *e)
{
	const struct rbp_profile *p = e->p;
	uint64_t *incl = calloc(p->n_nodes + 1, sizeof(*incl)), total = 64 << 10;
	uint64_t threads = p->n_threads > 64 ? 64 : p->n_threads, work = 0, min;

	if (!incl)
		return e->err = RBP_ENOMEM, 0;
	/* drawn at 1/1000 of either view's samples: the smaller, working one's is lower */
	for (size_t i = 0; i < p->n_samples; i++)
		work += !(p->sample_flags[i] & RBP_SAMPLE_IDLE);
	min = work / 1000;
	memcpy(incl, e->count, p->n_nodes * sizeof(*incl));
	for (size_t n = p->n_nodes - 1; n > 0; n--)
		incl[p->nodes[n].parent] += incl[n];
	for (size_t n = 1; n < p->n_nodes && total <= e->limit; n++)
		if (incl[n] && incl[n] >= min)   /* both views: twice */
			total += 2 * (300 + 2 * (uint64_t)e->name[p->nodes[n].frame] + 20 * threads);
	free(incl);
	return total;
}

/* speedscope: the frames once, then every sample's stack as frame indices. */
static uint64_t est_speedscope(struct est *e)
{
	const struct rbp_profile *p = e->p;
	uint64_t *idx = stack_sums(e, frame_index, 1), total = 4096;

	if (!idx)
		return e->err = RBP_ENOMEM, 0;
	for (size_t f = 0; f < p->n_frames; f++)
		total += 48 + e->json[f];
	for (size_t t = 0; t < p->n_threads; t++)
		total += 256 + escaped_len(e, p->threads[t].name);
	for (size_t i = 0; i < p->n_samples && total <= e->limit; i++)
		total += idx[p->samples[i].node] + 16;   /* "[...]," and its weight */
	free(idx);
	return total;
}

/* pprof: frames as locations and functions, one sample per (thread, stack). */
static uint64_t est_pprof(struct est *e)
{
	const struct rbp_profile *p = e->p;
	uint64_t *ids = stack_sums(e, frame_varint, 0), total = 4096, v;
	struct rbp_hmap seen = { 0 };

	if (!ids)
		return e->err = RBP_ENOMEM, 0;
	for (size_t f = 0; f < p->n_frames; f++)
		total += 48 + e->json[f];
	for (size_t i = 0; i < p->n_samples && total <= e->limit && !e->err; i++) {
		const struct rbp_sample *s = &p->samples[i];
		uint64_t key = ((uint64_t)s->thread + 1) << 32 | s->node;
		if (rbp_hmap_get(&seen, key, &v))
			continue;
		e->err = rbp_hmap_put(&seen, key, 1);
		total += ids[s->node] + 64;
	}
	rbp_hmap_clear(&seen);
	free(ids);
	return total;
}

/* callgrind, summary, raw: a line per function, per caller/callee pair, per record. */
static uint64_t est_tables(struct est *e, uint64_t per_node, uint64_t per_sample)
{
	const struct rbp_profile *p = e->p;
	uint64_t total = 4096 + p->n_nodes * per_node + p->n_samples * per_sample;

	for (size_t f = 0; f < p->n_frames; f++)
		total += 64 + e->json[f];
	for (size_t t = 0; t < p->n_threads; t++)
		total += 32 + escaped_len(e, p->threads[t].name);
	return total;
}

/*
 * callgraph, dot: a node per function, an edge per caller/callee pair --
 * at most one per stack node, fewer after pruning -- and, for the SVG,
 * Graphviz's drawing of each (shapes, text, paths) under a fixed script.
 */
static uint64_t est_graph(struct est *e, int svg)
{
	const struct rbp_profile *p = e->p;
	uint64_t total = svg ? (64 << 10) : 1024;

	for (size_t f = 0; f < p->n_frames; f++)
		total += (svg ? 1024 : 128) + 2 * (uint64_t)e->json[f];
	total += (uint64_t)p->n_nodes * (svg ? 512 : 64);
	return total;
}

/*
 * chrome: a slice per function activation.  Between two consecutive
 * samples of a thread at most the frames below their common ancestor
 * start new slices (fewer when only a line changed).
 */
static uint64_t est_chrome(struct est *e)
{
	const struct rbp_profile *p = e->p;
	size_t *start = NULL;
	uint32_t *by = NULL;
	uint64_t total = 4096;

	if (rbp_samples_by_thread(p, &start, &by))
		return e->err = RBP_ENOMEM, 0;
	for (size_t t = 0; t < p->n_threads && total <= e->limit; t++) {
		uint32_t prev = 0;
		total += 256 + escaped_len(e, p->threads[t].name);
		for (size_t i = start[t]; i < start[t + 1] && total <= e->limit; i++) {
			uint32_t a = prev, b = p->samples[by[i]].node;
			prev = b;
			while (a != b && total <= e->limit) {
				if (p->nodes[a].depth >= p->nodes[b].depth && a) {
					a = p->nodes[a].parent;
					continue;
				}
				total += 128 + e->json[p->nodes[b].frame];
				b = p->nodes[b].parent;
			}
		}
	}
	free(start);
	free(by);
	return total;
}

int rbp_output_estimate(const struct rbp_profile *p, const struct rbp_format *f, uint64_t limit,
			uint64_t *bytes)
{
	struct est e;
	uint64_t n = 0;
	int err = est_init(&e, p, limit);

	if (!err) {
		if (f->write == rbp_write_collapsed)
			n = est_collapsed(&e);
		else if (f->write == rbp_write_flamegraph)
			n = est_flamegraph(&e);
		else if (f->write == rbp_write_speedscope)
			n = est_speedscope(&e);
		else if (f->write == rbp_write_pprof)
			n = est_pprof(&e);
		else if (f->write == rbp_write_chrome)
			n = est_chrome(&e);
		else if (f->write == rbp_write_callgrind)
			n = est_tables(&e, 96, 0);
		else if (f->write == rbp_write_summary || f->write == rbp_write_summary_by_line)
			n = est_tables(&e, 0, 0);
		else if (f->write == rbp_write_raw)
			n = est_tables(&e, 8, 8);
		else if (f->write == rbp_write_callgraph || f->write == rbp_write_dot)
			n = est_graph(&e, f->write == rbp_write_callgraph);
		else {   /* a format this file does not know: the largest of them */
			uint64_t (*all[])(struct est *) = { est_collapsed, est_flamegraph,
				est_speedscope, est_pprof, est_chrome };
			for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && n <= limit && !e.err; i++) {
				uint64_t m = all[i](&e);
				n = m > n ? m : n;
			}
		}
		err = e.err;
	}
	est_free(&e);
	*bytes = n;
	return err;
}
