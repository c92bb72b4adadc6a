/*
 * flamegraph.c - a self-contained interactive flame graph (one SVG file with
 * its own <style> and <script>, no external resources), modelled on the
 * behaviour of FlameGraph's flamegraph.pl: flame orientation (the root "all"
 * at the bottom), click to zoom, Ctrl-F regex search with "Matched: N.NN%",
 * tooltips, and the view kept in the URL (#x=FRAME&s=REGEX).
 *
 * Layout.  The profile's node tree already is the prefix tree of stacks
 * (node 0 = the empty stack, outermost frame first), so aggregating by stack
 * needs no hashing:
 *   1. count each node's samples (samples whose leaf it is);
 *   2. list every node's children (one counting pass over parent ids: CSR
 *      arrays first[]/kids[]);
 *   3. walk the tree breadth first with an explicit queue, then add each
 *      node's count to its parent in reverse order: inclusive counts;
 *   4. a node is drawn when its inclusive count is at least 1/1000 of all
 *      samples (its subtree is then narrower still); the others are counted
 *      for a footnote, which bounds the output of huge profiles;
 *   5. sort each drawn node's drawn children by display name (then kind,
 *      then node id), so the same profile gives the same bytes;
 *   6. walk breadth first again over drawn nodes: a child's left edge is
 *      its parent's left edge plus the widths of its earlier siblings (a
 *      parent's own samples and its omitted children are the gap on the
 *      right).  Widths and edges are in samples; pixels come at the end.
 * Nothing recurses, so 10,000-deep stacks cost only their output, and all
 * passes are linear except the sibling sorts.
 *
 * Each frame is one <g class="f" id="fN" data-x data-w data-d> (left edge
 * and width in samples, depth) holding a <title> tooltip, a <rect> and a
 * <text> label truncated with ".." to the rect's width; the script reads
 * those attributes to zoom and search without any other copy of the data.
 *
 * In a browser the script fits the image to the window's width (again on
 * every resize: the 1200 px written are for viewers without scripts) and
 * its height to the stacks of the view shown (the deepest frame with
 * samples in it: no empty band above the graph when the other idle view
 * or another thread is deeper), and opens at the top of the stacks: an
 * image that fits the window is seen whole, a taller one with the deepest
 * level that still holds a quarter of the samples at the top of the window (thin
 * towers above it, the root below).  A legend says what the colours mean.
 *
 * Idle samples (RBP_SAMPLE_IDLE: threads waiting for work).  When the
 * profile has any, the graph is laid out for the view it opens on (idle
 * samples left out under hide_idle, the default of record and report, or
 * kept under --idle) and the frames of the other view are written too, with
 * a control that switches views ("Show/Hide N idle samples (P%)").  The
 * switch reuses the thread filter's data: each frame's data-t says, per
 * thread, its working and its idle samples ("t:work:idle"), and the script
 * lays the graph out again from them, as for a thread.  A frame is written
 * when it reaches 1/1000 of the samples in either view, so the number of
 * frames at most doubles (at most 1000 per stack level in each view); the
 * frames of the other view alone are written hidden, 0 wide, and the image
 * is as tall as the deeper of the two views.  Without idle samples nothing
 * of this is written.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "profile/diff.h"
#include "util/utf8.h"
#include "util/err.h"

#define FG_WIDTH 1200     /* image width, px, until the script fits it to the window */
#define FG_PAD 10         /* left and right margins, px */
#define FG_FRAME_H 16     /* one stack level, px */
#define FG_TOP 80         /* title, subtitle, buttons, legend */
#define FG_BOTTOM 48      /* details line and footnote */
#define FG_CHAR_W 7.2     /* 12px monospace advance, px */
#define FG_MIN_PERMILLE 1 /* frames narrower than 1/1000 of the samples are omitted */
#define FG_HIGHLIGHT "rgb(230,0,230)"
#define FG_MAX_THREADS 64 /* a thread filter for 2..64 threads with samples */
#define FG_STR_(x) #x
#define FG_STR(x) FG_STR_(x)

/* One thread's inclusive samples in a frame, for the thread filter and the idle control. */
struct fg_tc {
	uint32_t t;   /* thread index in the profile (0 for all threads, without the filter) */
	uint64_t c;   /* working samples */
	uint64_t i;   /* idle samples */
};

/* A display name made safe for XML: valid UTF-8, no control characters. */
struct fg_name {
	char *s;
	size_t chars;      /* code points */
};

struct fg {
	const struct rbp_profile *p;
	uint64_t total;          /* samples drawn under "all" */
	uint64_t *incl;          /* per node: inclusive samples (of the view written) */
	int hide_idle;           /* the view written leaves idle samples out */
	uint64_t n_idle;         /* samples flagged idle: the idle control when any */
	uint64_t *alt;           /* per node: inclusive samples of the other view (with n_idle) */
	uint64_t alt_total;
	uint64_t *x;             /* per drawn node: left edge, in samples */
	uint32_t *first;         /* children of n are kids[first[n] .. first[n + 1]) */
	uint32_t *kids;
	uint32_t *order;         /* breadth-first order (all nodes, then drawn ones) */
	size_t n_order;
	struct fg_name *names;   /* per frame, filled for frames of drawn nodes */
	struct fg_name root;     /* "all" */
	size_t omitted;          /* nodes with samples that are not drawn */
	uint32_t max_depth;      /* deepest drawn node */
	/* the thread filter (NULL without): drawn node n's per-thread counts
	 * are tc[tc_first[n] .. tc_first[n + 1]); emit[n] its frame's index */
	uint32_t *tc_first;
	struct fg_tc *tc;
	uint32_t *emit;
	int per_thread;          /* tc holds one entry per thread (the filter), else one for all */
	/* a differential flame graph (o->diff): NEW's shape, coloured by the
	 * change of each frame's share from BASE to NEW */
	int diff;
	uint64_t *base;          /* per node: BASE's inclusive samples */
	uint64_t base_total;
	double scale;            /* the largest change of a drawn frame's share (a fraction) */
	uint32_t *fn_of;         /* per frame: its function (rbp_rows_make), for callers/callees */
};

/* ---- text ----------------------------------------------------------------- */

/*
 * A copy of str that XML accepts (out->s, malloc'd): invalid UTF-8, control
 * characters (C0, DEL and C1: a terminal showing the file would obey them)
 * and the non-characters U+FFFE/U+FFFF become U+FFFD.
 */
static int fg_sanitize(const char *str, struct fg_name *out)
{
	const unsigned char *s = (const unsigned char *)str;
	char *d = malloc(3 * strlen(str) + 1), *start = d;
	uint32_t cp;

	if (!d)
		return RBP_ENOMEM;
	out->chars = 0;
	while (*s) {
		int n = rbp_utf8_decode(s, &cp);
		if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0xfffe || cp == 0xffff) {
			memcpy(d, "\xef\xbf\xbd", 3);
			d += 3;
			s += n ? n : 1;
		} else {
			memcpy(d, s, (size_t)n);
			d += n;
			s += n;
		}
		out->chars++;
	}
	*d = 0;
	out->s = start;
	return RBP_OK;
}

/* Write s[0..len) with XML's five special characters escaped. */
static void fg_xml(FILE *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (s[i]) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default: putc(s[i], out);
		}
	}
}

/* The label of a name in width px: whole, cut to "abc..", or nothing. */
static void fg_label(FILE *out, const struct fg_name *nm, double width)
{
	double room = (width - 6) / FG_CHAR_W;
	size_t fit = room > 0 ? (size_t)room : 0, keep, bytes = 0;   /* whole characters */

	if (nm->chars <= fit) {
		fg_xml(out, nm->s, strlen(nm->s));
		return;
	}
	if (fit < 3)
		return;
	keep = fit - 2;   /* code points; stop at the first byte of the next one */
	for (size_t c = 0; nm->s[bytes]; bytes++) {
		if (((unsigned char)nm->s[bytes] & 0xc0) == 0x80)
			continue;
		if (c++ == keep)
			break;
	}
	fg_xml(out, nm->s, bytes);
	fputs("..", out);
}

/* "1,234,567" */
static const char *fg_count(uint64_t v, char buf[32])
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v), j = 0;

	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			buf[j++] = ',';
		buf[j++] = tmp[i];
	}
	buf[j] = 0;
	return buf;
}

/* ---- aggregation and layout ---------------------------------------------- */

static int fg_wide(uint64_t incl, uint64_t total)
{
	return incl && incl * 1000 >= total * FG_MIN_PERMILLE;
}

/* Whether node is seen in the view written. */
static int fg_shown(const struct fg *g, uint32_t node)
{
	/* a frame id out of range (a corrupt profile) is never drawn */
	return node == 0 || (fg_wide(g->incl[node], g->total) &&
			     g->p->nodes[node].frame < g->p->n_frames);
}

/* Whether node is written: seen in the view written or in the other one. */
static int fg_drawn(const struct fg *g, uint32_t node)
{
	return fg_shown(g, node) || (g->alt && fg_wide(g->alt[node], g->alt_total) &&
				     g->p->nodes[node].frame < g->p->n_frames);
}

static int fg_idle(const struct rbp_profile *p, size_t sample)
{
	return p->sample_flags && (p->sample_flags[sample] & RBP_SAMPLE_IDLE);
}

/* Steps 1 and 2: self counts and the CSR child lists. */
static int fg_tree(struct fg *g)
{
	const struct rbp_profile *p = g->p;
	size_t n = p->n_nodes;

	g->incl = calloc(n, sizeof(*g->incl));
	g->x = calloc(n, sizeof(*g->x));
	g->first = calloc(n + 1, sizeof(*g->first));
	g->kids = malloc((n ? n : 1) * sizeof(*g->kids));
	g->order = malloc((n ? n : 1) * sizeof(*g->order));
	if (!g->incl || !g->x || !g->first || !g->kids || !g->order)
		return RBP_ENOMEM;
	for (size_t i = 0; i < p->n_samples && !g->diff; i++)
		g->n_idle += fg_idle(p, i);
	if (g->n_idle && !(g->alt = calloc(n, sizeof(*g->alt))))
		return RBP_ENOMEM;
	if (g->diff && !(g->base = calloc(n, sizeof(*g->base))))
		return RBP_ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++) {
		if (p->samples[i].node >= n)
			continue;
		if (g->diff) {
			if (p->sample_flags && (p->sample_flags[i] & RBP_SAMPLE_BASE))
				g->base[p->samples[i].node]++;
			else
				g->incl[p->samples[i].node]++;
			continue;
		}
		if (g->hide_idle && fg_idle(p, i))   /* in the other view only */
			g->alt[p->samples[i].node]++;
		else if (!g->hide_idle && fg_idle(p, i))
			g->incl[p->samples[i].node]++;   /* in this view only */
		else {
			g->incl[p->samples[i].node]++;
			if (g->alt)
				g->alt[p->samples[i].node]++;
		}
	}
	for (size_t i = 1; i < n; i++)
		if (p->nodes[i].parent < n && p->nodes[i].parent != i)
			g->first[p->nodes[i].parent + 1]++;
	for (size_t i = 0; i < n; i++)
		g->first[i + 1] += g->first[i];
	for (size_t i = 1; i < n; i++) {
		uint32_t par = p->nodes[i].parent;
		if (par < n && par != i)
			g->kids[g->first[par]++] = (uint32_t)i;
	}
	for (size_t i = n; i > 0; i--)   /* first[] was advanced to the ends: shift back */
		g->first[i] = g->first[i - 1];
	g->first[0] = 0;
	return RBP_OK;
}

/* Breadth-first order from the root into g->order (only drawn nodes when asked). */
static void fg_bfs(struct fg *g, int drawn_only)
{
	size_t head = 0, tail = 0;

	if (!g->p->n_nodes)
		return;
	g->order[tail++] = 0;
	while (head < tail) {
		uint32_t n = g->order[head++];
		for (uint32_t i = g->first[n]; i < g->first[n + 1]; i++)
			if (!drawn_only || fg_drawn(g, g->kids[i]))
				g->order[tail++] = g->kids[i];
	}
	g->n_order = tail;
}

/* Step 3: inclusive counts; counts the omitted nodes. */
static void fg_inclusive(struct fg *g)
{
	fg_bfs(g, 0);
	for (size_t i = g->n_order; i-- > 1;) {
		uint32_t n = g->order[i];
		g->incl[g->p->nodes[n].parent] += g->incl[n];
		if (g->alt)
			g->alt[g->p->nodes[n].parent] += g->alt[n];
		if (g->base)
			g->base[g->p->nodes[n].parent] += g->base[n];
	}
	g->total = g->p->n_nodes ? g->incl[0] : 0;
	g->base_total = g->base && g->p->n_nodes ? g->base[0] : 0;
	g->alt_total = g->alt ? g->alt[0] : 0;
	for (size_t i = 1; i < g->n_order; i++)
		g->omitted += g->incl[g->order[i]] && !fg_shown(g, g->order[i]);
}

/*
 * Per-thread inclusive counts (working and idle) of the drawn nodes, for
 * the filter and the idle control; run while order[] holds every node.  Two
 * passes over the threads (count, fill), each O(nodes) per thread: only for
 * 2..FG_MAX_THREADS threads with samples.  Otherwise, when there are idle
 * samples, one group of all samples (thread 0) for the idle control alone.
 */
static int fg_thread_counts(struct fg *g)
{
	const struct rbp_profile *p = g->p;
	size_t n = p->n_nodes, nt = p->n_threads, *start = NULL, used = 0, groups;
	uint32_t *by = NULL, *fill = NULL;
	uint64_t *tmp = NULL, *tmpi = NULL;
	int err = RBP_ENOMEM;

	g->per_thread = !g->diff && nt >= 2 && nt <= FG_MAX_THREADS;
	if (!n || (!g->per_thread && !g->n_idle))
		return RBP_OK;
	if (g->per_thread) {
		if (rbp_samples_by_thread(p, &start, &by))
			goto done;
		for (size_t t = 0; t < nt; t++)
			used += start[t + 1] > start[t];
		if (used < 2) {   /* one thread with samples: nothing to filter */
			g->per_thread = 0;
			free(start);
			free(by);
			start = NULL;
			by = NULL;
			if (!g->n_idle) {
				err = RBP_OK;
				goto done;
			}
		}
	}
	if (!g->per_thread) {   /* one group: every sample */
		if (!(start = malloc(2 * sizeof(*start))) ||
		    !(by = malloc((p->n_samples + 1) * sizeof(*by))))
			goto done;
		start[0] = 0;
		start[1] = p->n_samples;
		for (size_t k = 0; k < p->n_samples; k++)
			by[k] = (uint32_t)k;
	}
	groups = g->per_thread ? nt : 1;
	if (!(tmp = malloc(n * sizeof(*tmp))) || !(tmpi = malloc(n * sizeof(*tmpi))) ||
	    !(g->tc_first = calloc(n + 1, sizeof(*g->tc_first))) ||
	    !(fill = malloc((n + 1) * sizeof(*fill))))
		goto done;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t t = 0; t < groups; t++) {
			if (start[t + 1] == start[t])
				continue;
			memset(tmp, 0, n * sizeof(*tmp));
			memset(tmpi, 0, n * sizeof(*tmpi));
			for (size_t k = start[t]; k < start[t + 1]; k++)
				if (p->samples[by[k]].node < n)
					(fg_idle(p, by[k]) ? tmpi : tmp)[p->samples[by[k]].node]++;
			for (size_t i = g->n_order; i-- > 1;) {
				tmp[p->nodes[g->order[i]].parent] += tmp[g->order[i]];
				tmpi[p->nodes[g->order[i]].parent] += tmpi[g->order[i]];
			}
			for (size_t i = 0; i < g->n_order; i++) {
				uint32_t nd = g->order[i];
				if ((!tmp[nd] && !tmpi[nd]) || !fg_drawn(g, nd))
					continue;
				if (pass == 0)
					g->tc_first[nd + 1]++;
				else
					g->tc[fill[nd]++] = (struct fg_tc){ (uint32_t)t, tmp[nd], tmpi[nd] };
			}
		}
		if (pass == 0) {
			for (size_t i = 0; i < n; i++)
				g->tc_first[i + 1] += g->tc_first[i];
			memcpy(fill, g->tc_first, (n + 1) * sizeof(*fill));
			if (!(g->tc = malloc((g->tc_first[n] + 1) * sizeof(*g->tc))))
				goto done;
		}
	}
	err = RBP_OK;
done:
	free(start);
	free(by);
	free(tmp);
	free(tmpi);
	free(fill);
	return err;
}

/* The sanitized display name of a frame, made once. */
static int fg_frame_name(struct fg *g, uint32_t frame)
{
	const struct rbp_pframe *f = &g->p->frames[frame];
	size_t cap;
	char *buf;
	int err;

	if (g->names[frame].s)
		return RBP_OK;
	cap = strlen(f->label) + strlen(f->path) + 32;
	if (!(buf = malloc(cap)))
		return RBP_ENOMEM;
	rbp_frame_name(f, buf, cap);
	err = fg_sanitize(buf, &g->names[frame]);
	free(buf);
	return err;
}

static const struct fg_name *fg_node_name(const struct fg *g, uint32_t node)
{
	return node ? &g->names[g->p->nodes[node].frame] : &g->root;
}

struct fg_sib {
	const char *name;   /* NULL: not drawn, sorts last */
	uint32_t node;
	uint8_t kind;
};

static int fg_cmp_sib(const void *a, const void *b)
{
	const struct fg_sib *x = a, *y = b;
	int c;

	if (!x->name || !y->name)
		c = !x->name - !y->name;
	else
		c = strcmp(x->name, y->name);
	if (!c)
		c = (x->kind > y->kind) - (x->kind < y->kind);
	return c ? c : (x->node > y->node) - (x->node < y->node);
}

/* Step 5: name the drawn nodes' frames and sort their siblings; order[] holds all nodes. */
static int fg_sort(struct fg *g)
{
	const struct rbp_profile *p = g->p;
	struct fg_sib *sib = malloc((p->n_nodes ? p->n_nodes : 1) * sizeof(*sib));

	if (!sib)
		return RBP_ENOMEM;
	for (size_t i = 0; i < g->n_order; i++) {
		uint32_t n = g->order[i], lo = g->first[n], hi = g->first[n + 1];
		if (!fg_drawn(g, n) || lo == hi)
			continue;
		for (uint32_t k = lo; k < hi; k++) {
			uint32_t c = g->kids[k], fr = p->nodes[c].frame;
			int drawn = fg_drawn(g, c);
			if (drawn && fg_frame_name(g, fr)) {
				free(sib);
				return RBP_ENOMEM;
			}
			sib[k - lo] = (struct fg_sib){ drawn ? g->names[fr].s : NULL, c,
						       fr < p->n_frames ? p->frames[fr].kind : 0 };
		}
		qsort(sib, hi - lo, sizeof(*sib), fg_cmp_sib);
		for (uint32_t k = lo; k < hi; k++)
			g->kids[k] = sib[k - lo].node;
	}
	free(sib);
	return RBP_OK;
}

/*
 * Step 6: left edges of drawn nodes, in breadth-first (= emission) order;
 * the frames of the other view alone are 0 wide in this one.
 */
static void fg_layout(struct fg *g)
{
	fg_bfs(g, 1);
	for (size_t i = 0; i < g->n_order; i++) {
		uint32_t n = g->order[i];
		uint64_t cur = g->x[n];
		for (uint32_t k = g->first[n]; k < g->first[n + 1]; k++) {
			uint32_t c = g->kids[k];
			if (!fg_drawn(g, c))
				break;   /* drawn children come first */
			g->x[c] = cur;
			cur += fg_shown(g, c) ? g->incl[c] : 0;
		}
		if (g->p->nodes[n].depth > g->max_depth)
			g->max_depth = g->p->nodes[n].depth;
	}
}

/* ---- colours ------------------------------------------------------------- */

/* Warm for Ruby, blue for C methods, green for GC, violet for native functions
 * (--native), grey for thread/process roots; hashed from the label. */
/* The change of node's share from BASE to NEW, a fraction (+0.1: 10 points more). */
static double fg_change(const struct fg *g, uint32_t node)
{
	double now = g->total ? (double)g->incl[node] / (double)g->total : 0;
	double was = g->base_total ? (double)g->base[node] / (double)g->base_total : 0;

	return now - was;
}

/* Red for a share that grew, blue for one that shrank, by the change over
 * the scale (the largest change drawn); near white for none. */
static void fg_diff_colour(double change, double scale, char buf[32])
{
	double k = scale > 0 ? change / scale : 0;
	int v;

	if (k > 1)
		k = 1;
	if (k < -1)
		k = -1;
	v = (int)(225.0 * (1 - (k < 0 ? -k : k)) + 0.5);
	if (k >= 0)
		snprintf(buf, 32, "rgb(255,%d,%d)", v + 5, v);
	else
		snprintf(buf, 32, "rgb(%d,%d,255)", v, v + 5);
}

static void fg_kind_colour(const struct fg *g, uint32_t node, char buf[32])
{
	const struct rbp_pframe *f = node ? &g->p->frames[g->p->nodes[node].frame] : NULL;
	const char *label = f ? f->label : "all";
	uint32_t h = 2166136261u;
	int kind = f ? f->kind : RBP_PFRAME_THREAD, r, gr, b;

	for (const unsigned char *s = (const unsigned char *)label; *s; s++)
		h = (h ^ *s) * 16777619u;
	double v1 = (h & 0xff) / 255.0, v2 = (h >> 8 & 0xff) / 255.0, v3 = (h >> 16 & 0xff) / 255.0;
	if (kind == RBP_PFRAME_CFUNC) {
		r = 60 + (int)(60 * v1);
		gr = 150 + (int)(60 * v2);
		b = 205 + (int)(50 * v3);
	} else if (kind == RBP_PFRAME_NATIVE) {
		r = 160 + (int)(50 * v1);
		gr = 110 + (int)(40 * v2);
		b = 200 + (int)(50 * v3);
	} else if (kind == RBP_PFRAME_THREAD || kind == RBP_PFRAME_PROCESS) {
		r = gr = 175 + (int)(30 * v1);
		b = r + 5;
	} else if (kind == RBP_PFRAME_GC) {
		r = 90 + (int)(40 * v1);
		gr = 190 + (int)(40 * v2);
		b = 90 + (int)(30 * v3);
	} else {
		r = 205 + (int)(50 * v3);
		gr = (int)(230 * v1);
		b = (int)(55 * v2);
	}
	snprintf(buf, 32, "rgb(%d,%d,%d)", r & 255, gr & 255, b & 255);
}

static void fg_colour(const struct fg *g, uint32_t node, char buf[32])
{
	if (g->diff)
		fg_diff_colour(node ? fg_change(g, node) : 0, g->scale, buf);
	else
		fg_kind_colour(g, node, buf);
}

/* ---- SVG ----------------------------------------------------------------- */

static const char fg_style[] =
	"text { font-family: monospace; font-size: 12px; fill: #000; }\n"
	"#title { font-size: 17px; text-anchor: middle; }\n"
	"#subtitle, #footnote { fill: #555; text-anchor: middle; }\n"
	"#matched { text-anchor: end; }\n"
	".btn { cursor: pointer; fill: #226; }\n"
	".btn:hover { text-decoration: underline; }\n"
	".hide { display: none; }\n"
	".parent { opacity: 0.5; }\n"
	"g.f { cursor: pointer; }\n"
	"g.f text { pointer-events: none; }\n"
	"g.f:hover rect { stroke: #000; stroke-width: 0.5; }\n";

/*
 * The script reads every frame's data-x/data-w/data-d (samples), rescales on
 * zoom, and mirrors the state into the URL fragment: x=FRAME (the N of fN)
 * and s=REGEX.  Keep it free of "]]>" (it sits in a CDATA section).
 */
static const char fg_script[] =
	"(function () {\n"
	"'use strict';\n"
	"var SVG = document.documentElement, W = +SVG.getAttribute('width');\n"
	"var H = +SVG.getAttribute('height'), H0 = H, PAD = 10, CW = 7.2, HL = '" FG_HIGHLIGHT "';\n"
	"var TOP = " FG_STR(FG_TOP) ", FH = " FG_STR(FG_FRAME_H) ", BOTTOM = " FG_STR(FG_BOTTOM) ";\n"
	"var $ = function (id) { return document.getElementById(id); };\n"
	"var F = [].map.call(document.querySelectorAll('#frames > g.f'), function (g) {\n"
	"  var t = g.querySelector('title').textContent, r = g.querySelector('rect');\n"
	"  return { g: g, r: r, t: g.querySelector('text'), title: t,\n"
	"    name: t.slice(0, t.lastIndexOf(' (')), chars: Array.from(t.slice(0, t.lastIndexOf(' ('))),\n"
	"    x: +g.getAttribute('data-x'), w: +g.getAttribute('data-w'),\n"
	"    d: +g.getAttribute('data-d'), fill: r.getAttribute('fill'),\n"
	"    fn: +(g.getAttribute('data-fn') || -1),\n"
	"    p: g.hasAttribute('data-p') ? +g.getAttribute('data-p') : -1,\n"
	"    te: g.querySelector('title'),\n"
	"    tc: (g.getAttribute('data-t') || '').split(',').filter(Boolean).map(function (s) {\n"
	"      var a = s.split(':'); return [+a[0], +a[1], +(a[2] || 0)];\n"
	"    }) };\n"
	"});\n"
	"F.forEach(function (f) { f.x0 = f.x; f.w0 = f.w; f.t0 = f.title; });\n"
	"/* the thread filter: threads with samples (index, pid, working and idle samples, name) */\n"
	"var TH = [].map.call(document.querySelectorAll('#threads > text'), function (e) {\n"
	"  return { t: +e.getAttribute('data-t'), pid: +e.getAttribute('data-pid'),\n"
	"    n: +e.getAttribute('data-n'), i: +(e.getAttribute('data-i') || 0), name: e.textContent };\n"
	"});\n"
	"var sel = $('thread'), filter = 'all';\n"
	"/* the idle control: idle samples shown or not (IDLE0: as written) */\n"
	"var IB = $('idle'), IDLE0 = !!IB && IB.getAttribute('data-shown') === '1', idle = IDLE0;\n"
	"var byId = {};\n"
	"F.forEach(function (f, i) { byId[f.g.id] = f; f.g.__fg = i; });\n"
	"var total = F.length ? F[0].w : 0, zoomed = null, term = null, extra = null;\n"
	"function label(f, w) {\n"
	"  var fit = Math.floor((w - 6) / CW);\n"
	"  if (f.chars.length <= fit) return f.name;\n"
	"  return fit < 3 ? '' : f.chars.slice(0, fit - 2).join('') + '..';\n"
	"}\n"
	"function place(f, x, w) {\n"
	"  f.r.setAttribute('x', x.toFixed(2));\n"
	"  f.r.setAttribute('width', w.toFixed(2));\n"
	"  f.t.setAttribute('x', (x + 3).toFixed(2));\n"
	"  f.t.textContent = label(f, w);\n"
	"}\n"
	"function keep(t) {\n"
	"  if (filter === 'all') return true;\n"
	"  if (filter[0] === 't') return t === +filter.slice(1);\n"
	"  return TH.some(function (h) { return h.t === t && h.pid === +filter.slice(1); });\n"
	"}\n"
	"function count(n) { return n.toLocaleString('en-US'); }\n"
	"/* widths from the chosen threads' samples, idle ones or not; edges laid\n"
	"   out again, parents first, siblings in the order written (the same as\n"
	"   the full graph's) */\n"
	"function setFilter(v) {\n"
	"  if (v !== 'all' && !(sel && [].some.call(sel.options, function (o) { return o.value === v; })))\n"
	"    v = 'all';\n"
	"  filter = v;\n"
	"  if (sel) sel.value = v;\n"
	"  var cur = [], same = v === 'all' && idle === IDLE0;\n"
	"  F.forEach(function (f, i) {\n"
	"    var w = 0;\n"
	"    if (same) w = f.w0;\n"
	"    else f.tc.forEach(function (p) { if (keep(p[0])) w += p[1] + (idle ? p[2] : 0); });\n"
	"    f.w = w;\n"
	"    if (same) f.x = f.x0;\n"
	"    else if (f.p >= 0) { f.x = cur[f.p]; cur[f.p] += w; } else f.x = 0;\n"
	"    cur[i] = f.x;\n"
	"  });\n"
	"  total = F.length ? F[0].w : 0;\n"
	"  F.forEach(function (f) {\n"
	"    f.title = same ? f.t0 : f.name + ' (' + count(f.w) + ' sample' + (f.w === 1 ? '' : 's') +\n"
	"      ', ' + (total ? 100 * f.w / total : 0).toFixed(2) + '%)';\n"
	"    if (f.te.textContent !== f.title) f.te.textContent = f.title;\n"
	"  });\n"
	"  if ($('count')) $('count').textContent = count(total);\n"
	"  fitHeight();\n"
	"}\n"
	"/* the image as tall as the stacks of the view shown: the frames and the\n"
	"   lines under them move by the change (frames keep their depth's place\n"
	"   above the bottom) */\n"
	"var LOW = ['details', 'matched', 'footnote'].filter($).map(function (id) {\n"
	"  return [$(id), +$(id).getAttribute('y')];\n"
	"});\n"
	"function fitHeight() {\n"
	"  var d = 0;\n"
	"  F.forEach(function (f) { if (f.w > 0 && f.d > d) d = f.d; });\n"
	"  var h = Math.min(H0, TOP + (d + 1) * FH + BOTTOM), dy = h - H0;\n"
	"  if (SW && SW.isOpen()) return;\n"
	"  if (h === H) return;\n"
	"  H = h;\n"
	"  SVG.setAttribute('height', H);\n"
	"  SVG.setAttribute('viewBox', '0 0 ' + W + ' ' + H);\n"
	"  $('background').setAttribute('height', H);\n"
	"  if (dy) $('frames').setAttribute('transform', 'translate(0,' + dy + ')');\n"
	"  else $('frames').removeAttribute('transform');\n"
	"  LOW.forEach(function (e) { e[0].setAttribute('y', e[1] + dy); });\n"
	"}\n"
	"/* the title of the view shown (the idle control switches between two) */\n"
	"var SW = null;   /* the callers/callees view, when its script is there */\n"
	"var TT = $('title'), TITLE0 = TT.querySelector('title').textContent;\n"
	"var TITLE1 = TT.getAttribute('data-alt') || TITLE0;\n"
	"function retitle() {\n"
	"  var full = idle === IDLE0 ? TITLE0 : TITLE1, te = TT.querySelector('title');\n"
	"  if (te.textContent !== full) te.textContent = full;\n"
	"  var fitc = Math.floor((W - 2 * 120 - 6) / 10.4), chars = Array.from(full);\n"
	"  var tn = TT.lastChild.nodeType === 3 ? TT.lastChild :\n"
	"    TT.appendChild(document.createTextNode(''));\n"
	"  tn.textContent = chars.length <= fitc ? full :\n"
	"    fitc < 3 ? '' : chars.slice(0, fitc - 2).join('') + '..';\n"
	"}\n"
	"function option(v, text) {\n"
	"  var o = document.createElementNS('http://www.w3.org/1999/xhtml', 'option');\n"
	"  o.value = v; o.textContent = text; sel.appendChild(o);\n"
	"}\n"
	"/* the filter's choices: the processes and threads with samples in this\n"
	"   view; no filter for one thread */\n"
	"function options() {\n"
	"  var pids = {}, np, n = function (h) { return h.n + (idle ? h.i : 0); };\n"
	"  while (sel.options.length > 1) sel.removeChild(sel.lastChild);\n"
	"  TH.forEach(function (h) { if (n(h)) pids[h.pid] = (pids[h.pid] || 0) + n(h); });\n"
	"  $('filter').classList.toggle('hide', TH.filter(n).length < 2);\n"
	"  np = Object.keys(pids).length;\n"
	"  if (np > 1) Object.keys(pids).forEach(function (pid) {\n"
	"    option('p' + pid, 'process ' + pid + ' (' + pids[pid] + ' samples)');\n"
	"  });\n"
	"  TH.forEach(function (h) {\n"
	"    if (n(h)) option('t' + h.t, h.name + (np > 1 ? ' of ' + h.pid : '') + ' (' + n(h) + ' samples)');\n"
	"  });\n"
	"}\n"
	"if (sel) {\n"
	"  options();\n"
	"  sel.addEventListener('change', function () { setFilter(sel.value); zoom(null); });\n"
	"}\n"
	"/* idle samples shown (on) or left out: the filter's choices and the\n"
	"   layout follow; the control says what a click does */\n"
	"function setIdle(on) {\n"
	"  if (!IB) return;\n"
	"  idle = !!on;\n"
	"  IB.textContent = (idle ? 'Hide' : 'Show') + IB.textContent.slice(4);\n"
	"  retitle();\n"
	"  if (sel) options();\n"
	"  setFilter(filter);\n"
	"}\n"
	"if (IB) IB.addEventListener('click', function () {\n"
	"  setIdle(!idle); zoom(zoomed && zoomed.w ? zoomed : null);\n"
	"});\n"
	"function view() {\n"
	"  return zoomed ? [zoomed.x, zoomed.w, zoomed.d] : [0, total, 0];\n"
	"}\n"
	"/* the window's width (without a scrollbar), at least 400 px */\n"
	"function fit() {\n"
	"  var w = Math.max(400, Math.floor(Math.min(window.innerWidth || W,\n"
	"    SVG.clientWidth || window.innerWidth || W)));\n"
	"  if (w === W) return;\n"
	"  W = w;\n"
	"  SVG.setAttribute('width', w);\n"
	"  SVG.setAttribute('viewBox', '0 0 ' + w + ' ' + H);\n"
	"  $('background').setAttribute('width', w);\n"
	"  ['title', 'subtitle', 'footnote'].forEach(function (id) {\n"
	"    if ($(id)) $(id).setAttribute('x', (w / 2).toFixed(0));\n"
	"  });\n"
	"  retitle();\n"
	"  $('search').setAttribute('x', w - PAD - 100);\n"
	"  $('matched').setAttribute('x', w - PAD);\n"
	"  if ($('filter')) $('filter').setAttribute('x', w - PAD - 300);\n"
	"  if (IB) IB.setAttribute('x', w - PAD);\n"
	"}\n"
	"function zoom(z) {\n"
	"  zoomed = z && z !== F[0] ? z : null;\n"
	"  var v = view(), zx = v[0], zw = v[1], zd = v[2], k = (W - 2 * PAD) / (zw || 1);\n"
	"  F.forEach(function (f) {\n"
	"    var inside = f.d >= zd && f.x >= zx && f.x + f.w <= zx + zw;\n"
	"    var above = f.d < zd && f.x <= zx && f.x + f.w >= zx + zw;\n"
	"    f.g.classList.toggle('hide', (!inside && !above) || !f.w);\n"
	"    f.g.classList.toggle('parent', above);\n"
	"    if (above) place(f, PAD, W - 2 * PAD);\n"
	"    else if (inside) place(f, PAD + (f.x - zx) * k, f.w * k);\n"
	"  });\n"
	"  $('unzoom').classList.toggle('hide', !zoomed);\n"
	"  if (term !== null) search(term); else save();\n"
	"}\n"
	"function search(src) {\n"
	"  var re;\n"
	"  try { re = new RegExp(src); } catch (e) {\n"
	"    $('matched').textContent = 'invalid regular expression'; return;\n"
	"  }\n"
	"  term = src;\n"
	"  var v = view(), lo = v[0], hi = v[0] + v[1], spans = [], sum = 0, end = -1;\n"
	"  F.forEach(function (f) {\n"
	"    var hit = f.d > 0 && re.test(f.name);\n"
	"    f.r.setAttribute('fill', hit ? HL : f.fill);\n"
	"    if (hit && !f.g.classList.contains('hide'))\n"
	"      spans.push([Math.max(f.x, lo), Math.min(f.x + f.w, hi)]);\n"
	"  });\n"
	"  /* frames nest or are disjoint: count only the outermost matches */\n"
	"  spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
	"  spans.forEach(function (s) { if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; } });\n"
	"  $('matched').textContent = 'Matched: ' + (v[1] ? 100 * sum / v[1] : 0).toFixed(2) + '%';\n"
	"  $('search').textContent = 'Reset Search';\n"
	"  save();\n"
	"}\n"
	"function clearSearch() {\n"
	"  term = null;\n"
	"  F.forEach(function (f) { f.r.setAttribute('fill', f.fill); });\n"
	"  $('matched').textContent = '';\n"
	"  $('search').textContent = 'Search';\n"
	"  save();\n"
	"}\n"
	"function askSearch() {\n"
	"  var s = window.prompt('Search frames (regular expression):', term === null ? '' : term);\n"
	"  if (s === null) return;\n"
	"  if (s === '') clearSearch(); else search(s);\n"
	"}\n"
	"function save() {\n"
	"  var parts = [];\n"
	"  if (zoomed) parts.push('x=' + zoomed.g.id.slice(1));\n"
	"  if (term !== null) parts.push('s=' + encodeURIComponent(term));\n"
	"  if (filter !== 'all') parts.push('t=' + filter);\n"
	"  if (idle !== IDLE0) parts.push('i=' + (idle ? 1 : 0));\n"
	"  if (extra) parts.push(extra);\n"
	"  var h = parts.length ? '#' + parts.join('&') : '';\n"
	"  if (SW) SW.refresh();\n"
	"  if (location.hash !== h && !(h === '' && location.hash === '#'))\n"
	"    history.replaceState(null, '', location.href.split('#')[0] + h);\n"
	"}\n"
	"function load() {\n"
	"  var q = new URLSearchParams(location.search), h = new URLSearchParams(location.hash.slice(1));\n"
	"  var x = h.has('x') ? h.get('x') : q.get('x'), s = h.has('s') ? h.get('s') : q.get('s');\n"
	"  var t = h.has('t') ? h.get('t') : q.get('t'), i = h.has('i') ? h.get('i') : q.get('i');\n"
	"  term = null;\n"
	"  /* the callers/callees view's part (its script opens it) */\n"
	"  extra = h.has('sw') ? 'sw=' + encodeURIComponent(h.get('sw')) : null;\n"
	"  if (IB) { idle = i === null ? IDLE0 : i === '1'; setIdle(idle); }\n"
	"  setFilter(t || 'all');\n"
	"  zoom(x !== null && byId['f' + x] ? byId['f' + x] : null);\n"
	"  if (s) search(s); else clearSearch();\n"
	"}\n"
	"function frameOf(e) {\n"
	"  var g = e.target.closest && e.target.closest('g.f');\n"
	"  return g ? F[g.__fg] : null;\n"
	"}\n"
	"$('frames').addEventListener('click', function (e) {\n"
	"  var f = frameOf(e); if (f) zoom(f);\n"
	"});\n"
	"$('frames').addEventListener('mouseover', function (e) {\n"
	"  var f = frameOf(e); $('details').textContent = f ? f.title : ' ';\n"
	"});\n"
	"$('frames').addEventListener('mouseout', function () { $('details').textContent = ' '; });\n"
	"$('unzoom').addEventListener('click', function () { zoom(null); });\n"
	"$('search').addEventListener('click', function () {\n"
	"  if (term !== null) clearSearch(); else askSearch();\n"
	"});\n"
	"document.addEventListener('keydown', function (e) {\n"
	"  if (((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) || e.key === 'F3') {\n"
	"    e.preventDefault(); askSearch();\n"
	"  } else if (e.key === 'Escape') {\n"
	"    if (term !== null) clearSearch(); else zoom(null);\n"
	"  }\n"
	"});\n"
	"window.addEventListener('hashchange', load);\n"
	"window.addEventListener('resize', function () {\n"
	"  var w = W; fit(); if (w !== W) zoom(zoomed);\n"
	"});\n"
	"window.rbpeekFlamegraph = { zoom: function (id) { zoom(byId[id] || null); },\n"
	"  /* for the callers/callees view (a second script) */\n"
	"  frames: F, byId: byId, zoomed: function () { return zoomed; },\n"
	"  term: function () { return term; }, width: function () { return W; },\n"
	"  setExtra: function (v) { extra = v; save(); }, fitHeight: function () { H = -1; fitHeight(); },\n"
	"  setHeight: function (h) {\n"
	"    H = h; SVG.setAttribute('height', h); SVG.setAttribute('viewBox', '0 0 ' + W + ' ' + h);\n"
	"    $('background').setAttribute('height', h);\n"
	"    LOW.forEach(function (e) { e[0].setAttribute('y', e[1] + h - H0); });\n"
	"  },\n"
	"  filter: function (v) { setFilter(v); zoom(null); },\n"
	"  idle: function (on) { setIdle(on); zoom(null); },\n"
	"  search: search, askSearch: askSearch, clearSearch: clearSearch,\n"
	"  sandwich: function (v) { SW = v; } };\n"
	"fit();\n"
	"load();\n"
	"/* open on the top of the stacks: the image fitting the window is seen\n"
	"   whole; a taller one opens with the deepest level that still holds a quarter\n"
	"   of the samples at the top of the window (narrower stacks above it, the\n"
	"   root below) */\n"
	"(function () {\n"
	"  var sum = [], d = 0;\n"
	"  if (H <= (window.innerHeight || H) || !total) return;\n"
	"  F.forEach(function (f) {\n"
	"    if (!f.g.classList.contains('hide') && f.w > 0) sum[f.d] = (sum[f.d] || 0) + f.w;\n"
	"  });\n"
	"  sum.forEach(function (v, i) { if (v >= 0.25 * total) d = i; });\n"
	"  window.scrollTo(0, Math.max(0, H - BOTTOM - (d + 1) * FH - TOP));\n"
	"})();\n"
	"})();\n";

static void fg_header(FILE *out, const struct fg_name *title, const struct fg_name *alt,
		      int height)
{
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<!-- rbpeek flame graph: click a frame to zoom, Ctrl-F to search -->\n"
		"<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
		"<stop offset=\"5%%\" stop-color=\"#eeeeee\"/><stop offset=\"95%%\" "
		"stop-color=\"#eeeeb0\"/></linearGradient></defs>\n"
		"<style type=\"text/css\"><![CDATA[\n%s]]></style>\n"
		"<rect id=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#bg)\"/>\n",
		FG_WIDTH, height, FG_WIDTH, height, fg_style, FG_WIDTH, height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\"", FG_WIDTH / 2);
	if (alt) {   /* the other idle view's title, for the control */
		fputs(" data-alt=\"", out);
		fg_xml(out, alt->s, strlen(alt->s));
		putc('"', out);
	}
	fputs("><title>", out);
	fg_xml(out, title->s, strlen(title->s));
	fputs("</title>", out);
	fg_label(out, title, (FG_WIDTH - 2 * 120) * FG_CHAR_W / 10.4);   /* room for the buttons */
	fputs("</text>\n", out);
}

/* What the colours mean (the middle of each family fg_colour() draws from). */
static void fg_legend(FILE *out)
{
	static const struct {
		const char *fill, *what;
	} keys[] = {
		{ "rgb(230,115,27)", "Ruby" },
		{ "rgb(90,180,230)", "C method" },
		{ "rgb(185,130,225)", "native (--native)" },
		{ "rgb(110,210,105)", "GC" },
		{ "rgb(190,190,195)", "thread / process" },
	};
	int x = FG_PAD;

	fputs("<g id=\"legend\">", out);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		fprintf(out, "<rect x=\"%d\" y=\"53\" width=\"10\" height=\"10\" rx=\"2\" fill=\"%s\"/>"
			"<text x=\"%d\" y=\"62\">%s</text>", x, keys[i].fill, x + 14, keys[i].what);
		x += 14 + (int)(strlen(keys[i].what) * FG_CHAR_W) + 16;
	}
	fputs("</g>\n", out);
}

/*
 * A differential graph's key: the colour scale, from the largest drop to
 * the largest rise of a frame's share (in points of each recording's
 * samples), white for no change.
 */
static void fg_diff_legend(const struct fg *g, FILE *out)
{
	char fill[32];
	int x = FG_PAD;

	fprintf(out, "<g id=\"legend\" data-scale=\"%.6f\"><text x=\"%d\" y=\"62\">"
		"share of samples, BASE to NEW: %+.2f points</text>", g->scale, x, -100.0 * g->scale);
	x += (int)(44 * FG_CHAR_W) + 8;
	for (int i = -4; i <= 4; i++) {
		fg_diff_colour(g->scale * i / 4.0, g->scale, fill);
		fprintf(out, "<rect x=\"%d\" y=\"53\" width=\"14\" height=\"10\" fill=\"%s\" "
			"data-change=\"%.6f\"/>", x, fill, g->scale * i / 4.0);
		x += 14;
	}
	fprintf(out, "<text x=\"%d\" y=\"62\">%+.2f points (red: grew, blue: shrank)</text></g>\n",
		x + 6, 100.0 * g->scale);
}

/*
 * The functions BASE has and NEW has not (not drawn: the graph has NEW's
 * shape), largest first, on one line under the legend (id="gone"; every
 * one in its tooltip).
 */
static int fg_gone(const struct fg *g, FILE *out)
{
	const struct rbp_profile *p = g->p;
	uint64_t *cnt = calloc(p->n_nodes + 1, sizeof(*cnt));
	uint32_t *row_of = calloc(p->n_frames + 1, sizeof(*row_of));
	struct rbp_row *now = NULL, *was = NULL;
	size_t n = 0, n_gone = 0, shown = 0, len = 0;
	int err = RBP_ENOMEM;

	if (!cnt || !row_of || rbp_rows_make(p, 0, row_of, &now, &n) ||
	    !(was = malloc((n + 1) * sizeof(*was))))
		goto done;
	memcpy(was, now, n * sizeof(*was));
	for (int pass = 0; pass < 2; pass++) {
		memset(cnt, 0, p->n_nodes * sizeof(*cnt));
		for (size_t i = 0; i < p->n_samples; i++)
			if (p->samples[i].node < p->n_nodes &&
			    ((p->sample_flags[i] & RBP_SAMPLE_BASE) == 0) == !pass)
				cnt[p->samples[i].node]++;
		rbp_rows_count(p, cnt, row_of, pass ? was : now, n);
	}
	/* the rows gone, by BASE's total, largest first (a selection: few) */
	for (size_t i = 0; i < n; i++)
		if (!now[i].total && was[i].total)
			was[n_gone++] = was[i];
	for (size_t i = 0; i < n_gone; i++)
		for (size_t j = i + 1; j < n_gone; j++)
			if (was[j].total > was[i].total) {
				struct rbp_row t = was[i];
				was[i] = was[j];
				was[j] = t;
			}
	err = RBP_OK;
	if (!n_gone)
		goto done;
	fprintf(out, "<text id=\"gone\" x=\"%d\" y=\"76\" data-n=\"%zu\"><title>only in BASE:",
		FG_PAD, n_gone);
	for (size_t i = 0; i < n_gone; i++) {
		fputs(i ? ", " : " ", out);
		fg_xml(out, was[i].label, strlen(was[i].label));
		fprintf(out, " (%.2f%%)", 100.0 * (double)was[i].total / (double)(g->base_total ? g->base_total : 1));
	}
	fprintf(out, "</title>only in BASE (not drawn): ");
	len = 27;
	for (size_t i = 0; i < n_gone; i++, shown++) {
		size_t l = strlen(was[i].label) + 12;
		if (i && len + l > (size_t)((FG_WIDTH - 2 * FG_PAD) / FG_CHAR_W) - 14)
			break;
		if (i)
			fputs(", ", out);
		fg_xml(out, was[i].label, strlen(was[i].label));
		fprintf(out, " (%.2f%%)", 100.0 * (double)was[i].total / (double)(g->base_total ? g->base_total : 1));
		len += l;
	}
	if (shown < n_gone)
		fprintf(out, ", %zu more", n_gone - shown);
	fputs("</text>\n", out);
done:
	free(cnt);
	free(row_of);
	free(now);
	free(was);
	return err;
}

static void fg_subtitle(const struct fg *g, FILE *out, int height)
{
	const struct rbp_profile_meta *m = &g->p->meta;
	char n[32];

	/* with the idle control, the script rewrites the count (id="count") */
	fprintf(out, "<text id=\"subtitle\" x=\"%d\" y=\"44\">%s%s%s %ssample%s", FG_WIDTH / 2,
		g->n_idle ? "<tspan id=\"count\">" : "", fg_count(g->total, n),
		g->n_idle ? "</tspan>" : "", m->on_cpu ? "on-CPU " : "", g->total == 1 ? "" : "s");
	if (g->diff)
		fprintf(out, " (NEW) against %s (BASE)", fg_count(g->base_total, n));
	else if (m->duration_ns)
		fprintf(out, " in %.1f s", (double)m->duration_ns / 1e9);
	if (m->rate_hz)
		fprintf(out, " at %u Hz", (unsigned)m->rate_hz);
	if (m->ruby_version && *m->ruby_version) {
		struct fg_name v;
		if (!fg_sanitize(m->ruby_version, &v)) {
			fputs(", ruby ", out);
			fg_xml(out, v.s, strlen(v.s));
			free(v.s);
		}
	}
	fputs("</text>\n", out);
	fprintf(out, "<text id=\"sandwich\" class=\"btn hide\" x=\"%d\" y=\"24\">Callers &amp; callees"
		"</text>\n", FG_PAD + 100);
	fprintf(out, "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n"
		"<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\">Search</text>\n"
		"<text id=\"matched\" x=\"%d\" y=\"%d\"></text>\n"
		"<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n",
		FG_PAD, FG_WIDTH - FG_PAD - 100, FG_WIDTH - FG_PAD, height - 30, FG_PAD, height - 30);
	if (g->diff)
		fg_diff_legend(g, out);
	else
		fg_legend(out);
	if (g->n_idle) {   /* the idle control, right of the subtitle; says the idle share */
		uint64_t all = g->hide_idle ? g->alt_total : g->total;
		fprintf(out, "<text id=\"idle\" class=\"btn\" x=\"%d\" y=\"44\" text-anchor=\"end\" "
			"data-shown=\"%d\">%s %s idle sample%s (%.1f%%)</text>\n", FG_WIDTH - FG_PAD,
			!g->hide_idle, g->hide_idle ? "Show" : "Hide", fg_count(g->n_idle, n),
			g->n_idle == 1 ? "" : "s", all ? 100.0 * (double)g->n_idle / (double)all : 0.0);
	}
	if (g->omitted)
		fprintf(out, "<text id=\"footnote\" x=\"%d\" y=\"%d\">%s frame%s narrower than "
			"0.1%% of the samples not drawn</text>\n", FG_WIDTH / 2, height - 10,
			fg_count(g->omitted, n), g->omitted == 1 ? "" : "s");
}

static void fg_frame(const struct fg *g, FILE *out, size_t idx, uint32_t node, int height)
{
	const struct fg_name *nm = fg_node_name(g, node);
	int shown = fg_shown(g, node);   /* else in the other view only: hidden, 0 wide */
	uint64_t sw = shown ? g->incl[node] : 0;
	double k = g->total ? (double)(FG_WIDTH - 2 * FG_PAD) / (double)g->total : 0;
	double x = FG_PAD + (double)g->x[node] * k, w = g->total ? (double)sw * k
							: FG_WIDTH - 2 * FG_PAD;
	int y = height - FG_BOTTOM - (int)(g->p->nodes[node].depth + 1) * FG_FRAME_H;
	char n[32], fill[32];

	fg_colour(g, node, fill);
	fprintf(out, "<g class=\"f%s\" id=\"f%zu\" data-x=\"%llu\" data-w=\"%llu\" data-d=\"%u\"",
		shown ? "" : " hide", idx, (unsigned long long)g->x[node], (unsigned long long)sw,
		(unsigned)g->p->nodes[node].depth);
	if (node && g->fn_of)   /* the function (summary's grouping), for callers and callees */
		fprintf(out, " data-fn=\"%u\"", g->fn_of[g->p->nodes[node].frame]);
	if (g->tc) {   /* the filter: parent frame, then thread:samples[:idle samples] */
		fprintf(out, " data-p=\"%d\" data-t=\"", node ? (int)g->emit[g->p->nodes[node].parent] : -1);
		for (uint32_t j = g->tc_first[node]; j < g->tc_first[node + 1]; j++) {
			fprintf(out, "%s%u:%llu", j > g->tc_first[node] ? "," : "", g->tc[j].t,
				(unsigned long long)g->tc[j].c);
			if (g->tc[j].i)
				fprintf(out, ":%llu", (unsigned long long)g->tc[j].i);
		}
		putc('"', out);
	}
	fputs("><title>", out);
	fg_xml(out, nm->s, strlen(nm->s));
	fprintf(out, " (%s sample%s, %.2f%%", fg_count(g->incl[node], n), g->incl[node] == 1 ? "" : "s",
		g->total ? 100.0 * (double)g->incl[node] / (double)g->total : 0.0);
	if (g->diff && node && !g->base[node])
		fputs(", new: not in BASE", out);
	else if (g->diff && node) {   /* BASE's share, the change in points, the ratio */
		double was = g->base_total ? (double)g->base[node] / (double)g->base_total : 0;
		fprintf(out, ", BASE %.2f%%: %+.2f points, x%.2f", 100.0 * was,
			100.0 * fg_change(g, node), was > 0 ? (fg_change(g, node) + was) / was : 0.0);
	}
	fprintf(out, ")</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
		"height=\"%d\" rx=\"2\" fill=\"%s\"/><text x=\"%.2f\" y=\"%d\">",
		x, y, w, FG_FRAME_H - 1, fill, x + 3, y + 11);
	fg_label(out, nm, w);
	fputs("</text></g>\n", out);
}

/*
 * The thread filter's choices: a hidden list of the threads with samples
 * (index, pid, working and idle samples, name), and the place of the <select> the script
 * fills (a foreignObject, top right, under the Search button).
 */
static void fg_threads(const struct fg *g, FILE *out)
{
	const struct rbp_profile *p = g->p;
	int seen = 0;   /* threads with samples in the view written */

	fputs("<g id=\"threads\" class=\"hide\">", out);
	for (uint32_t t = 0; t < p->n_threads; t++) {
		uint64_t c = 0, i = 0;
		for (uint32_t k = g->tc_first[0]; k < g->tc_first[1]; k++)
			if (g->tc[k].t == t) {
				c = g->tc[k].c;
				i = g->tc[k].i;
			}
		if (!c && !i)
			continue;
		seen += c || !g->hide_idle;
		struct fg_name nm;
		char label[256];
		snprintf(label, sizeof(label), "thread %d%s%s%s", (int)p->threads[t].tid,
			 p->threads[t].name[0] ? " (" : "", p->threads[t].name,
			 p->threads[t].name[0] ? ")" : "");
		if (fg_sanitize(label, &nm))
			continue;
		fprintf(out, "<text data-t=\"%u\" data-pid=\"%d\" data-n=\"%llu\"", t,
			(int)p->threads[t].pid, (unsigned long long)c);
		if (i)
			fprintf(out, " data-i=\"%llu\"", (unsigned long long)i);
		putc('>', out);
		fg_xml(out, nm.s, strlen(nm.s));
		fputs("</text>", out);
		free(nm.s);
	}
	/* hidden while the view has one thread (the others only idle) */
	fprintf(out, "</g>\n<foreignObject id=\"filter\"%s x=\"%d\" y=\"48\" width=\"300\" "
		"height=\"24\"><select xmlns=\"http://www.w3.org/1999/xhtml\" id=\"thread\" "
		"style=\"font: 12px monospace; max-width: 300px\"><option value=\"all\">all threads"
		"</option></select></foreignObject>\n", seen < 2 ? " class=\"hide\"" : "",
		FG_WIDTH - FG_PAD - 300);
}

static int fg_emit(const struct fg *g, const struct rbp_output_opts *o, FILE *out)
{
	struct fg_name title, alt = { 0 };
	int height = FG_TOP + (int)(g->max_depth + 1) * FG_FRAME_H + FG_BOTTOM;
	int has_alt = g->n_idle && o && o->title_alt;

	if (fg_sanitize(o && o->title ? o->title : "rbpeek flame graph", &title))
		return RBP_ENOMEM;
	if (has_alt && fg_sanitize(o->title_alt, &alt)) {
		free(title.s);
		return RBP_ENOMEM;
	}
	fg_header(out, &title, has_alt ? &alt : NULL, height);
	free(title.s);
	free(alt.s);
	fg_subtitle(g, out, height);
	if (g->diff && fg_gone(g, out))
		return RBP_ENOMEM;
	if (g->tc && g->per_thread)
		fg_threads(g, out);
	fputs("<g id=\"frames\">\n", out);
	for (size_t i = 0; i < g->n_order; i++)
		fg_frame(g, out, i, g->order[i], height);
	fprintf(out, "</g>\n<g id=\"sw\" class=\"hide\"></g>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
		fg_script, rbp_fg_sandwich_script);
	return ferror(out) ? RBP_EIO : RBP_OK;
}

static void fg_free(struct fg *g)
{
	if (g->names)
		for (size_t i = 0; i < g->p->n_frames; i++)
			free(g->names[i].s);
	free(g->names);
	free(g->root.s);
	free(g->incl);
	free(g->alt);
	free(g->base);
	free(g->fn_of);
	free(g->x);
	free(g->first);
	free(g->kids);
	free(g->order);
	free(g->tc_first);
	free(g->tc);
	free(g->emit);
}

int rbp_write_flamegraph(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	struct fg g = { .p = p, .hide_idle = o && o->hide_idle && !o->diff, .diff = o && o->diff };
	int err;

	if (!(g.names = calloc(p->n_frames ? p->n_frames : 1, sizeof(*g.names))) ||
	    fg_sanitize("all", &g.root) || fg_tree(&g)) {
		fg_free(&g);
		return RBP_ENOMEM;
	}
	fg_inclusive(&g);
	{   /* functions, for the callers/callees view */
		struct rbp_row *rows = NULL;
		size_t n_rows;
		if (!(g.fn_of = calloc(p->n_frames + 1, sizeof(*g.fn_of))) ||
		    rbp_rows_make(p, 0, g.fn_of, &rows, &n_rows)) {
			free(rows);
			fg_free(&g);
			return RBP_ENOMEM;
		}
		free(rows);
	}
	if ((err = fg_thread_counts(&g)) == RBP_OK && (err = fg_sort(&g)) == RBP_OK) {
		fg_layout(&g);
		for (size_t i = 1; g.diff && i < g.n_order; i++) {   /* the colour scale */
			double c = fg_change(&g, g.order[i]);
			if (fg_shown(&g, g.order[i]) && (c < 0 ? -c : c) > g.scale)
				g.scale = c < 0 ? -c : c;
		}
		if (g.tc && !(g.emit = malloc((p->n_nodes + 1) * sizeof(*g.emit))))
			err = RBP_ENOMEM;
		for (size_t i = 0; g.emit && i < g.n_order; i++)
			g.emit[g.order[i]] = (uint32_t)i;
		if (!err)
			err = fg_emit(&g, o, out);
	}
	fg_free(&g);
	return err;
}
