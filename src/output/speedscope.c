/*
 * speedscope.c - speedscope's JSON file format
 * (https://www.speedscope.app/file-format-schema.json).
 *
 *   - shared.frames: every interned frame, index = frame id, as
 *     {"name": label, "file": path, "line": line}; file and line are left
 *     out when the path is unknown (C functions, thread roots);
 *   - one "sampled" profile per thread, threads sorted by (pid, tid), named
 *     "thread TID (name)" ("pid PID thread TID (name)" for threads of other
 *     processes than the recorded one);
 *   - each sample is its stack of frame indices, outermost first, in time
 *     order; unit "seconds" with every weight the sampling interval 1/rate
 *     (unit "none" and weight 1 when the rate is unknown), startValue 0 and
 *     endValue the sum of the weights, so speedscope's time-ordered view
 *     lays the samples end to end;
 *   - activeProfileIndex: the busiest thread, the one speedscope opens on:
 *     the most samples working (holding the GVL or on a CPU), then the most
 *     not flagged waiting for work (RBP_SAMPLE_IDLE: a server's idle pool
 *     threads, kept with --idle), then the most samples.  A thread blocked
 *     all along in a wait that is not flagged (a master in
 *     IO#wait_readable) has as many samples as a worker, but no work.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/json.h"

#ifndef RBP_VERSION
#define RBP_VERSION "0.1.0"
#endif

/* Decimal digits of v at the end of buf[0..20); returns the first digit. */
static char *utoa_end(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

static void thread_name(const struct rbp_profile *p, const struct rbp_pthread *t, char *buf,
			size_t cap)
{
	int n = 0;

	if (t->pid != p->meta.pid)
		n = snprintf(buf, cap, "pid %d ", (int)t->pid);
	if (n < 0 || (size_t)n >= cap)
		n = 0;
	if (t->name[0])
		snprintf(buf + n, cap - (size_t)n, "thread %d (%s)", (int)t->tid, t->name);
	else
		snprintf(buf + n, cap - (size_t)n, "thread %d", (int)t->tid);
}

static void write_frames(const struct rbp_profile *p, FILE *out)
{
	fputs("\"shared\":{\"frames\":[", out);
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct rbp_pframe *f = &p->frames[i];
		fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
		rbp_json_string(out, f->label);
		if (f->path[0] && f->kind != RBP_PFRAME_THREAD && f->kind != RBP_PFRAME_PROCESS) {
			fputs(",\"file\":", out);
			rbp_json_string(out, f->path);
			fprintf(out, ",\"line\":%d", (int)f->line);
		}
		putc('}', out);
	}
	fputs("]},\n", out);
}

int rbp_write_speedscope(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	size_t nt = p->n_threads, max_depth = 0, line_cap = 0;
	struct rbp_thread_ord *ord = rbp_thread_order(p);
	size_t *start = NULL;
	uint32_t *by_thread = NULL;
	uint32_t *stack = NULL;
	char *line = NULL, weight[32], name[1024];
	int err = RBP_ENOMEM;

	if (!ord || rbp_samples_by_thread(p, &start, &by_thread))
		goto done;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->nodes[i].depth > max_depth)
			max_depth = p->nodes[i].depth;
	line_cap = 24 * (max_depth + 2);
	if (!(stack = malloc((max_depth + 1) * sizeof(*stack))) || !(line = malloc(line_cap)))
		goto done;



	double interval = p->meta.rate_hz ? 1.0 / p->meta.rate_hz : 1.0;
	const char *unit = p->meta.rate_hz ? "seconds" : "none";
	snprintf(weight, sizeof(weight), "%.9g", interval);

	size_t active = 0, n_profiles = 0;
	uint64_t best[3] = { 0, 0, 0 };
	for (size_t i = 0; i < nt; i++) {
		size_t lo = start[ord[i].idx], hi = start[ord[i].idx + 1];
		uint64_t work = 0, busy = 0;
		if (lo == hi)
			continue;
		for (size_t k = lo; k < hi; k++) {
			uint8_t fl = p->sample_flags ? p->sample_flags[by_thread[k]] : 0;
			work += (fl & (RBP_SAMPLE_GVL | RBP_SAMPLE_ONCPU)) != 0;
			busy += !(fl & RBP_SAMPLE_IDLE);
		}
		/* working samples first; then those not idle; the count of all breaks ties */
		if (work > best[0] || (work == best[0] && (busy > best[1] ||
		    (busy == best[1] && hi - lo > best[2])))) {
			best[0] = work;
			best[1] = busy;
			best[2] = hi - lo;
			active = n_profiles;
		}
		n_profiles++;
	}

	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", out);
	fputs("\"exporter\":\"rbpeek " RBP_VERSION "\",\n\"name\":", out);
	if (o && o->title && o->title[0]) {
		rbp_json_string(out, o->title);
	} else {
		snprintf(name, sizeof(name), "rbpeek: pid %d", (int)p->meta.pid);
		rbp_json_string(out, name);
	}
	fprintf(out, ",\n\"activeProfileIndex\":%zu,\n", active);
	write_frames(p, out);
	fputs("\"profiles\":[", out);

	n_profiles = 0;
	for (size_t ti = 0; ti < nt; ti++) {
		uint32_t t = ord[ti].idx;
		size_t lo = start[t], hi = start[t + 1], ll = 0;
		if (lo == hi)
			continue;
		thread_name(p, &p->threads[t], name, sizeof(name));
		fputs(n_profiles++ ? ",\n{\"type\":\"sampled\",\"name\":" :
				     "\n{\"type\":\"sampled\",\"name\":", out);
		rbp_json_string(out, name);
		fprintf(out, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%.9g,\n\"samples\":[",
			unit, interval * (double)(hi - lo));
		uint32_t prev_node = UINT32_MAX;
		for (size_t k = lo; k < hi; k++) {
			uint32_t node = p->samples[by_thread[k]].node;
			if (node != prev_node) {
				/* render "[a,b,c]" once per run of equal stacks */
				size_t d = 0;
				for (uint32_t n = node; n; n = p->nodes[n].parent)
					stack[d++] = p->nodes[n].frame;
				ll = 0;
				line[ll++] = '[';
				while (d) {
					char num[24], *s = utoa_end(num + sizeof(num), stack[--d]);
					size_t len = (size_t)(num + sizeof(num) - s);
					memcpy(line + ll, s, len);
					ll += len;
					line[ll++] = ',';
				}
				if (ll > 1)
					ll--;
				line[ll++] = ']';
				prev_node = node;
			}
			if (k > lo)
				fputs_unlocked(",\n", out);
			fwrite_unlocked(line, 1, ll, out);
		}
		fputs("],\n\"weights\":[", out);
		for (size_t k = lo; k < hi; k++) {
			if (k > lo)
				putc_unlocked(',', out);
			fputs_unlocked(weight, out);
		}
		fputs("]}", out);
	}
	fputs("]}\n", out);
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	free(ord);
	free(start);
	free(by_thread);
	free(stack);
	free(line);
	return err;
}
