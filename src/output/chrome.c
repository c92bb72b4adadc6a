/*
 * chrome.c - Chrome's Trace Event Format (chrome://tracing, Perfetto UI,
 * speedscope): a timeline of each thread rebuilt from its samples.
 *
 *   {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{...}}
 *
 * Events, in this order:
 *   - "M" metadata: process_name for each process (the command line of the
 *     recorded one, else "ruby"), thread_name for each
 *     thread (threads sorted by pid, then tid);
 *   - per thread, "X" (complete) events: a slice per function activation
 *     as far as the samples can tell.  Consecutive samples of a thread are
 *     compared by function (label + file) from the outermost frame in: the
 *     frames they share stay one slice, the first differing one and every
 *     frame below it end at the new sample's time and new slices begin.
 *     Slices still open after the thread's last sample end one sampling
 *     interval after it.  A change of line inside a function does not split
 *     its slice (args.line is the function's first line).
 * Timestamps are whole microseconds since the start of the recording (ts
 * and dur both rounded down from nanoseconds, so slices that end together
 * have equal ts + dur in floating point too: readers match ends by value).  X events are written when the slice ends, the
 * outermost of the slices ending together first, so readers that order
 * equal timestamps by file order (speedscope, Perfetto) nest them right.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/json.h"

#ifndef RBP_VERSION
#define RBP_VERSION "0.1.0"
#endif

static const char *category(uint8_t kind)
{
	switch (kind) {
	case RBP_PFRAME_CFUNC: return "cfunc";
	case RBP_PFRAME_THREAD: return "thread";
	case RBP_PFRAME_PROCESS: return "process";
	case RBP_PFRAME_GC: return "gc";
	case RBP_PFRAME_NATIVE: return "native";
	default: return "ruby";
	}
}

/* Decimal v into buf; returns its length. */
static size_t fmt_u64(char *buf, uint64_t v)
{
	char tmp[24], *e = tmp + sizeof(tmp), *s = e;

	do {
		*--s = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(buf, s, (size_t)(e - s));
	return (size_t)(e - s);
}

struct slice {
	uint32_t func;
	uint64_t start;
};

/* The X event of slice s ending at end_ns. */
static void put_slice(FILE *out, const char *thread_part, const char *const *func_json,
		      const struct slice *s, uint64_t end_ns)
{
	char buf[80];
	size_t n;

	fputs_unlocked(",\n{\"ph\":\"X\",", out);
	fputs_unlocked(thread_part, out);
	fputs_unlocked("\"ts\":", out);
	/* whole microseconds, so that ts + dur is exact in every reader's doubles */
	n = fmt_u64(buf, s->start / 1000);
	memcpy(buf + n, ",\"dur\":", 7);
	n += 7;
	n += fmt_u64(buf + n, end_ns / 1000 - s->start / 1000);
	buf[n++] = ',';
	fwrite_unlocked(buf, 1, n, out);
	fputs_unlocked(func_json[s->func], out);
}

int rbp_write_chrome(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	size_t nt = p->n_threads, nf = p->n_frames, n_funcs = 0, max_depth = 0;
	uint32_t *func_of = calloc(nf + 1, sizeof(*func_of));
	struct rbp_function *funcs = NULL;
	char **func_json = calloc(nf + 1, sizeof(*func_json));
	struct rbp_thread_ord *ord = rbp_thread_order(p);
	size_t *start = NULL;
	uint32_t *by_thread = NULL;
	struct slice *open = NULL;
	uint32_t *stack = NULL;
	char part[64], name[1024];
	int err = RBP_ENOMEM;

	if (!func_of || !func_json || !ord || rbp_samples_by_thread(p, &start, &by_thread))
		goto done;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->nodes[i].depth > max_depth)
			max_depth = p->nodes[i].depth;
	if (!(open = malloc((max_depth + 1) * sizeof(*open))) ||
	    !(stack = malloc((max_depth + 1) * sizeof(*stack))))
		goto done;
	if ((err = rbp_functions(p, func_of, &funcs, &n_funcs)))
		goto done;
	err = RBP_ENOMEM;
	/* "name":...,"cat":...,"args":{...}} of each function, rendered once */
	for (size_t i = 0; i < n_funcs; i++) {
		const struct rbp_pframe *f = &p->frames[funcs[i].rep];
		size_t len = 0;
		FILE *m = open_memstream(&func_json[i], &len);
		if (!m)
			goto done;
		fputs("\"name\":", m);
		rbp_json_string(m, f->label);
		fprintf(m, ",\"cat\":\"%s\",\"args\":{", category(f->kind));
		if (f->path[0] && f->kind != RBP_PFRAME_THREAD && f->kind != RBP_PFRAME_PROCESS) {
			fputs("\"file\":", m);
			rbp_json_string(m, f->path);
			fprintf(m, ",\"line\":%d", (int)funcs[i].line);
		}
		fputs("}}", m);
		if (fclose(m))
			goto done;
	}


	uint64_t interval = p->meta.rate_hz ? 1000000000ull / p->meta.rate_hz : 0;

	/* metadata: process names (each pid once), then thread names */
	fputs("{\"traceEvents\":[", out);
	int first = 1;
	for (size_t i = 0; i < nt; i++) {
		if (i && ord[i].pid == ord[i - 1].pid)
			continue;
		/* readers add the pid themselves */
		snprintf(name, sizeof(name), "%s",
			 ord[i].pid == p->meta.pid && p->meta.cmdline[0] ? p->meta.cmdline : "ruby");
		fprintf(out, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"process_name\",\"args\":{\"name\":",
			first ? "\n" : ",\n", (int)ord[i].pid, (int)ord[i].tid);
		rbp_json_string(out, name);
		fputs("}}", out);
		first = 0;
	}
	for (size_t i = 0; i < nt; i++) {
		const struct rbp_pthread *t = &p->threads[ord[i].idx];
		if (t->name[0])
			snprintf(name, sizeof(name), "%s", t->name);
		else
			snprintf(name, sizeof(name), "thread %d", (int)t->tid);
		fprintf(out, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":",
			first ? "\n" : ",\n", (int)t->pid, (int)t->tid);
		rbp_json_string(out, name);
		fputs("}}", out);
		first = 0;
	}
	if (first)   /* no threads: keep the array valid */
		fputs("\n{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"rbpeek\"}}", out);

	for (size_t ti = 0; ti < nt; ti++) {
		uint32_t t = ord[ti].idx;
		size_t lo = start[t], hi = start[t + 1], depth = 0;
		uint32_t prev_node = UINT32_MAX;
		uint64_t last = 0;

		snprintf(part, sizeof(part), "\"pid\":%d,\"tid\":%d,", (int)p->threads[t].pid,
			 (int)p->threads[t].tid);
		for (size_t k = lo; k < hi; k++) {
			const struct rbp_sample *s = &p->samples[by_thread[k]];
			uint64_t now = s->t_ns < last ? last : s->t_ns;   /* never backwards */
			last = now;
			if (s->node == prev_node)
				continue;
			prev_node = s->node;
			size_t d = p->nodes[s->node].depth, i = d, keep = 0;
			for (uint32_t n = s->node; n; n = p->nodes[n].parent)
				stack[--i] = func_of[p->nodes[n].frame];
			while (keep < d && keep < depth && open[keep].func == stack[keep])
				keep++;
			for (size_t j = keep; j < depth; j++)   /* outermost first */
				put_slice(out, part, (const char *const *)func_json, &open[j], now);
			for (size_t j = keep; j < d; j++)
				open[j] = (struct slice){ stack[j], now };
			depth = d;
		}
		for (size_t j = 0; j < depth; j++)
			put_slice(out, part, (const char *const *)func_json, &open[j], last + interval);
	}

	fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"exporter\":\"rbpeek " RBP_VERSION
	      "\",\"title\":", out);
	rbp_json_string(out, o && o->title ? o->title : "");
	fprintf(out, ",\"pid\":%d,\"ruby_version\":", (int)p->meta.pid);
	rbp_json_string(out, p->meta.ruby_version);
	fputs(",\"cmdline\":", out);
	rbp_json_string(out, p->meta.cmdline);
	fprintf(out, ",\"start_unix_ns\":%llu,\"duration_ns\":%llu,\"rate_hz\":%u,\"samples\":%zu,"
		"\"by_function\":%s,\"on_cpu\":%s}}\n",
		(unsigned long long)p->meta.start_unix_ns, (unsigned long long)p->meta.duration_ns,
		p->meta.rate_hz, p->n_samples, p->meta.by_function ? "true" : "false",
		p->meta.on_cpu ? "true" : "false");
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	if (func_json)
		for (size_t i = 0; i < nf; i++)
			free(func_json[i]);
	free(func_json);
	free(func_of);
	free(funcs);
	free(ord);
	free(start);
	free(by_thread);
	free(open);
	free(stack);
	return err;
}
