/*
 * format.c - the table of output formats and helpers shared by writers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "output/output.h"
#include "util/err.h"
#include "util/hmap.h"

const struct rbp_format rbp_formats[] = {
	{ "flamegraph", "svg", "interactive flame graph (SVG, opens in any browser)", rbp_write_flamegraph },
	{ "collapsed", "txt", "folded stacks 'a;b;c count' (FlameGraph, inferno, speedscope)",
	  rbp_write_collapsed },
	{ "speedscope", "speedscope.json", "speedscope JSON, one profile per thread (speedscope.app)",
	  rbp_write_speedscope },
	{ "pprof", "pb.gz", "gzipped profile.proto (go tool pprof, pprof.me, Pyroscope)",
	  rbp_write_pprof },
	{ "callgrind", "callgrind.out", "callgrind profile (KCachegrind, callgrind_annotate)",
	  rbp_write_callgrind },
	{ "chrome", "trace.json", "per-thread timeline, Chrome trace events (Perfetto, chrome://tracing)",
	  rbp_write_chrome },
	{ "callgraph", "callgraph.svg", "call graph, one node per function (SVG laid out by Graphviz)",
	  rbp_write_callgraph },
	{ "dot", "dot", "the call graph as Graphviz DOT text (dot -Tsvg, xdot)", rbp_write_dot },
	{ "summary", "txt", "table of functions: % self, % total, file:line", rbp_write_summary },
	{ "summary-by-line", "txt", "the same table per line", rbp_write_summary_by_line },
	{ "raw", "raw.gz", "rbpeek's own raw profile (convert later with 'rbpeek report')",
	  rbp_write_raw },
	{ NULL, NULL, NULL, NULL },
};

const struct rbp_format *rbp_format_find(const char *name)
{
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		if (!strcmp(f->name, name))
			return f;
	return NULL;
}

const char *rbp_format_names(void)
{
	static char buf[512];
	size_t n = 0;

	buf[0] = 0;
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, "%s%s",
				      f == rbp_formats ? "" : ", ", f->name);
	return buf;
}

/*
 * File name endings and the formats they stand for, most specific first
 * (".speedscope.json" before ".json").  A space-separated list is an
 * ambiguous ending: the user must say which with -f.
 */
static const struct {
	const char *suffix;
	const char *formats;
} by_suffix[] = {
	{ ".callgraph.svg", "callgraph" },
	{ ".svg", "flamegraph" },
	{ ".dot", "dot" },
	{ ".gv", "dot" },
	{ ".speedscope.json", "speedscope" },
	{ ".trace.json", "chrome" },
	{ ".json", "speedscope chrome" },
	{ ".pb.gz", "pprof" },
	{ ".pprof", "pprof" },
	{ ".callgrind", "callgrind" },
	{ ".callgrind.out", "callgrind" },
	{ ".folded", "collapsed" },
	{ ".collapsed", "collapsed" },
	{ ".txt", "collapsed summary summary-by-line" },
	{ ".raw.gz", "raw" },
	{ ".gz", "pprof raw" },   /* gzip: one of the two gzipped formats, but which? */
};

const char *rbp_format_by_name(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n = strlen(path);

	base = base ? base + 1 : path;
	if (!strncmp(base, "callgrind.out", 13))   /* valgrind's own naming: callgrind.out.PID */
		return "callgrind";
	for (size_t i = 0; i < sizeof(by_suffix) / sizeof(by_suffix[0]); i++) {
		size_t k = strlen(by_suffix[i].suffix);
		/* PROF.SVG is an SVG too */
		if (n > k && !strcasecmp(path + n - k, by_suffix[i].suffix) && base < path + n - k)
			return by_suffix[i].formats;
	}
	return NULL;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct rbp_thread_ord *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

struct rbp_thread_ord *rbp_thread_order(const struct rbp_profile *p)
{
	struct rbp_thread_ord *ord = calloc(p->n_threads + 1, sizeof(*ord));

	if (!ord)
		return NULL;
	for (size_t i = 0; i < p->n_threads; i++)
		ord[i] = (struct rbp_thread_ord){ p->threads[i].pid, p->threads[i].tid, (uint32_t)i };
	qsort(ord, p->n_threads, sizeof(*ord), cmp_thread);
	return ord;
}

int rbp_functions(const struct rbp_profile *p, uint32_t *func_of, struct rbp_function **funcs,
		  size_t *n_out)
{
	struct rbp_hmap index = { 0 };
	struct rbp_function *v = calloc(p->n_frames + 1, sizeof(*v));
	size_t n = 0;
	int err = v ? RBP_OK : RBP_ENOMEM;

	for (uint32_t i = 0; i < p->n_frames && !err; i++) {
		const struct rbp_pframe *f = &p->frames[i];
		uint64_t key = rbp_mix64((uintptr_t)f->label, (uintptr_t)f->path), k;
		/* strings are interned: compare pointers; probe on past other functions */
		while (rbp_hmap_get(&index, key, &k) && (v[k].label != f->label || v[k].path != f->path))
			key = rbp_mix64(key, 1);
		if (rbp_hmap_get(&index, key, &k)) {
			func_of[i] = (uint32_t)k;
			if (f->first_line > 0 && (v[k].first_line <= 0 || f->first_line < v[k].first_line))
				v[k].first_line = v[k].line = f->first_line;
			continue;
		}
		v[n] = (struct rbp_function){ f->label, f->path, f->first_line > 0 ? f->first_line : 0,
					      f->first_line > 0 ? f->first_line : f->line, i };
		func_of[i] = (uint32_t)n;
		err = rbp_hmap_put(&index, key, n++);
	}
	rbp_hmap_clear(&index);
	if (err) {
		free(v);
		return err;
	}
	*funcs = v;
	*n_out = n;
	return RBP_OK;
}

int rbp_samples_by_thread(const struct rbp_profile *p, size_t **start_out, uint32_t **by_out)
{
	size_t nt = p->n_threads, *start = calloc(nt + 2, sizeof(*start));
	uint32_t *by = malloc((p->n_samples + 1) * sizeof(*by));

	if (!start || !by) {
		free(start);
		free(by);
		return RBP_ENOMEM;
	}
	for (size_t i = 0; i < p->n_samples; i++)
		start[p->samples[i].thread + 1]++;
	for (size_t i = 0; i < nt; i++)
		start[i + 1] += start[i];
	for (size_t i = 0; i < p->n_samples; i++)
		by[start[p->samples[i].thread]++] = (uint32_t)i;
	for (size_t i = nt; i > 0; i--)
		start[i] = start[i - 1];
	start[0] = 0;
	*start_out = start;
	*by_out = by;
	return RBP_OK;
}

int rbp_frame_name(const struct rbp_pframe *f, char *buf, size_t cap)
{
	int n;

	if (f->kind == RBP_PFRAME_THREAD || f->kind == RBP_PFRAME_PROCESS || !f->path[0])
		n = snprintf(buf, cap, "%s", f->label);
	else
		n = snprintf(buf, cap, "%s (%s:%d)", f->label, f->path, (int)f->line);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}
