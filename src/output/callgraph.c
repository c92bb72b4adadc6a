/*
 * callgraph.c - a pprof-style call graph: one node per function, edges for
 * calls, as Graphviz DOT text (-f dot) or laid out by Graphviz's library
 * into an SVG that focuses a node's neighbourhood on a click (-f
 * callgraph; gvrender.c, or DOT text where rbpeek is built without
 * Graphviz: gvrender_none.c).
 *
 * Model.  A function is a row of the summary table (rbp_rows_make: label
 * and file; a C function by its label), so a recursive function is one
 * node whatever its depth, and a recursive call is an edge from the node to
 * itself (mutual recursion: a cycle).  Per function, self counts samples
 * whose innermost frame it is, total samples with it anywhere in the stack,
 * once per sample however deep the recursion (rbp_rows_count).  An edge
 * caller -> callee weighs the samples whose stack holds that call, also
 * once per sample; this is how pprof counts.
 *
 * Pruning, as pprof does: functions whose total is under node_fraction of
 * the samples (default 0.005) are dropped, then all but the node_count
 * (default 80) largest by total; a stack is then read through the
 * functions kept, so a call through dropped functions is an edge between
 * the kept ones around them, drawn dashed; edges under edge_fraction of the
 * samples (default 0.001) are dropped, and of the rest only the
 * CG_EDGES_PER_NODE * (kept functions) heaviest are drawn: Graphviz's
 * crossing minimisation grows far faster than the edges do (a dense
 * 80-function graph of a few thousand calls took minutes), and a profile,
 * even a hostile raw file, must not make report take that long.  The
 * graph's label says so.
 *
 * Cost: one pass over the stacks with samples, each walked to the root
 * (O(sum of their depths)), with a hash of edges; nothing recurses.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/utf8.h"
#include "util/vec.h"

struct cg_edge {
	uint32_t from, to;   /* kept rank of caller and callee */
	uint64_t w;          /* samples whose stack holds the call */
	uint32_t stamp;      /* last stack node counted (once per sample) */
	uint8_t residual;    /* through dropped functions */
	uint8_t shown;       /* drawn: over edge_fraction and among the heaviest */
};

struct cg {
	const struct rbp_profile *p;
	const struct rbp_output_opts *o;
	uint64_t n;              /* samples */
	struct rbp_row *rows;
	size_t n_rows;
	uint32_t *row_of;        /* frame -> row */
	uint32_t *rank;          /* row -> kept rank, UINT32_MAX when dropped */
	uint32_t *kept;          /* rank -> row */
	size_t n_kept, n_with;   /* functions kept; functions with samples */
	struct cg_edge *edges;
	size_t n_edges, cap_edges;
	double node_fraction, edge_fraction;
	size_t node_count;
};

#define CG_EDGES_PER_NODE 4
#define CG_EDGES_MIN 64

/* qsort_r: the rows come as the argument, so no file-scope state is needed */
static int cg_cmp_kept(const void *a, const void *b, void *rows)
{
	const struct rbp_row *x = &((const struct rbp_row *)rows)[*(const uint32_t *)a];
	const struct rbp_row *y = &((const struct rbp_row *)rows)[*(const uint32_t *)b];
	int c;

	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if ((c = strcmp(x->label, y->label)) || (c = strcmp(x->path, y->path)))
		return c;
	return (x->line > y->line) - (x->line < y->line);
}

static int cg_cmp_edge(const void *a, const void *b)
{
	const struct cg_edge *x = a, *y = b;

	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return (x->to > y->to) - (x->to < y->to);
}

/* Functions, their counts and the ones kept. */
static int cg_nodes(struct cg *g, uint64_t *count)
{
	const struct rbp_profile *p = g->p;

	if (!(g->row_of = calloc(p->n_frames + 1, sizeof(*g->row_of))) ||
	    rbp_rows_make(p, 0, g->row_of, &g->rows, &g->n_rows))
		return RBP_ENOMEM;
	rbp_rows_count(p, count, g->row_of, g->rows, g->n_rows);
	if (!(g->rank = malloc((g->n_rows + 1) * sizeof(*g->rank))) ||
	    !(g->kept = malloc((g->n_rows + 1) * sizeof(*g->kept))))
		return RBP_ENOMEM;
	for (size_t i = 0; i < g->n_rows; i++) {
		g->rank[i] = UINT32_MAX;
		if (!g->rows[i].total)
			continue;
		g->n_with++;
		if ((double)g->rows[i].total >= g->node_fraction * (double)g->n)
			g->kept[g->n_kept++] = (uint32_t)i;
	}
	qsort_r(g->kept, g->n_kept, sizeof(*g->kept), cg_cmp_kept, g->rows);
	if (g->n_kept > g->node_count)
		g->n_kept = g->node_count;
	for (size_t k = 0; k < g->n_kept; k++)
		g->rank[g->kept[k]] = (uint32_t)k;
	return RBP_OK;
}

/* One call caller -> callee (kept ranks) in the stack of node, c samples. */
static int cg_call(struct cg *g, struct rbp_hmap *index, uint32_t from, uint32_t to, int residual,
		   uint32_t node, uint64_t c)
{
	uint64_t key = rbp_mix64(from + 1ull, to), idx;
	struct cg_edge *e;

	while (rbp_hmap_get(index, key, &idx) && (g->edges[idx].from != from || g->edges[idx].to != to))
		key = rbp_mix64(key, 1);
	if (!rbp_hmap_get(index, key, &idx)) {
		if (rbp_grow(&g->edges, &g->cap_edges, g->n_edges + 1, sizeof(*g->edges)))
			return RBP_ENOMEM;
		g->edges[g->n_edges] = (struct cg_edge){ from, to, 0, UINT32_MAX, 0, 0 };
		idx = g->n_edges++;
		if (rbp_hmap_put(index, key, idx))
			return RBP_ENOMEM;
	}
	e = &g->edges[idx];
	e->residual |= (uint8_t)residual;
	if (e->stamp != node) {   /* once per sample, however often the stack makes the call */
		e->stamp = node;
		e->w += c;
	}
	return RBP_OK;
}

/* Edges: every stack with samples read through the kept functions. */
static int cg_edges(struct cg *g, const uint64_t *count)
{
	const struct rbp_profile *p = g->p;
	struct rbp_hmap index = { 0 };
	int err = RBP_OK;

	for (uint32_t node = 1; node < p->n_nodes && !err; node++) {
		uint32_t inner = UINT32_MAX;   /* the last kept function seen, walking outwards */
		int skipped = 0;
		if (!count[node])
			continue;
		for (uint32_t n = node; n && !err; n = p->nodes[n].parent) {
			uint32_t r = g->rank[g->row_of[p->nodes[n].frame]];
			if (r == UINT32_MAX) {
				skipped = 1;
				continue;
			}
			if (inner != UINT32_MAX)
				err = cg_call(g, &index, r, inner, skipped, node, count[node]);
			inner = r;
			skipped = 0;
		}
	}
	rbp_hmap_clear(&index);
	if (!err && g->n_edges)
		qsort(g->edges, g->n_edges, sizeof(*g->edges), cg_cmp_edge);
	return err;
}

/* s as a DOT string's contents: valid UTF-8, no control characters, " and \ escaped. */
static void cg_str(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	uint32_t cp;

	while (*s) {
		int k = rbp_utf8_decode(s, &cp);
		if (k == 0 || cp < 0x20) {
			fputs("\xef\xbf\xbd", out);
			s += k ? k : 1;
			continue;
		}
		if (*s == '"' || *s == '\\')
			putc('\\', out);
		fwrite(s, 1, (size_t)k, out);
		s += k;
	}
}

/* sqrt(v) for 0 <= v <= 1, to a few digits (Newton's method; no libm) */
static double cg_sqrt(double v)
{
	double x = v > 0.25 ? v : 0.5;

	if (v <= 0)
		return 0;
	for (int i = 0; i < 30; i++)
		x = (x + v / x) / 2;
	return x;
}

static double cg_pct(const struct cg *g, uint64_t v)
{
	return g->n ? 100.0 * (double)v / (double)g->n : 0;
}

static int cg_cmp_edge_w(const void *a, const void *b)
{
	const struct cg_edge *x = *(struct cg_edge *const *)a, *y = *(struct cg_edge *const *)b;

	return x->w != y->w ? (x->w < y->w ? 1 : -1) : (x < y ? -1 : x > y);
}

/* Mark the edges drawn (see the top of the file); returns how many, or -1 without memory. */
static long cg_pick_edges(struct cg *g)
{
	size_t cap = CG_EDGES_PER_NODE * g->n_kept, n = 0;
	struct cg_edge **by;

	if (cap < CG_EDGES_MIN)
		cap = CG_EDGES_MIN;
	for (size_t i = 0; i < g->n_edges; i++) {
		g->edges[i].shown = (double)g->edges[i].w >= g->edge_fraction * (double)g->n;
		n += g->edges[i].shown;
	}
	if (n <= cap)
		return (long)n;
	if (!(by = malloc(n * sizeof(*by))))
		return -1;
	n = 0;
	for (size_t i = 0; i < g->n_edges; i++)
		if (g->edges[i].shown)
			by[n++] = &g->edges[i];
	qsort(by, n, sizeof(*by), cg_cmp_edge_w);
	for (size_t i = cap; i < n; i++)
		by[i]->shown = 0;
	free(by);
	return (long)cap;
}

static void cg_dot(const struct cg *g, size_t n_shown, FILE *out)
{
	uint64_t max_self = 1, max_w = 1;

	for (size_t k = 0; k < g->n_kept; k++)
		if (g->rows[g->kept[k]].self > max_self)
			max_self = g->rows[g->kept[k]].self;
	for (size_t i = 0; i < g->n_edges; i++)
		if (g->edges[i].w > max_w)
			max_w = g->edges[i].w;
	fputs("digraph \"rbpeek\" {\n", out);
	fputs("graph [fontname=\"Helvetica\", fontsize=14, labelloc=t, labeljust=l, nodesep=0.3, "
	      "ranksep=0.45, label=\"", out);
	cg_str(out, g->o && g->o->title ? g->o->title : "rbpeek call graph");
	fprintf(out, "\\lcall graph: %zu of %zu functions, %zu of %zu calls; self and total in %% of "
		"%llu samples (total once per sample, however deep the recursion)\\l"
		"dropped: functions under %g%% of the samples (--node-fraction %g), all but the %zu "
		"largest (--node-count),\\lcalls under %g%% (--edge-fraction %g), the heaviest %d per "
		"function drawn; a dashed call passes "
		"through dropped functions; click a function for its callers and callees\\l\"];\n",
		g->n_kept, g->n_with, n_shown, g->n_edges, (unsigned long long)g->n,
		100 * g->node_fraction, g->node_fraction, g->node_count, 100 * g->edge_fraction,
		g->edge_fraction, CG_EDGES_PER_NODE);
	fputs("node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", margin=\"0.1,0.05\"];\n"
	      "edge [fontname=\"Helvetica\", fontsize=10, arrowsize=0.7];\n", out);
	for (size_t k = 0; k < g->n_kept; k++) {
		const struct rbp_row *r = &g->rows[g->kept[k]];
		double f = cg_sqrt((double)r->self / (double)max_self);
		int red = 250 - (int)(20 * f), green = 248 - (int)(180 * f), blue = 235 - (int)(175 * f);
		fprintf(out, "N%zu [label=\"", k + 1);
		cg_str(out, r->label);
		if (r->path[0]) {
			fputs("\\n", out);
			cg_str(out, r->path);
			fprintf(out, ":%d", (int)r->line);
		}
		fprintf(out, "\\nself %.2f%% (%llu)\\ntotal %.2f%% (%llu)\", fontsize=%.1f, "
			"fillcolor=\"#%02x%02x%02x\", color=\"#%02x%02x%02x\", tooltip=\"",
			cg_pct(g, r->self), (unsigned long long)r->self, cg_pct(g, r->total),
			(unsigned long long)r->total, 9 + 16 * f, red, green, blue,
			red * 2 / 3, green * 2 / 3, blue * 2 / 3);
		cg_str(out, r->label);
		fprintf(out, ": self %.2f%%, total %.2f%%\"];\n", cg_pct(g, r->self), cg_pct(g, r->total));
	}
	for (size_t i = 0; i < g->n_edges; i++) {
		const struct cg_edge *e = &g->edges[i];
		double f = (double)e->w / (double)max_w;
		int grey = 170 - (int)(150 * f);
		if (!e->shown)
			continue;
		fprintf(out, "N%u -> N%u [label=\" %.2f%%\", weight=%llu, penwidth=%.2f, "
			"color=\"#%02x%02x%02x\"%s, tooltip=\"", e->from + 1, e->to + 1, cg_pct(g, e->w),
			(unsigned long long)(1 + e->w * 100 / (g->n ? g->n : 1)), 1 + 4 * f,
			grey + (int)(60 * f), grey, grey, e->residual ? ", style=dashed" : "");
		cg_str(out, g->rows[g->kept[e->from]].label);
		fputs(" -> ", out);
		cg_str(out, g->rows[g->kept[e->to]].label);
		fprintf(out, ": %.2f%%%s\"];\n", cg_pct(g, e->w), e->from == e->to ? " (recursion)" : "");
	}
	fputs("}\n", out);
}

static void cg_free(struct cg *g)
{
	free(g->rows);
	free(g->row_of);
	free(g->rank);
	free(g->kept);
	free(g->edges);
}

/* The graph as DOT text into out; RBP_ENOMEM, RBP_EIO. */
static int cg_build(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	struct cg g = { .p = p, .o = o, .n = p->n_samples, .node_fraction = 0.005,
			.edge_fraction = 0.001, .node_count = 80 };
	uint64_t *count = calloc(p->n_nodes + 1, sizeof(*count));
	int err = count ? RBP_OK : RBP_ENOMEM;

	if (o && o->node_fraction)
		g.node_fraction = o->node_fraction < 0 ? 0 : o->node_fraction;
	if (o && o->edge_fraction)
		g.edge_fraction = o->edge_fraction < 0 ? 0 : o->edge_fraction;
	if (o && o->node_count > 0)
		g.node_count = o->node_count;
	for (size_t i = 0; count && i < p->n_samples; i++)
		if (p->samples[i].node < p->n_nodes)
			count[p->samples[i].node]++;
	if (!err)
		err = cg_nodes(&g, count);
	if (!err)
		err = cg_edges(&g, count);
	if (!err) {
		long shown = cg_pick_edges(&g);

		if (shown < 0) {
			err = RBP_ENOMEM;
		} else {
			cg_dot(&g, (size_t)shown, out);
			err = ferror(out) ? RBP_EIO : RBP_OK;
		}
	}
	free(count);
	cg_free(&g);
	return err;
}

int rbp_write_dot(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	return cg_build(p, o, out);
}

int rbp_write_callgraph(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	char *dot = NULL;
	size_t len = 0;
	FILE *mem;
	int err;

	if (!rbp_callgraph_renders())   /* no Graphviz in this build: the DOT text */
		return cg_build(p, o, out);
	if (!(mem = open_memstream(&dot, &len)))
		return RBP_ENOMEM;
	err = cg_build(p, o, mem);
	if (fclose(mem) && !err)
		err = RBP_ENOMEM;
	if (!err)
		err = rbp_callgraph_render(dot, out);
	free(dot);
	return err;
}
