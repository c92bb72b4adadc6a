/*
 * collapsed.c - folded stacks, one line per distinct stack:
 *   "outer (a.rb:1);inner (a.rb:5) 42"
 * Lines are sorted, so the same profile gives the same file.  Semicolons in
 * frame names are replaced by ':' since they separate frames, and control
 * characters are escaped (util/text.h), so a name cannot end a line.
 *
 * The lines are streamed: nothing holds more than one frame name at a time.
 * A file of deep stacks of long names is many times the size of the profile
 * (a stack is one node of its prefix tree, a line repeats every frame of
 * it), so building every line in memory first, to sort them, once took GBs
 * for a raw file of a few KB.  Instead the sampled nodes are sorted by
 * comparing their lines as they would be written, from the first frame
 * where their stacks part (the frames above are the same, so is their
 * text), name by name until a byte differs.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/text.h"

/* The longest frame name (longer ones are cut), before escaping. */
#define FOLD_NAME_CAP 8192

/* A frame's name as a folded line shows it, into buf (4 * FOLD_NAME_CAP); its length. */
static size_t folded_name(const struct rbp_profile *p, uint32_t frame, char *buf, size_t cap)
{
	char raw[FOLD_NAME_CAP];

	rbp_frame_name(&p->frames[frame], raw, sizeof(raw));
	for (char *c = raw; *c; c++)
		if (*c == ';')
			*c = ':';
	size_t n = rbp_text_escape(buf, cap, raw);
	return n < cap ? n : strlen(buf);
}

/* The text of one side of a comparison, produced a byte at a time. */
struct cursor {
	const struct rbp_profile *p;
	const uint32_t *path;   /* nodes, innermost first: path[n - 1] is the first frame */
	size_t n;
	char name[4 * FOLD_NAME_CAP];
	size_t len, pos;
};

/* The next byte (0..255), or -1 at the end of the line. */
static int next_byte(struct cursor *c)
{
	if (c->pos < c->len)
		return (unsigned char)c->name[c->pos++];
	if (!c->n)
		return -1;
	c->len = folded_name(c->p, c->p->nodes[c->path[--c->n]].frame, c->name, sizeof(c->name));
	c->pos = 0;
	return ';';   /* then the name's bytes */
}

struct sorter {
	const struct rbp_profile *p;
	uint32_t *pa, *pb;          /* scratch paths, max depth + 1 each */
	struct cursor ca, cb;
};
static struct sorter *sort_ctx;   /* qsort has no context argument */

/* Order of the lines of nodes a and b, as strcmp orders them; node ids break ties. */
static int cmp_nodes(const void *va, const void *vb)
{
	const struct sorter *s = sort_ctx;
	const struct rbp_pnode *nodes = s->p->nodes;
	uint32_t a = *(const uint32_t *)va, b = *(const uint32_t *)vb, x = a, y = b;
	size_t na = 0, nb = 0;
	int ca, cb;

	if (a == b)
		return 0;
	while (nodes[x].depth > nodes[y].depth) {
		s->pa[na++] = x;
		x = nodes[x].parent;
	}
	while (nodes[y].depth > nodes[x].depth) {
		s->pb[nb++] = y;
		y = nodes[y].parent;
	}
	while (x != y) {
		s->pa[na++] = x;
		s->pb[nb++] = y;
		x = nodes[x].parent;
		y = nodes[y].parent;
	}
	/* a's line ends where b's goes on with ';': the shorter sorts first */
	if (!na || !nb)
		return na ? 1 : -1;
	struct cursor *c1 = &sort_ctx->ca, *c2 = &sort_ctx->cb;
	c1->path = s->pa;
	c1->n = na;
	c2->path = s->pb;
	c2->n = nb;
	/* both start with their first differing frame's name, no ';' before it */
	c1->len = folded_name(s->p, nodes[s->pa[--c1->n]].frame, c1->name, sizeof(c1->name));
	c2->len = folded_name(s->p, nodes[s->pb[--c2->n]].frame, c2->name, sizeof(c2->name));
	c1->pos = c2->pos = 0;
	do {
		ca = next_byte(c1);
		cb = next_byte(c2);
	} while (ca == cb && ca >= 0);
	if (ca != cb)
		return ca < cb ? -1 : 1;
	return a < b ? -1 : 1;
}

/* Write node's line: its frames' names, outermost first, joined by ';'. */
static void put_stack(const struct rbp_profile *p, uint32_t node, uint32_t *frames, char *name,
		      size_t cap, FILE *out)
{
	size_t depth = rbp_profile_stack(p, node, frames, p->nodes[node].depth);

	for (size_t i = 0; i < depth; i++) {
		size_t n = folded_name(p, frames[i], name, cap);
		if (i)
			putc(';', out);
		fwrite(name, 1, n, out);
	}
}

int rbp_write_collapsed(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	uint64_t *counts = calloc(p->n_nodes + 1, sizeof(*counts));
	uint32_t *order = NULL, *frames = NULL, max_depth = 0;
	struct sorter *s = calloc(1, sizeof(*s));
	size_t n = 0;
	int err = RBP_ENOMEM;

	if (!counts || !s)
		goto done;
	for (size_t i = 0; i < p->n_samples; i++)
		counts[p->samples[i].node]++;
	for (size_t i = 1; i < p->n_nodes; i++) {
		n += counts[i] != 0;
		if (counts[i] && p->nodes[i].depth > max_depth)
			max_depth = p->nodes[i].depth;
	}
	s->p = s->ca.p = s->cb.p = p;
	if (!(order = malloc((n + 1) * sizeof(*order))) ||
	    !(s->pa = malloc(((size_t)max_depth + 1) * sizeof(*s->pa))) ||
	    !(s->pb = malloc(((size_t)max_depth + 1) * sizeof(*s->pb))) ||
	    !(frames = malloc(((size_t)max_depth + 1) * sizeof(*frames))))
		goto done;
	n = 0;
	for (uint32_t i = 1; i < p->n_nodes; i++)
		if (counts[i])
			order[n++] = i;
	sort_ctx = s;
	qsort(order, n, sizeof(*order), cmp_nodes);
	sort_ctx = NULL;
	for (size_t i = 0; i < n && !ferror(out); i++) {
		put_stack(p, order[i], frames, s->ca.name, sizeof(s->ca.name), out);
		fprintf(out, " %llu\n", (unsigned long long)counts[order[i]]);
	}
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	if (s) {
		free(s->pa);
		free(s->pb);
	}
	free(s);
	free(frames);
	free(order);
	free(counts);
	return err;
}
