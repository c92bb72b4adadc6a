/*
 * summary.c - "% self  % total  function  file:line" tables.
 *
 * summary: one row per function (label + file), at its first line; one
 * per C function (its frames carry their callers' files).
 * summary-by-line: one row per (function, line).
 * % self counts samples whose innermost frame is the row; % total counts
 * samples with the row anywhere in the stack, once per sample even under
 * recursion.  Rows are sorted by self, then total, then name, then place.
 * The row building and counting (rbp_rows_*) are shared with `rbpeek top`.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "profile/diff.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/text.h"

static int cmp_row(const void *a, const void *b)
{
	const struct rbp_row *x = a, *y = b;
	int c;

	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	if ((c = strcmp(x->label, y->label)) || (c = strcmp(x->path, y->path)))
		return c;
	return (x->line > y->line) - (x->line < y->line);
}

/*
 * A C function's frames carry their callers' file and line, so
 * rbp_functions() makes one function per calling file: one row per C
 * function instead (Kernel#sleep once, "-" for its place).  Rows stay in
 * order of first appearance; row_of is renumbered.
 */
static int merge_cfuncs(const struct rbp_profile *p, uint32_t *row_of, struct rbp_row *rows,
			size_t *n_rows)
{
	size_t n = *n_rows, kept = 0;
	uint32_t *to = malloc((n + 1) * sizeof(*to));
	struct rbp_hmap seen = { 0 };   /* label pointer (interned) -> kept row */
	int err = to ? RBP_OK : RBP_ENOMEM;
	uint64_t k;

	for (size_t i = 0; i < n && !err; i++) {
		uint64_t key = rbp_mix64((uintptr_t)rows[i].label, 0x63667563);
		if (rows[i].kind == RBP_PFRAME_CFUNC && rbp_hmap_get(&seen, key, &k)) {
			to[i] = (uint32_t)k;
			continue;
		}
		if (rows[i].kind == RBP_PFRAME_CFUNC) {
			rows[i].path = "";
			rows[i].line = 0;
			err = rbp_hmap_put(&seen, key, kept);
		}
		to[i] = (uint32_t)kept;
		rows[kept++] = rows[i];
	}
	for (size_t f = 0; f < p->n_frames && !err; f++)
		row_of[f] = to[row_of[f]];
	rbp_hmap_clear(&seen);
	free(to);
	if (!err)
		*n_rows = kept;
	return err;
}

int rbp_rows_make(const struct rbp_profile *p, int by_line, uint32_t *row_of,
		  struct rbp_row **rows_out, size_t *n_rows)
{
	struct rbp_function *funcs = NULL;
	struct rbp_row *rows;
	size_t n = p->n_frames;

	if (!by_line && rbp_functions(p, row_of, &funcs, &n))
		return RBP_ENOMEM;
	if ((rows = calloc(n + 1, sizeof(*rows)))) {
		for (size_t i = 0; i < n; i++) {
			const struct rbp_pframe *f = &p->frames[by_line ? i : funcs[i].rep];
			if (by_line) {
				rows[i] = (struct rbp_row){ f->label, f->path, f->line, f->kind, 0, 0, 0 };
				row_of[i] = (uint32_t)i;
			} else {
				rows[i] = (struct rbp_row){ funcs[i].label, funcs[i].path, funcs[i].line,
							    f->kind, 0, 0, 0 };
			}
		}
		*n_rows = n;
	}
	free(funcs);
	if (rows && !by_line && merge_cfuncs(p, row_of, rows, n_rows)) {
		free(rows);
		rows = NULL;
	}
	*rows_out = rows;
	return rows ? RBP_OK : RBP_ENOMEM;
}

void rbp_rows_count(const struct rbp_profile *p, const uint64_t *node_count,
		    const uint32_t *row_of, struct rbp_row *rows, size_t n_rows)
{
	for (size_t i = 0; i < n_rows; i++)
		rows[i].stamp = UINT32_MAX;
	for (uint32_t node = 1; node < p->n_nodes; node++) {
		uint64_t c = node_count[node];
		if (!c)
			continue;
		rows[row_of[p->nodes[node].frame]].self += c;
		for (uint32_t n = node; n; n = p->nodes[n].parent) {
			struct rbp_row *r = &rows[row_of[p->nodes[n].frame]];
			if (r->stamp != node) {
				r->stamp = node;
				r->total += c;
			}
		}
	}
}

/* Characters (not bytes) in a UTF-8 string: what a terminal column counts. */
static size_t text_width(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The width of s as written, control characters escaped (util/text.h). */
static size_t shown_width(const char *s)
{
	char buf[512];
	const char *t = rbp_text_safe(s, buf, sizeof(buf));
	size_t w = t ? text_width(t) : text_width(s);

	if (t && t != s && t != buf)
		free((char *)t);
	return w;
}

/* s, control characters escaped, padded with spaces to width characters. */
static void put_padded(FILE *out, const char *s, size_t width)
{
	rbp_text_put(out, s);
	for (size_t w = shown_width(s); w < width; w++)
		putc(' ', out);
}

static int write_table(const struct rbp_profile *p, FILE *out, int by_line)
{
	uint64_t *node_count = calloc(p->n_nodes, sizeof(*node_count));
	uint32_t *row_of = calloc(p->n_frames + 1, sizeof(*row_of));
	struct rbp_row *rows = NULL;
	size_t n = 0, width = 8;
	int err = RBP_ENOMEM;

	if (!node_count || !row_of || rbp_rows_make(p, by_line, row_of, &rows, &n))
		goto done;
	for (size_t i = 0; i < p->n_samples; i++)
		node_count[p->samples[i].node]++;
	rbp_rows_count(p, node_count, row_of, rows, n);
	qsort(rows, n, sizeof(*rows), cmp_row);
	for (size_t i = 0; i < n; i++)
		if (shown_width(rows[i].label) > width)
			width = shown_width(rows[i].label);
	if (width > 60)
		width = 60;
	double total = p->n_samples ? (double)p->n_samples : 1;
	fprintf(out, "rbpeek %s: pid %d (ruby ", by_line ? "summary by line" : "summary",
		(int)p->meta.pid);
	rbp_text_put(out, p->meta.ruby_version);
	fprintf(out, "), %.1f s at %u Hz, %zu %ssamples, %zu threads\n\n",
		(double)p->meta.duration_ns / 1e9, p->meta.rate_hz, p->n_samples,
		p->meta.on_cpu ? "on-CPU " : "", p->n_threads);
	fputs(" % self  % total  ", out);
	put_padded(out, "function", width);
	fputs("  file:line\n", out);
	for (size_t i = 0; i < n; i++) {
		const struct rbp_row *r = &rows[i];
		if (!r->total)
			continue;
		fprintf(out, "%6.2f  %7.2f  ", 100.0 * (double)r->self / total,
			100.0 * (double)r->total / total);
		put_padded(out, r->label, width);
		fputs("  ", out);
		if (r->path[0]) {
			rbp_text_put(out, r->path);
			fprintf(out, ":%d\n", (int)r->line);
		}
		else
			fputs("-\n", out);
	}
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	free(node_count);
	free(row_of);
	free(rows);
	return err;
}

/* A row of the diff table: the function's shares in both recordings. */
struct diff_row {
	const struct rbp_row *row;
	double self[2], total[2];   /* [0] BASE, [1] NEW: fractions of each recording's samples */
};

static double abs_d(double v)
{
	return v < 0 ? -v : v;
}

static int cmp_diff_row(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;
	double dx = abs_d(x->total[1] - x->total[0]), dy = abs_d(y->total[1] - y->total[0]);
	int c;

	if (dx != dy)
		return dx < dy ? 1 : -1;
	dx = abs_d(x->self[1] - x->self[0]);
	dy = abs_d(y->self[1] - y->self[0]);
	if (dx != dy)
		return dx < dy ? 1 : -1;
	if ((c = strcmp(x->row->label, y->row->label)) || (c = strcmp(x->row->path, y->row->path)))
		return c;
	return (x->row->line > y->row->line) - (x->row->line < y->row->line);
}

/*
 * The largest changes between two recordings (a diff profile): each
 * function's % total and % self in BASE and in NEW (of each one's own
 * samples), the change in points and the ratio of the shares, sorted by the
 * change of % total, largest first; "new" and "gone" for functions in one
 * recording only.
 */
static int write_diff_table(const struct rbp_profile *p, FILE *out)
{
	uint64_t *cnt = calloc(p->n_nodes + 1, sizeof(*cnt)), n_new, n_base;
	uint32_t *row_of = calloc(p->n_frames + 1, sizeof(*row_of));
	struct rbp_row *rows[2] = { NULL, NULL };
	struct diff_row *d = NULL;
	size_t n = 0, width = 8;
	int err = RBP_ENOMEM;

	rbp_diff_totals(p, &n_new, &n_base);
	if (!cnt || !row_of || rbp_rows_make(p, 0, row_of, &rows[0], &n) ||
	    !(rows[1] = malloc((n + 1) * sizeof(*rows[1]))) || !(d = calloc(n + 1, sizeof(*d))))
		goto done;
	memcpy(rows[1], rows[0], n * sizeof(*rows[1]));
	for (int k = 0; k < 2; k++) {   /* k 0: BASE's samples, 1: NEW's */
		memset(cnt, 0, p->n_nodes * sizeof(*cnt));
		for (size_t i = 0; i < p->n_samples; i++)
			if (p->samples[i].node < p->n_nodes && ((p->sample_flags[i] & RBP_SAMPLE_BASE) == 0) == k)
				cnt[p->samples[i].node]++;
		rbp_rows_count(p, cnt, row_of, rows[k], n);
	}
	double tot[2] = { n_base ? (double)n_base : 1, n_new ? (double)n_new : 1 };
	for (size_t i = 0; i < n; i++) {
		d[i].row = &rows[1][i];
		for (int k = 0; k < 2; k++) {
			d[i].self[k] = (double)rows[k][i].self / tot[k];
			d[i].total[k] = (double)rows[k][i].total / tot[k];
		}
		if (text_width(rows[1][i].label) > width)
			width = text_width(rows[1][i].label);
	}
	if (width > 60)
		width = 60;
	qsort(d, n, sizeof(*d), cmp_diff_row);
	fprintf(out, "rbpeek diff: NEW pid %d (ruby %s), %.1f s, %llu samples against BASE, %llu "
		"samples;\nshares of each recording's own samples, largest change of %% total first\n\n",
		(int)p->meta.pid, p->meta.ruby_version, (double)p->meta.duration_ns / 1e9,
		(unsigned long long)n_new, (unsigned long long)n_base);
	fputs("  % total          change    ratio   % self           ", out);
	put_padded(out, "function", width);
	fputs("  file:line\n", out);
	fputs("   BASE     NEW    points             BASE     NEW\n", out);
	for (size_t i = 0; i < n; i++) {
		const struct diff_row *r = &d[i];
		char ratio[16];
		if (!r->total[0] && !r->total[1])
			continue;
		if (!r->total[0])
			snprintf(ratio, sizeof(ratio), "new");
		else if (!r->total[1])
			snprintf(ratio, sizeof(ratio), "gone");
		else
			snprintf(ratio, sizeof(ratio), "x%.2f", r->total[1] / r->total[0]);
		fprintf(out, "%7.2f %7.2f  %+8.2f  %7s  %7.2f %7.2f  ", 100 * r->total[0], 100 * r->total[1],
			100 * (r->total[1] - r->total[0]), ratio, 100 * r->self[0], 100 * r->self[1]);
		put_padded(out, r->row->label, width);
		fputs("  ", out);
		if (r->row->path[0])
			fprintf(out, "%s:%d\n", r->row->path, (int)r->row->line);
		else
			fputs("-\n", out);
	}
	err = ferror(out) ? RBP_EIO : RBP_OK;
done:
	free(cnt);
	free(row_of);
	free(rows[0]);
	free(rows[1]);
	free(d);
	return err;
}

int rbp_write_summary(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	if (o && o->diff)
		return write_diff_table(p, out);
	return write_table(p, out, 0);
}

int rbp_write_summary_by_line(const struct rbp_profile *p, const struct rbp_output_opts *o,
			      FILE *out)
{
	return write_table(p, out, 1);
}
