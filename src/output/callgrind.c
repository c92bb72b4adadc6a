/*
 * callgrind.c - the callgrind profile format (KCachegrind, QCachegrind,
 * callgrind_annotate, speedscope), one event: Samples.
 *
 * Functions are (label, file) as in the summary; positions are lines.
 * Readers (KCachegrind, callgrind_annotate) take a function's inclusive
 * cost from the calls INTO it when it has callers, else from its self cost
 * plus its calls out.  So that both are right under recursion:
 *   - self cost: a sample's innermost frame gets 1 at its line;
 *   - call cost: in each sample, every function on the stack gets 1 on the
 *     call into its OUTERMOST occurrence (calls=, at the caller's line), so
 *     the calls into a function add up to the samples it is on the stack in
 *     (a recursive call inside an outer activation is not counted again,
 *     and no function ever calls itself directly);
 *   - every thread has a synthetic root function "thread TID (name)" that
 *     calls the outermost frame of the thread's stacks (threads run code
 *     that is also called, e.g. a block), and holds samples with an empty
 *     stack as its self cost; with --threads or --subprocesses the
 *     profile's own thread/process root frames play that part.
 * Only root functions are never called; their self cost plus their calls
 * out are their samples.  calls=N counts samples, not calls (a sampler
 * cannot know), and targets the callee's first line.
 *
 * Functions are written sorted by file, then label; lines in increasing
 * order; calls by line, then callee.  File and function names are
 * compressed: "(id) name" the first time, "(id)" after.  Unknown files are
 * "???" as in valgrind's output.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/text.h"
#include "util/vec.h"

#ifndef RBP_VERSION
#define RBP_VERSION "0.1.0"
#endif

struct func {
	const char *label, *path;
	int32_t line;        /* first line, for calls= targets */
	uint32_t rank;       /* position in output order */
	uint32_t name_id;    /* compressed fn id, 0 not yet written */
	uint32_t file_id;    /* compressed fl id of path, shared by same path */
};

/* A cost line: self (callee == UINT32_MAX) or a call. */
struct cost {
	uint32_t func, callee;
	int32_t line;
	uint64_t count;
};

struct ctx {
	const struct rbp_profile *p;
	struct func *funcs;
	size_t n_funcs;
	uint32_t *func_of;
	struct cost *costs;
	size_t n_costs, cap_costs;
	struct rbp_hmap cost_index;
};

/* The shared function grouping (output.h), as callgrind functions. */
static int functions(struct ctx *c)
{
	struct rbp_function *fs;
	int err = rbp_functions(c->p, c->func_of, &fs, &c->n_funcs);

	if (err)
		return err;
	for (size_t i = 0; i < c->n_funcs; i++)
		c->funcs[i] = (struct func){ fs[i].label, fs[i].path, fs[i].line, 0, 0, 0 };
	free(fs);
	return RBP_OK;
}

static int add_cost(struct ctx *c, uint32_t func, int32_t line, uint32_t callee, uint64_t n)
{
	uint64_t key = rbp_mix64(rbp_mix64(func + 1ull, (uint32_t)line), callee), v;

	while (rbp_hmap_get(&c->cost_index, key, &v)) {
		struct cost *k = &c->costs[v];
		if (k->func == func && k->line == line && k->callee == callee) {
			k->count += n;
			return RBP_OK;
		}
		key = rbp_mix64(key, 1);
	}
	if (rbp_grow(&c->costs, &c->cap_costs, c->n_costs + 1, sizeof(*c->costs)))
		return RBP_ENOMEM;
	c->costs[c->n_costs] = (struct cost){ func, callee, line, n };
	return rbp_hmap_put(&c->cost_index, key, c->n_costs++);
}

static const struct func *sort_funcs;

static int cmp_func(const void *a, const void *b)
{
	const struct func *x = &sort_funcs[*(const uint32_t *)a], *y = &sort_funcs[*(const uint32_t *)b];
	int r;

	if ((r = strcmp(x->path, y->path)) || (r = strcmp(x->label, y->label)))
		return r;
	return (*(const uint32_t *)a > *(const uint32_t *)b) - (*(const uint32_t *)a < *(const uint32_t *)b);
}

static const struct func *sort_costs_funcs;

static int cmp_cost(const void *a, const void *b)
{
	const struct cost *x = a, *y = b;
	uint32_t fx = sort_costs_funcs[x->func].rank, fy = sort_costs_funcs[y->func].rank;

	if (fx != fy)
		return fx < fy ? -1 : 1;
	/* self lines first, then calls */
	int cx = x->callee != UINT32_MAX, cy = y->callee != UINT32_MAX;
	if (cx != cy)
		return cx - cy;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (cx) {
		uint32_t rx = sort_costs_funcs[x->callee].rank, ry = sort_costs_funcs[y->callee].rank;
		if (rx != ry)
			return rx < ry ? -1 : 1;
	}
	return 0;
}

/* Names may not contain newlines (they end a line): control characters escaped. */
static void put_name(FILE *out, const char *s)
{
	rbp_text_put(out, s);
}

/* file_ids[f->file_id]: the compressed id of f's path, 0 before its first use */
static void put_file(FILE *out, const char *key, const struct func *f, uint32_t *next_file,
		     uint32_t *file_ids)
{
	uint32_t *id = &file_ids[f->file_id];
	if (*id) {
		fprintf(out, "%s(%u)\n", key, *id);
		return;
	}
	*id = ++*next_file;
	fprintf(out, "%s(%u) ", key, *id);
	put_name(out, f->path[0] ? f->path : "???");
	putc('\n', out);
}

static void put_func(FILE *out, const char *key, struct func *f, uint32_t *next_fn)
{
	if (f->name_id) {
		fprintf(out, "%s(%u)\n", key, f->name_id);
		return;
	}
	f->name_id = ++*next_fn;
	fprintf(out, "%s(%u) ", key, f->name_id);
	put_name(out, f->label);
	putc('\n', out);
}

/* "thread TID (name)", "pid PID thread TID (name)" for other processes. */
static char *thread_label(const struct rbp_profile *p, const struct rbp_pthread *t)
{
	char buf[1024];
	int n = 0;

	if (t->pid != p->meta.pid)
		n = snprintf(buf, sizeof(buf), "pid %d ", (int)t->pid);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	if (t->name[0])
		snprintf(buf + n, sizeof(buf) - (size_t)n, "thread %d (%s)", (int)t->tid, t->name);
	else
		snprintf(buf + n, sizeof(buf) - (size_t)n, "thread %d", (int)t->tid);
	return strdup(buf);
}

int rbp_write_callgrind(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	struct ctx c = { .p = p };
	size_t nt = p->n_threads, max_depth = 0;
	uint64_t *node_count = calloc(p->n_nodes, sizeof(*node_count));
	uint32_t *stamp = NULL, *order = NULL, *file_ids = NULL, *frames = NULL;
	uint32_t *root_frame = calloc(p->n_nodes, sizeof(*root_frame));
	uint32_t *thread_fn = malloc((nt + 1) * sizeof(*thread_fn));
	char **labels = calloc(nt + 1, sizeof(*labels));
	int err = RBP_ENOMEM;

	c.funcs = calloc(p->n_frames + nt + 1, sizeof(*c.funcs));
	c.func_of = calloc(p->n_frames + 1, sizeof(*c.func_of));
	if (!node_count || !root_frame || !thread_fn || !labels || !c.funcs || !c.func_of ||
	    !(stamp = calloc(p->n_frames + nt + 1, sizeof(*stamp))))
		goto done;
	if ((err = functions(&c)))
		goto done;
	err = RBP_ENOMEM;
	for (size_t i = 0; i < p->n_nodes; i++) {
		if (p->nodes[i].depth > max_depth)
			max_depth = p->nodes[i].depth;
		/* parents have smaller ids */
		root_frame[i] = p->nodes[i].parent ? root_frame[p->nodes[i].parent] : p->nodes[i].frame;
	}
	if (!(frames = malloc((max_depth + 1) * sizeof(*frames))))
		goto done;

	/*
	 * Per sample: a thread's synthetic root function calls the stack's
	 * outermost function (or holds the sample itself for an empty stack),
	 * unless that frame is already a thread or process root.  Runs of equal
	 * (thread, root) are added at once.
	 */
	for (size_t i = 0; i < nt; i++)
		thread_fn[i] = UINT32_MAX;
	uint32_t run_fn = UINT32_MAX, run_callee = UINT32_MAX;
	uint64_t run_n = 0;
	for (size_t i = 0; i <= p->n_samples; i++) {
		uint32_t fn = UINT32_MAX, callee = UINT32_MAX;
		if (i < p->n_samples) {
			const struct rbp_sample *s = &p->samples[i];
			uint8_t kind = s->node ? p->frames[root_frame[s->node]].kind : RBP_PFRAME_RUBY;
			node_count[s->node]++;
			if (kind == RBP_PFRAME_THREAD || kind == RBP_PFRAME_PROCESS)
				continue;
			if (thread_fn[s->thread] == UINT32_MAX) {
				if (!(labels[s->thread] = thread_label(p, &p->threads[s->thread])))
					goto done;
				thread_fn[s->thread] = (uint32_t)c.n_funcs;
				c.funcs[c.n_funcs++] = (struct func){ labels[s->thread], "", 0, 0, 0, 0 };
			}
			fn = thread_fn[s->thread];
			callee = s->node ? c.func_of[root_frame[s->node]] : UINT32_MAX;
			if (fn == run_fn && callee == run_callee) {
				run_n++;
				continue;
			}
		}
		if (run_n && (err = add_cost(&c, run_fn, 0, run_callee, run_n)))
			goto done;
		run_fn = fn;
		run_callee = callee;
		run_n = 1;
	}

	/*
	 * Per distinct stack, root first: the sample's leaf is self cost, and
	 * each function below the root gets the sample on the call into its
	 * outermost occurrence (stamp[] marks the functions already met in
	 * this stack, by node id).
	 */
	for (uint32_t node = 1; node < p->n_nodes; node++) {
		uint64_t n = node_count[node];
		if (!n)
			continue;
		size_t d = rbp_profile_stack(p, node, frames, max_depth);
		if ((err = add_cost(&c, c.func_of[frames[d - 1]], p->frames[frames[d - 1]].line,
				    UINT32_MAX, n)))
			goto done;
		stamp[c.func_of[frames[0]]] = node;
		for (size_t i = 1; i < d; i++) {
			uint32_t fn = c.func_of[frames[i]];
			if (stamp[fn] == node)
				continue;
			stamp[fn] = node;
			if ((err = add_cost(&c, c.func_of[frames[i - 1]], p->frames[frames[i - 1]].line,
					    fn, n)))
				goto done;
		}
	}
	err = RBP_ENOMEM;
	if (!(order = calloc(c.n_funcs + 1, sizeof(*order))) ||
	    !(file_ids = calloc(c.n_funcs + 1, sizeof(*file_ids))))
		goto done;

	/* output order and shared file ids */
	for (uint32_t i = 0; i < c.n_funcs; i++)
		order[i] = i;
	sort_funcs = c.funcs;
	qsort(order, c.n_funcs, sizeof(*order), cmp_func);
	for (uint32_t i = 0; i < c.n_funcs; i++) {
		struct func *f = &c.funcs[order[i]];
		f->rank = i;
		f->file_id = i && !strcmp(c.funcs[order[i - 1]].path, f->path) ?
			c.funcs[order[i - 1]].file_id : i;
	}
	sort_costs_funcs = c.funcs;
	if (c.n_costs)
		qsort(c.costs, c.n_costs, sizeof(*c.costs), cmp_cost);

	fputs("# callgrind format\nversion: 1\ncreator: rbpeek " RBP_VERSION "\n", out);
	fprintf(out, "pid: %d\ncmd: ", (int)p->meta.pid);
	put_name(out, p->meta.cmdline[0] ? p->meta.cmdline : "ruby");
	fputs("\npart: 1\n", out);
	if (o && o->title && o->title[0]) {
		fputs("desc: Title: ", out);
		put_name(out, o->title);
		putc('\n', out);
	}
	fputs("desc: Ruby: ", out);
	put_name(out, p->meta.ruby_version[0] ? p->meta.ruby_version : "unknown");
	fprintf(out, "\ndesc: Rate: %u Hz\ndesc: Duration: %.3f s\n", p->meta.rate_hz,
		(double)p->meta.duration_ns / 1e9);
	fprintf(out, "desc: Lines: %s\n", p->meta.by_function ? "first line of each function" :
		"sampled lines");
	if (p->meta.on_cpu)
		fputs("desc: Samples: on-CPU only (CPU time, not wall-clock time)\n", out);
	fprintf(out, "positions: line\nevents: Samples\nsummary: %zu\n", p->n_samples);

	uint32_t next_file = 0, next_fn = 0, cur_file = UINT32_MAX, cur_fn = UINT32_MAX;
	for (size_t i = 0; i < c.n_costs; i++) {
		const struct cost *k = &c.costs[i];
		struct func *f = &c.funcs[k->func];
		if (k->func != cur_fn) {
			putc('\n', out);
			if (f->file_id != cur_file) {
				put_file(out, "fl=", f, &next_file, file_ids);
				cur_file = f->file_id;
			}
			put_func(out, "fn=", f, &next_fn);
			cur_fn = k->func;
		}
		int32_t line = k->line < 0 ? 0 : k->line;
		if (k->callee != UINT32_MAX) {
			struct func *g = &c.funcs[k->callee];
			/* left out for the caller's own file, as readers then take fl= */
			if (g->file_id != f->file_id)
				put_file(out, "cfl=", g, &next_file, file_ids);
			put_func(out, "cfn=", g, &next_fn);
			fprintf(out, "calls=%llu %d\n", (unsigned long long)k->count,
				g->line < 0 ? 0 : (int)g->line);
		}
		fprintf(out, "%d %llu\n", (int)line, (unsigned long long)k->count);
	}
	fprintf(out, "\ntotals: %zu\n", p->n_samples);
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	rbp_hmap_clear(&c.cost_index);
	free(c.costs);
	free(c.funcs);
	free(c.func_of);
	free(node_count);
	free(stamp);
	free(order);
	free(file_ids);
	free(frames);
	free(root_frame);
	free(thread_fn);
	for (size_t i = 0; labels && i < nt; i++)
		free(labels[i]);
	free(labels);
	return err;
}
