/*
 * top_draw.c - the screen of `rbpeek top` (see cmd_top.c for the model): a
 * window of the profile's samples counted into rows (the same code as the
 * summary format), sorted by the view's column, drawn to the terminal's
 * size, or as plain text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/term.h"
#include "cli/top.h"
#include "output/output.h"
#include "util/err.h"
#include "util/text.h"

static const char *const col_names[TOP_N_COLS] = { "% self", "% total", "self time", "total time" };

/* ---- the table --------------------------------------------------------- */

struct table {
	struct rbp_row *win, *cum;   /* parallel rows: window counts, counts up to its end */
	size_t n;
	size_t *order;               /* rows to show, sorted */
	size_t n_order;
	uint64_t win_samples;        /* samples of the window counted in the rows */
	uint64_t win_all, gvl, oncpu;   /* every sample of the window, holding the GVL, on a CPU */
	uint64_t win_idle;           /* ... waiting for work (hidden or not) */
	size_t n_threads;            /* threads seen in the window */
};

static void table_free(struct table *t)
{
	free(t->win);
	free(t->cum);
	free(t->order);
}

static int sample_selected(const struct view *v, const struct rbp_sample *s)
{
	return v->thread < 0 || s->thread == (uint32_t)v->thread;
}

static uint64_t row_key(const struct table *t, size_t i, int col)
{
	switch (col) {
	case COL_SELF_PCT: return t->win[i].self;
	case COL_TOTAL_PCT: return t->win[i].total;
	case COL_SELF_TIME: return t->cum[i].self;
	default: return t->cum[i].total;
	}
}

static const struct table *sort_table;
static int sort_col;

/* By the sort column, then the others in column order, then name and place. */
static int cmp_order(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const struct rbp_row *rx = &sort_table->cum[x], *ry = &sort_table->cum[y];
	int c;

	for (int k = -1; k < TOP_N_COLS; k++) {
		uint64_t kx = row_key(sort_table, x, k < 0 ? sort_col : k);
		uint64_t ky = row_key(sort_table, y, k < 0 ? sort_col : k);
		if (kx != ky)
			return kx < ky ? 1 : -1;
	}
	if ((c = strcmp(rx->label, ry->label)) || (c = strcmp(rx->path, ry->path)))
		return c;
	return (rx->line > ry->line) - (rx->line < ry->line);
}

/* Count the window and everything before its end into rows; sort them. */
static int table_build(const struct rbp_profile *p, const struct view *v, struct table *t)
{
	uint64_t *wc = calloc(p->n_nodes + 1, sizeof(*wc)), *cc = calloc(p->n_nodes + 1, sizeof(*cc));
	uint32_t *row_of = calloc(p->n_frames + 1, sizeof(*row_of));
	uint8_t *seen = calloc(p->n_threads + 1, 1), *waiter = calloc(p->n_threads + 1, 1);
	int err = RBP_ENOMEM;

	memset(t, 0, sizeof(*t));
	if (!wc || !cc || !row_of || !seen || !waiter ||
	    rbp_rows_make(p, v->by_line, row_of, &t->win, &t->n) ||
	    rbp_profile_waiters(p, v->win_to, waiter))
		goto done;
	if (!(t->cum = malloc((t->n + 1) * sizeof(*t->cum))) ||
	    !(t->order = malloc((t->n + 1) * sizeof(*t->order))))
		goto done;
	memcpy(t->cum, t->win, t->n * sizeof(*t->cum));
	for (size_t i = 0; i < v->win_to && i < p->n_samples; i++) {
		const struct rbp_sample *s = &p->samples[i];
		uint8_t fl = p->sample_flags[i];
		if (!sample_selected(v, s))
			continue;
		/* waiting for work: a pool's or server's wait, or a thread that only waits */
		int idle = (fl & RBP_SAMPLE_IDLE) || waiter[s->thread];
		if (i >= v->win_from) {   /* the header's figures: every sample of the window */
			t->win_all++;
			t->win_idle += idle;
			t->gvl += !!(fl & RBP_SAMPLE_GVL);
			t->oncpu += !!(fl & RBP_SAMPLE_ONCPU);
			t->n_threads += !seen[s->thread];
			seen[s->thread] = 1;
		}
		if (idle && !v->show_idle)
			continue;
		cc[s->node]++;
		if (i < v->win_from)
			continue;
		wc[s->node]++;
		t->win_samples++;
	}
	rbp_rows_count(p, wc, row_of, t->win, t->n);
	rbp_rows_count(p, cc, row_of, t->cum, t->n);
	for (size_t i = 0; i < t->n; i++)
		if (t->cum[i].total && t->cum[i].kind != RBP_PFRAME_THREAD &&
		    t->cum[i].kind != RBP_PFRAME_PROCESS)   /* GC frames are rows too */
			t->order[t->n_order++] = i;
	sort_table = t;
	sort_col = v->sort;
	qsort(t->order, t->n_order, sizeof(*t->order), cmp_order);
	err = RBP_OK;
done:
	free(wc);
	free(cc);
	free(row_of);
	free(seen);
	free(waiter);
	return err;
}

/* ---- drawing ----------------------------------------------------------- */

/* Bytes of s that fit in width terminal columns (one per UTF-8 character). */
static size_t fit(const char *s, size_t width)
{
	size_t cols = 0, i = 0;

	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (cols++ == width)
			break;
	}
	return i;
}

static size_t text_cols(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* One screen line: cut at the width, erased to its end, CRLF (raw mode). */
static void put_line(FILE *f, const struct view *v, int cols, const char *s)
{
	char safe[4096];

	/* names from the target (version, command, thread) never reach the terminal raw */
	rbp_text_escape(safe, sizeof(safe), s);
	s = safe;
	if (v->tty) {
		fwrite(s, 1, fit(s, (size_t)cols), f);
		fputs("\033[K\r\n", f);
	} else {
		fputs(s, f);
		fputc('\n', f);
	}
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static void fmt_time(char *buf, size_t n, uint64_t samples, uint32_t rate)
{
	double s = (double)samples / (double)(rate ? rate : 100);
	if (s < 60)
		snprintf(buf, n, "%.2fs", s);
	else if (s < 3600)
		snprintf(buf, n, "%dm%04.1fs", (int)(s / 60), s - 60 * (int)(s / 60));
	else
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

static void thread_desc(const struct rbp_profile *p, const struct view *v, char *buf, size_t n)
{
	if (v->thread < 0 || (size_t)v->thread >= p->n_threads) {
		snprintf(buf, n, "all");
		return;
	}
	const struct rbp_pthread *th = &p->threads[v->thread];
	if (v->procs)
		snprintf(buf, n, "%d/%d%s%s%s", (int)th->pid, (int)th->tid, *th->name ? " (" : "",
			 th->name, *th->name ? ")" : "");
	else
		snprintf(buf, n, "%d%s%s%s", (int)th->tid, *th->name ? " (" : "", th->name,
			 *th->name ? ")" : "");
}

static void draw_header(FILE *f, const struct rbp_profile *p, const struct view *v,
			const struct table *t, int cols)
{
	char line[1024], thr[160];
	const struct top_opts *o = v->o;

	snprintf(line, sizeof(line), "rbpeek top: pid %d (ruby %s) %s%s%s", o->t.pid, v->version,
		 v->cmdline, v->procs ? "  [+ subprocesses]" : "", v->paused ? "  [paused]" : "");
	put_line(f, v, cols, line);
	if (v->procs)
		snprintf(thr, sizeof(thr), ", %zu processes", rbp_procset_count(v->procs));
	else
		thr[0] = 0;
	snprintf(line, sizeof(line), "%.1f s at %u Hz, %zu samples, %.1f%% errors, GVL %.0f%%, "
		 "on CPU %.0f%%, %zu threads%s", (double)v->elapsed_ns / 1e9, o->rate, v->win_to,
		 pct(v->errors, v->ticks), pct(t->gvl, t->win_all), pct(t->oncpu, t->win_all),
		 t->n_threads, thr);
	if (o->nonblocking)   /* running state is known only when read paused */
		snprintf(strstr(line, "on CPU"), sizeof(line) - (size_t)(strstr(line, "on CPU") - line),
			 "on CPU n/a, %zu threads%s", t->n_threads, thr);
	put_line(f, v, cols, line);
	snprintf(line, sizeof(line), v->show_idle
		 ? "idle: %.1f%% of the window's samples are threads waiting for work, shown (%s)"
		 : "idle: %.1f%% of the window's samples are threads waiting for work, hidden (%s)",
		 pct(t->win_idle, t->win_all), v->show_idle ? (v->tty ? "i hides them" : "--no-idle hides them")
						     : (v->tty ? "i shows them" : "--idle shows them"));
	put_line(f, v, cols, line);
	thread_desc(p, v, thr, sizeof(thr));
	snprintf(line, sizeof(line), "view: %s   sort: %s   thread: %s   (%% over the last %.1f s, "
		 "times since start)", v->by_line ? "by line" : "by function", col_names[v->sort], thr,
		 (double)v->win_ns / 1e9);
	put_line(f, v, cols, line);

	put_line(f, v, cols, "");
}

/* "  % self  % total  self time  total time  function  file:line", sort column marked. */
static const int col_widths[TOP_N_COLS] = { 6, 7, 9, 10 };

/* Below 80 columns the time columns give their room to names and places. */
static int shown_cols(int cols)
{
	return cols < 80 ? COL_SELF_TIME : TOP_N_COLS;
}

static void draw_columns(FILE *f, const struct view *v, int cols, size_t fn_width)
{
	char line[512];
	int n = 0;

	for (int c = 0; c < shown_cols(cols); c++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%*s%s", col_widths[c], col_names[c],
			      c == v->sort ? "* " : "  ");
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%-*s  file:line", (int)fn_width,
		      "function");
	if (v->tty) {
		fputs("\033[7m", f);
		fwrite(line, 1, fit(line, (size_t)cols), f);
		for (int i = (int)text_cols(line); i < cols; i++)
			fputc(' ', f);
		fputs("\033[0m\r\n", f);
	} else {
		put_line(f, v, cols, line);
	}
}

static void draw_row(FILE *f, const struct view *v, const struct table *t, size_t i, int cols,
		     size_t fn_width)
{
	const struct rbp_row *r = &t->cum[i];
	char line[2048], place[1040], label[1024], path[1024];
	size_t label_bytes;
	int n = 0;

	rbp_text_escape(label, sizeof(label), r->label);   /* laid out as shown */
	label_bytes = fit(label, fn_width);
	if (r->path[0] && rbp_text_escape(path, sizeof(path), r->path) < sizeof(path))
		snprintf(place, sizeof(place), "%s:%d", path, (int)r->line);
	else if (r->path[0])
		snprintf(place, sizeof(place), "%s:%d", r->path, (int)r->line);
	else
		snprintf(place, sizeof(place), "-");
	for (int c = 0; c < shown_cols(cols); c++) {
		char cell[32];
		if (c <= COL_TOTAL_PCT)
			snprintf(cell, sizeof(cell), "%.1f", pct(row_key(t, i, c), t->win_samples));
		else
			fmt_time(cell, sizeof(cell), row_key(t, i, c), v->o->rate);
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%*s  ", col_widths[c], cell);
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%.*s", (int)label_bytes, label);
	for (size_t w = text_cols(label); w < fn_width && n < (int)sizeof(line) - 1; w++)
		line[n++] = ' ';
	line[n] = 0;
	/* a path too long for what is left loses its start, not its line number */
	int room = cols - (int)text_cols(line) - 2;
	size_t plen = text_cols(place);
	const char *ps = place;
	if (v->tty && room > 8 && (int)plen > room) {
		ps = place + fit(place, plen - (size_t)room + 3);
		snprintf(line + n, sizeof(line) - (size_t)n, "  ...%s", ps);
	} else {
		snprintf(line + n, sizeof(line) - (size_t)n, "  %s", ps);
	}
	put_line(f, v, cols, line);
}

/* Draw one screen (tty) or one table (text) from the current window. */
int top_draw(const struct rbp_profile *p, struct view *v)
{
	struct table t;
	int rows = 1000000, cols = 100000, err;
	char *buf = NULL;
	size_t len = 0, fn_width = 8;

	if (v->tty)
		term_size(&rows, &cols);
	if ((err = table_build(p, v, &t)))
		return err;
	for (size_t k = 0; k < t.n_order; k++) {
		char shown[1024];   /* as draw_row writes it */
		rbp_text_escape(shown, sizeof(shown), t.cum[t.order[k]].label);
		if (text_cols(shown) > fn_width)
			fn_width = text_cols(shown);
	}
	size_t max_fn = cols >= 80 ? (size_t)(cols - 40) / 2 : cols > 40 ? (size_t)(cols - 17) / 2 : 12;
	if (fn_width > max_fn)
		fn_width = max_fn;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		table_free(&t);
		return RBP_ENOMEM;
	}
	if (v->tty)
		fputs("\033[H", f);
	draw_header(f, p, v, &t, cols);
	draw_columns(f, v, cols, fn_width);
	int body = v->tty ? rows - 8 : 25;   /* header 6, footer 1, and a spare line */
	for (size_t k = 0; k < t.n_order && (int)k < body; k++)
		draw_row(f, v, &t, t.order[k], cols, fn_width);
	if (v->tty) {
		fputs("\033[J", f);
		fprintf(f, "\033[%d;1H", rows);
		put_line(f, v, cols, "keys: < > sort  1-4 column  l line/function  t/T/a thread  "
			 "i idle  p pause  q quit");
	} else {
		fputc('\n', f);
	}
	fclose(f);
	table_free(&t);
	if (len && v->tty) {
		/* the last CRLF would scroll the screen: drop it */
		len -= 2;
	}
	fwrite(buf, 1, len, stdout);
	fflush(stdout);
	free(buf);
	return RBP_OK;
}
