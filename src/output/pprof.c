/*
 * pprof.c - pprof's profile.proto, gzip-compressed (go tool pprof,
 * pprof.me, Grafana Pyroscope, Polar Signals...).
 *
 *   sample_type     [samples/count, wall/nanoseconds]; period_type
 *                   wall/nanoseconds, period = 1e9 / rate; "cpu" instead
 *                   of "wall" for an on-CPU recording (meta.on_cpu)
 *   sample          one per distinct (thread, stack): location ids
 *                   innermost first, values [n, n * period], labels
 *                   thread_id (num), thread_name (str, when known), pid (num)
 *   location        one per frame (id = frame id + 1), one Line each
 *   function        one per (label, file): name = label, filename = file,
 *                   start_line = the function's first line; system_name is
 *                   left empty (Ruby has no mangled names), which also stops
 *                   pprof from "demangling" labels: it would take "<main>"
 *                   or "block (2 levels) in <main>" for C++ and cut them
 *   mapping         one, for the Ruby process, flagged as fully symbolized
 *   comment         exporter, Ruby version, command line
 *   a diff (o->diff, profile/diff.h): NEW's samples scaled to BASE's total
 *                   (n * base / new, rounded), BASE's negated and labelled
 *                   pprof::base=true, as `go tool pprof -normalize
 *                   -diff_base BASE NEW` makes them: it reads the file as
 *                   that diff (the values are changes in BASE's samples)
 *   time_nanos / duration_nanos from the recording
 * Everything is written in a stable order: functions sorted by label then
 * file, samples by thread (pid, tid) then stack id, strings in first use.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "profile/diff.h"
#include "util/err.h"
#include "util/gz.h"
#include "util/strtab.h"
#include "util/vec.h"
#include "util/pb.h"

#ifndef RBP_VERSION
#define RBP_VERSION "0.1.0"
#endif

/* profile.proto field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	VALUETYPE_TYPE = 1, VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
	LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
	MAPPING_ID = 1, MAPPING_FILENAME = 5, MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8, MAPPING_HAS_LINE_NUMBERS = 9,
	LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1, LINE_LINE = 2,
	FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};

/* ---- functions, threads, samples ---------------------------------------- */

struct func {
	const char *label, *path;
	int32_t start_line;
	uint32_t id;   /* 1-based, in output order */
};

struct agg {
	uint32_t thread, node;
	uint64_t count;
	int base;   /* of a diff's BASE recording */
};

static const struct func *sort_funcs;
static const uint32_t *sort_thread_rank;

static int cmp_func(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	int r;

	if ((r = strcmp(sort_funcs[i].label, sort_funcs[j].label)) ||
	    (r = strcmp(sort_funcs[i].path, sort_funcs[j].path)))
		return r;
	return (i > j) - (i < j);
}

static int cmp_agg(const void *a, const void *b)
{
	const struct agg *x = a, *y = b;
	uint32_t rx = sort_thread_rank[x->thread], ry = sort_thread_rank[y->thread];

	if (rx != ry)
		return rx < ry ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->base - y->base;
}

/* The shared function grouping (output.h), as pprof Functions. */
static int functions(const struct rbp_profile *p, struct func *funcs, uint32_t *func_of,
		     size_t *n_out)
{
	struct rbp_function *fs;
	int err = rbp_functions(p, func_of, &fs, n_out);

	if (err)
		return err;
	for (size_t i = 0; i < *n_out; i++)
		funcs[i] = (struct func){ fs[i].label, fs[i].path, fs[i].first_line, 0 };
	free(fs);
	return RBP_OK;
}

/* Distinct (thread, node) pairs with their sample counts. */
static int aggregate(const struct rbp_profile *p, struct agg **out, size_t *n_out)
{
	struct rbp_hmap index = { 0 };
	struct agg *v = NULL;
	size_t n = 0, cap = 0;
	uint32_t last_thread = UINT32_MAX, last_node = UINT32_MAX;
	uint64_t last = 0;
	int err = RBP_OK;

	for (size_t i = 0; i < p->n_samples && !err; i++) {
		const struct rbp_sample *s = &p->samples[i];
		int base = p->sample_flags && (p->sample_flags[i] & RBP_SAMPLE_BASE);
		uint64_t key, idx;
		if (s->thread == last_thread && s->node == last_node && v[last].base == base) {
			v[last].count++;
			continue;
		}
		key = rbp_mix64(s->thread + 1ull, s->node * 2ull + (uint64_t)base);
		while (rbp_hmap_get(&index, key, &idx) &&
		       (v[idx].thread != s->thread || v[idx].node != s->node || v[idx].base != base))
			key = rbp_mix64(key, 1);
		if (!rbp_hmap_get(&index, key, &idx)) {
			if ((err = rbp_grow(&v, &cap, n + 1, sizeof(*v))))
				break;
			v[n] = (struct agg){ s->thread, s->node, 0, base };
			idx = n++;
			err = rbp_hmap_put(&index, key, idx);
		}
		v[idx].count++;
		last = idx;
		last_thread = s->thread;
		last_node = s->node;
	}
	rbp_hmap_clear(&index);
	if (err) {
		free(v);
		return err;
	}
	*out = v;
	*n_out = n;
	return RBP_OK;
}

static void value_type(struct rbp_gz *g, struct rbp_pb *m, uint32_t field, uint64_t type,
		       uint64_t unit)
{
	rbp_pb_reset(m);
	rbp_pb_uint(m, VALUETYPE_TYPE, type);
	rbp_pb_uint(m, VALUETYPE_UNIT, unit);
	rbp_pb_gz_message(g, field, m);
}

int rbp_write_pprof(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	size_t nf = p->n_frames, nt = p->n_threads, n_funcs = 0, n_agg = 0, max_depth = 0;
	struct func *funcs = calloc(nf + 1, sizeof(*funcs));
	uint32_t *func_of = calloc(nf + 1, sizeof(*func_of));
	uint32_t *forder = calloc(nf + 1, sizeof(*forder));
	struct rbp_thread_ord *tord = rbp_thread_order(p);
	uint32_t *trank = calloc(nt + 1, sizeof(*trank));
	uint64_t *thread_name = calloc(nt + 1, sizeof(*thread_name));
	uint64_t *locs = NULL, comments[4];
	struct agg *agg = NULL;
	struct rbp_strtab st = { 0 };
	struct rbp_pb m = { 0 }, sub = { 0 };
	struct rbp_gz g;
	char ver[300], who[1200];   /* live as long as st: it keeps pointers */
	int err = RBP_ENOMEM, gz_open = 0;

	if (!funcs || !func_of || !forder || !tord || !trank || !thread_name)
		goto done;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->nodes[i].depth > max_depth)
			max_depth = p->nodes[i].depth;
	if (!(locs = malloc((max_depth + 1) * sizeof(*locs))))
		goto done;
	if ((err = functions(p, funcs, func_of, &n_funcs)) || (err = aggregate(p, &agg, &n_agg)))
		goto done;
	err = RBP_ENOMEM;

	for (uint32_t i = 0; i < n_funcs; i++)
		forder[i] = i;
	sort_funcs = funcs;
	qsort(forder, n_funcs, sizeof(*forder), cmp_func);
	for (uint32_t i = 0; i < n_funcs; i++)
		funcs[forder[i]].id = i + 1;
	for (uint32_t i = 0; i < nt; i++)
		trank[tord[i].idx] = i;
	sort_thread_rank = trank;
	if (n_agg)
		qsort(agg, n_agg, sizeof(*agg), cmp_agg);

	/* strings, in a fixed order of first use */
	rbp_strtab_id(&st, "");
	uint64_t s_samples = rbp_strtab_id(&st, "samples"), s_count = rbp_strtab_id(&st, "count");
	/* an on-CPU recording's time is CPU time: pprof's (and Pyroscope's) "cpu" */
	uint64_t s_wall = rbp_strtab_id(&st, p->meta.on_cpu ? "cpu" : "wall");
	uint64_t s_ns = rbp_strtab_id(&st, "nanoseconds");
	uint64_t s_tid = rbp_strtab_id(&st, "thread_id"), s_tname = rbp_strtab_id(&st, "thread_name");
	uint64_t s_pid = rbp_strtab_id(&st, "pid");
	int diff = o && o->diff;
	uint64_t n_new = 0, n_base = 0;
	uint64_t s_base = diff ? rbp_strtab_id(&st, "pprof::base") : 0;
	uint64_t s_true = diff ? rbp_strtab_id(&st, "true") : 0;
	if (diff)
		rbp_diff_totals(p, &n_new, &n_base);
	uint64_t s_map = rbp_strtab_id(&st, p->meta.cmdline[0] ? p->meta.cmdline : "ruby");
	for (size_t i = 0; i < nt; i++)
		thread_name[tord[i].idx] = rbp_strtab_id(&st, p->threads[tord[i].idx].name);
	uint64_t *fname = calloc(2 * n_funcs + 1, sizeof(*fname));
	if (!fname)
		goto done;
	for (size_t i = 0; i < n_funcs; i++) {
		fname[2 * forder[i]] = rbp_strtab_id(&st, funcs[forder[i]].label);
		fname[2 * forder[i] + 1] = rbp_strtab_id(&st, funcs[forder[i]].path);
	}
	comments[0] = rbp_strtab_id(&st, "rbpeek " RBP_VERSION);
	snprintf(ver, sizeof(ver), "ruby %s", p->meta.ruby_version[0] ? p->meta.ruby_version : "unknown");
	comments[1] = rbp_strtab_id(&st, ver);
	snprintf(who, sizeof(who), "pid %d%s%s", (int)p->meta.pid, p->meta.cmdline[0] ? ": " : "",
		 p->meta.cmdline);
	comments[2] = rbp_strtab_id(&st, who);
	comments[3] = rbp_strtab_id(&st, o && o->title ? o->title : "");
	if (st.err) {
		free(fname);
		goto done;
	}

	if ((err = rbp_gz_open(&g, out))) {
		free(fname);
		goto done;
	}
	gz_open = 1;
	uint64_t period = p->meta.rate_hz ? (1000000000ull + p->meta.rate_hz / 2) / p->meta.rate_hz : 0;

	value_type(&g, &m, PROFILE_SAMPLE_TYPE, s_samples, s_count);
	value_type(&g, &m, PROFILE_SAMPLE_TYPE, s_wall, s_ns);

	for (size_t i = 0; i < n_agg; i++) {
		const struct agg *a = &agg[i];
		const struct rbp_pthread *t = &p->threads[a->thread];
		size_t d = 0;
		for (uint32_t n = a->node; n; n = p->nodes[n].parent)
			locs[d++] = p->nodes[n].frame + 1ull;   /* innermost first */
		uint64_t values[2] = { a->count, a->count * period };
		if (diff) {   /* BASE negative, NEW scaled to BASE's total (pprof -normalize) */
			int64_t v = a->base ? -(int64_t)a->count :
				(int64_t)((double)a->count * (double)n_base / (double)(n_new ? n_new : 1) + 0.5);
			values[0] = (uint64_t)v;
			values[1] = (uint64_t)(v * (int64_t)period);
		}
		rbp_pb_reset(&m);
		rbp_pb_packed(&m, SAMPLE_LOCATION_ID, locs, d);
		rbp_pb_packed(&m, SAMPLE_VALUE, values, 2);
		rbp_pb_reset(&sub);
		rbp_pb_uint(&sub, LABEL_KEY, s_tid);
		rbp_pb_int(&sub, LABEL_NUM, t->tid);
		rbp_pb_bytes(&m, SAMPLE_LABEL, sub.b, sub.n);
		if (t->name[0]) {
			rbp_pb_reset(&sub);
			rbp_pb_uint(&sub, LABEL_KEY, s_tname);
			rbp_pb_uint(&sub, LABEL_STR, thread_name[a->thread]);
			rbp_pb_bytes(&m, SAMPLE_LABEL, sub.b, sub.n);
		}
		rbp_pb_reset(&sub);
		rbp_pb_uint(&sub, LABEL_KEY, s_pid);
		rbp_pb_int(&sub, LABEL_NUM, t->pid);
		rbp_pb_bytes(&m, SAMPLE_LABEL, sub.b, sub.n);
		if (a->base) {   /* as go tool pprof -diff_base marks its base's samples */
			rbp_pb_reset(&sub);
			rbp_pb_uint(&sub, LABEL_KEY, s_base);
			rbp_pb_uint(&sub, LABEL_STR, s_true);
			rbp_pb_bytes(&m, SAMPLE_LABEL, sub.b, sub.n);
		}
		rbp_pb_gz_message(&g, PROFILE_SAMPLE, &m);
	}

	rbp_pb_reset(&m);
	rbp_pb_uint(&m, MAPPING_ID, 1);
	rbp_pb_uint(&m, MAPPING_FILENAME, s_map);
	rbp_pb_uint(&m, MAPPING_HAS_FUNCTIONS, 1);
	rbp_pb_uint(&m, MAPPING_HAS_FILENAMES, 1);
	rbp_pb_uint(&m, MAPPING_HAS_LINE_NUMBERS, 1);
	rbp_pb_gz_message(&g, PROFILE_MAPPING, &m);

	for (size_t i = 0; i < nf; i++) {
		rbp_pb_reset(&sub);
		rbp_pb_uint(&sub, LINE_FUNCTION_ID, funcs[func_of[i]].id);
		rbp_pb_int(&sub, LINE_LINE, p->frames[i].line);
		rbp_pb_reset(&m);
		rbp_pb_uint(&m, LOCATION_ID, i + 1);
		rbp_pb_uint(&m, LOCATION_MAPPING_ID, 1);
		rbp_pb_bytes(&m, LOCATION_LINE, sub.b, sub.n);
		rbp_pb_gz_message(&g, PROFILE_LOCATION, &m);
	}

	for (size_t i = 0; i < n_funcs; i++) {
		const struct func *f = &funcs[forder[i]];
		rbp_pb_reset(&m);
		rbp_pb_uint(&m, FUNCTION_ID, f->id);
		rbp_pb_uint(&m, FUNCTION_NAME, fname[2 * forder[i]]);
		rbp_pb_uint(&m, FUNCTION_FILENAME, fname[2 * forder[i] + 1]);
		rbp_pb_int(&m, FUNCTION_START_LINE, f->start_line);
		rbp_pb_gz_message(&g, PROFILE_FUNCTION, &m);
	}
	free(fname);

	for (size_t i = 0; i < st.n; i++) {
		size_t len = strlen(st.v[i]);
		rbp_gz_varint(&g, (uint64_t)PROFILE_STRING_TABLE << 3 | RBP_PB_LEN);
		rbp_gz_varint(&g, len);
		rbp_gz_write(&g, st.v[i], len);
	}

	rbp_pb_reset(&m);
	rbp_pb_uint(&m, PROFILE_TIME_NANOS, p->meta.start_unix_ns);
	rbp_pb_uint(&m, PROFILE_DURATION_NANOS, p->meta.duration_ns);
	rbp_gz_write(&g, m.b, m.n);
	value_type(&g, &m, PROFILE_PERIOD_TYPE, s_wall, s_ns);
	rbp_pb_reset(&m);
	rbp_pb_uint(&m, PROFILE_PERIOD, period);
	rbp_pb_packed(&m, PROFILE_COMMENT, comments, comments[3] ? 4 : 3);
	rbp_gz_write(&g, m.b, m.n);

	err = (m.oom || sub.oom) ? RBP_ENOMEM : RBP_OK;
	gz_open = 0;
	int cerr = rbp_gz_close(&g);
	if (!err)
		err = cerr;
	if (!err && ferror(out))
		err = RBP_EIO;
done:
	if (gz_open)
		rbp_gz_close(&g);
	rbp_strtab_free(&st);
	rbp_pb_free(&m);
	rbp_pb_free(&sub);
	free(funcs);
	free(func_of);
	free(forder);
	free(tord);
	free(trank);
	free(thread_name);
	free(locs);
	free(agg);
	return err;
}
