/*
 * cmd_top.c - `rbpeek top`: a live table of where a process spends its time,
 * refreshed every --delay seconds, like top(1) for Ruby functions.
 *
 * The sampler runs as for `record`, into an ordinary profile; its progress
 * callback (every 50 ms) reads keys and, once per delay, closes a "window"
 * of the samples taken since the last one.  A screen is a pure function of
 * (profile, window, view): % self and % total count the window's samples,
 * self and total time every sample up to the window's end, so a key press
 * re-renders the same window sorted, grouped or filtered another way, and
 * pausing just stops closing windows (sampling goes on).  Rows come from
 * the same code as the summary format (rbp_rows_make/count), per function
 * or per line: the profile keeps lines, so both views are always there.
 *
 * With stdout or stdin not a terminal, top prints the table as plain text
 * every delay instead (for scripts and logs; -n stops after N tables).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/signals.h"
#include "cli/term.h"
#include "output/output.h"
#include "profile/procset.h"
#include "profile/profile.h"
#include "profile/bpfsampler.h"
#include "profile/sampler.h"
#include "proc/native.h"
#include "proc/target.h"
#include "ruby/vm.h"
#include "util/err.h"

static const char top_usage[] =
	"usage: rbpeek top --pid PID [options]\n"
	"\n"
	"A live view of the functions a Ruby process spends its time in, refreshed every\n"
	"second: % self and % total over the last interval, self and total time since start.\n"
	"\n"
	"  -p, --pid PID           the process to watch\n"
	"  -r, --rate HZ           samples per second (default 100)\n"
	"      --delay SECONDS     time between refreshes (default 1)\n"
	"  -d, --duration SECONDS  quit after this long\n"
	"  -n, --iterations N      quit after N refreshes\n"
	"      --subprocesses      also watch every Ruby process PID starts (workers)\n"
	"      --nonblocking       never pause the process (stacks may be torn)\n"
	"      --native            also unwind native stacks: C functions a C method calls\n"
	"                          get rows of their own (not with --nonblocking; with\n"
	"                          --subprocesses, in every process)\n"
	"      --sampler SAMPLER   ptrace (default) or bpf: the kernel copies the stack of a\n"
	"                          thread it interrupts on a CPU (on-CPU samples only, no\n"
	"                          pause; root; ptrace with a warning where eBPF is not allowed)\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n"
	"\n"
	"keys: < > (or arrows) change the sort column, 1-4 pick it; l per line / per function;\n"
	"t next thread, T previous, a all threads; p or space pause; q or Ctrl-C quit.\n"
	"When stdout is not a terminal the table is printed as text every refresh.\n";

enum { COL_SELF_PCT, COL_TOTAL_PCT, COL_SELF_TIME, COL_TOTAL_TIME, N_COLS };
static const char *const col_names[N_COLS] = { "% self", "% total", "self time", "total time" };

struct top_opts {
	int pid;
	uint32_t rate;
	double delay, duration;
	long iterations;
	int subprocesses;
	int nonblocking;
	int native;
	int bpf;                  /* --sampler=bpf */
	const char *force_version;
	const char *layout;       /* --layout, NULL when not given */
};

/* What is on screen and how to draw it. */
struct view {
	int tty;               /* full-screen mode (else plain text) */
	int sort;              /* COL_* */
	int by_line;           /* rows per line instead of per function */
	long thread;           /* index into p->threads, -1 for all */
	int paused;            /* keep showing the same window */
	int dirty;             /* redraw at the next callback */
	size_t win_from, win_to;      /* the window: samples [from, to) */
	uint64_t win_ns;              /* its length */
	uint64_t win_start_ns;        /* when it opened (sampler clock) */
	uint64_t ticks, errors;       /* sampler counts at its end */
	uint64_t elapsed_ns;
	long shown;            /* windows closed so far */
	const struct top_opts *o;
	const char *version, *cmdline;
	struct rbp_procset *procs;    /* --subprocesses, else NULL */
	int quit;
};

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (*end || !(v > 0) || v > 1e7)
		return -1;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct top_opts *o)
{
	enum { OPT_DELAY = 256, OPT_SUBPROC, OPT_NONBLOCK, OPT_FORCE, OPT_LAYOUT, OPT_NATIVE, OPT_SAMPLER };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "rate", required_argument, NULL, 'r' },
		{ "delay", required_argument, NULL, OPT_DELAY },
		{ "duration", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "subprocesses", no_argument, NULL, OPT_SUBPROC },
		{ "nonblocking", no_argument, NULL, OPT_NONBLOCK },
		{ "native", no_argument, NULL, OPT_NATIVE },
		{ "sampler", required_argument, NULL, OPT_SAMPLER },
		{ "force-version", required_argument, NULL, OPT_FORCE },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char *end;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:p:r:d:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!(o->pid = cli_parse_pid(optarg)))
				return cli_usage_error("top", "invalid PID '%s'", optarg);
			break;
		case 'r':
			if (!(o->rate = cli_parse_rate(optarg)))
				return cli_usage_error("top", "invalid rate '%s' (1 to 100000 Hz)", optarg);
			break;
		case OPT_DELAY:
			if (parse_seconds(optarg, &o->delay) || o->delay < 0.1)
				return cli_usage_error("top", "invalid delay '%s' (at least 0.1 s)", optarg);
			break;
		case 'd':
			if (parse_seconds(optarg, &o->duration))
				return cli_usage_error("top", "invalid duration '%s' (seconds)", optarg);
			break;
		case 'n':
			o->iterations = strtol(optarg, &end, 10);
			if (*end || o->iterations < 1)
				return cli_usage_error("top", "invalid iteration count '%s'", optarg);
			break;
		case OPT_SUBPROC: o->subprocesses = 1; break;
		case OPT_NONBLOCK: o->nonblocking = 1; break;
		case OPT_NATIVE: o->native = 1; break;
		case OPT_SAMPLER:
			if (cli_sampler_opt("top", optarg, &o->bpf))
				return EXIT_USAGE;
			break;
		case OPT_FORCE: o->force_version = optarg; break;
		case OPT_LAYOUT:
			if (cli_layout_opt("top", optarg, &o->layout))
				return EXIT_USAGE;
			break;
		case 'h': fputs(top_usage, stdout); exit(0);
		default:
			return cli_other_opt("top", c, argv, NULL);
		}
	}
	if (optind < argc)
		return cli_usage_error("top", "unexpected argument '%s'", argv[optind]);
	if (!o->pid)
		return cli_usage_error("top", "give --pid PID");
	if (o->native && !rbp_native_available())
		return cli_no_native();
	if (o->bpf && (o->native || o->subprocesses))
		return cli_usage_error("top", "--sampler=bpf cannot be used with %s",
				       o->native ? "--native" : "--subprocesses");
	if (o->bpf && o->rate > 10000)
		return cli_usage_error("top", "--sampler=bpf samples at most 10000 Hz");
	if (o->native && o->nonblocking)
		return cli_usage_error("top", "--native cannot be used with --nonblocking "
				       "(native stacks are read while the process is paused)");
	return 0;
}

/* ---- the table --------------------------------------------------------- */

struct table {
	struct rbp_row *win, *cum;   /* parallel rows: window counts, counts up to its end */
	size_t n;
	size_t *order;               /* rows to show, sorted */
	size_t n_order;
	uint64_t win_samples, gvl, oncpu;
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

	for (int k = -1; k < N_COLS; k++) {
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
	uint8_t *seen = calloc(p->n_threads + 1, 1);
	int err = RBP_ENOMEM;

	memset(t, 0, sizeof(*t));
	if (!wc || !cc || !row_of || !seen || rbp_rows_make(p, v->by_line, row_of, &t->win, &t->n))
		goto done;
	if (!(t->cum = malloc((t->n + 1) * sizeof(*t->cum))) ||
	    !(t->order = malloc((t->n + 1) * sizeof(*t->order))))
		goto done;
	memcpy(t->cum, t->win, t->n * sizeof(*t->cum));
	for (size_t i = 0; i < v->win_to && i < p->n_samples; i++) {
		const struct rbp_sample *s = &p->samples[i];
		if (!sample_selected(v, s))
			continue;
		cc[s->node]++;
		if (i < v->win_from)
			continue;
		wc[s->node]++;
		t->win_samples++;
		t->gvl += !!(p->sample_flags[i] & RBP_SAMPLE_GVL);
		t->oncpu += !!(p->sample_flags[i] & RBP_SAMPLE_ONCPU);
		t->n_threads += !seen[s->thread];
		seen[s->thread] = 1;
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

	snprintf(line, sizeof(line), "rbpeek top: pid %d (ruby %s) %s%s%s", o->pid, v->version,
		 v->cmdline, v->procs ? "  [+ subprocesses]" : "", v->paused ? "  [paused]" : "");
	put_line(f, v, cols, line);
	if (v->procs)
		snprintf(thr, sizeof(thr), ", %zu processes", rbp_procset_count(v->procs));
	else
		thr[0] = 0;
	snprintf(line, sizeof(line), "%.1f s at %u Hz, %zu samples, %.1f%% errors, GVL %.0f%%, "
		 "on CPU %.0f%%, %zu threads%s", (double)v->elapsed_ns / 1e9, o->rate, v->win_to,
		 pct(v->errors, v->ticks), pct(t->gvl, t->win_samples), pct(t->oncpu, t->win_samples),
		 t->n_threads, thr);
	if (o->nonblocking)   /* running state is known only when read paused */
		snprintf(strstr(line, "on CPU"), sizeof(line) - (size_t)(strstr(line, "on CPU") - line),
			 "on CPU n/a, %zu threads%s", t->n_threads, thr);
	put_line(f, v, cols, line);
	thread_desc(p, v, thr, sizeof(thr));
	snprintf(line, sizeof(line), "view: %s   sort: %s   thread: %s   (%% over the last %.1f s, "
		 "times since start)", v->by_line ? "by line" : "by function", col_names[v->sort], thr,
		 (double)v->win_ns / 1e9);
	put_line(f, v, cols, line);
	put_line(f, v, cols, "");
}

/* "  % self  % total  self time  total time  function  file:line", sort column marked. */
static const int col_widths[N_COLS] = { 6, 7, 9, 10 };

/* Below 80 columns the time columns give their room to names and places. */
static int shown_cols(int cols)
{
	return cols < 80 ? COL_SELF_TIME : N_COLS;
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
	char line[2048], place[1024];
	size_t label_bytes = fit(r->label, fn_width);
	int n = 0;

	if (r->path[0])
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
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%.*s", (int)label_bytes, r->label);
	for (size_t w = text_cols(r->label); w < fn_width && n < (int)sizeof(line) - 1; w++)
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
static int draw(const struct rbp_profile *p, struct view *v)
{
	struct table t;
	int rows = 1000000, cols = 100000, err;
	char *buf = NULL;
	size_t len = 0, fn_width = 8;

	if (v->tty)
		term_size(&rows, &cols);
	if ((err = table_build(p, v, &t)))
		return err;
	for (size_t k = 0; k < t.n_order; k++)
		if (text_cols(t.cum[t.order[k]].label) > fn_width)
			fn_width = text_cols(t.cum[t.order[k]].label);
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
	int body = v->tty ? rows - 7 : 25;   /* header 5, footer 1, and a spare line */
	for (size_t k = 0; k < t.n_order && (int)k < body; k++)
		draw_row(f, v, &t, t.order[k], cols, fn_width);
	if (v->tty) {
		fputs("\033[J", f);
		fprintf(f, "\033[%d;1H", rows);
		put_line(f, v, cols, "keys: < > sort  1-4 column  l line/function  t/T/a thread  "
			 "p pause  q quit");
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

/* ---- keys and the sampler's callbacks ---------------------------------- */

static void handle_key(struct view *v, const struct rbp_profile *p, int key)
{
	switch (key) {
	case 'q': case 'Q': v->quit = 1; return;
	case '<': case ',': case TERM_KEY_LEFT: v->sort = (v->sort + N_COLS - 1) % N_COLS; break;
	case '>': case '.': case TERM_KEY_RIGHT: v->sort = (v->sort + 1) % N_COLS; break;
	case '1': case '2': case '3': case '4': v->sort = key - '1'; break;
	case 'l': case 'f': v->by_line = !v->by_line; break;
	case 't': v->thread = v->thread + 1 < (long)p->n_threads ? v->thread + 1 : -1; break;
	case 'T': v->thread = v->thread < 0 ? (long)p->n_threads - 1 : v->thread - 1; break;
	case 'a': v->thread = -1; break;
	case 'p': case ' ': v->paused = !v->paused; break;
	case 12: break;   /* Ctrl-L: redraw */
	default: return;
	}
	v->dirty = 1;
}

static void progress(void *ctx, const struct rbp_sampler_status *st, const struct rbp_profile *p)
{
	struct view *v = ctx;
	uint64_t delay_ns = (uint64_t)(v->o->delay * 1e9);
	int key;

	if (v->tty) {
		while ((key = term_key()) >= 0 && !v->quit)
			handle_key(v, p, key);
		if (term_take_resize())
			v->dirty = 1;
	}
	if (!v->paused && st->elapsed_ns >= v->win_start_ns + delay_ns) {
		v->win_from = v->win_to;
		v->win_to = p->n_samples;
		v->win_ns = st->elapsed_ns - v->win_start_ns;
		v->win_start_ns = st->elapsed_ns;
		v->ticks = st->ticks;
		v->errors = st->errors;
		v->elapsed_ns = st->elapsed_ns;
		v->shown++;
		v->dirty = 1;
	}
	if (v->dirty && !v->quit) {
		v->dirty = 0;
		if (draw(p, v))
			v->quit = 1;
		if (v->o->iterations && v->shown >= v->o->iterations)
			v->quit = 1;
	}
}

static int should_stop(void *ctx)
{
	const struct view *v = ctx;
	return v->quit || cli_stop_signal();
}

/* Ctrl-Z: stop here, between two samples, the terminal given back meanwhile. */
static int suspend(void *ctx)
{
	return cli_suspend_if_pending(term_before_stop, term_after_stop);
}

/* ---- the command ------------------------------------------------------- */

static const char *stop_words(enum rbp_stop_reason r)
{
	switch (r) {
	case RBP_STOP_EXITED: return "the process exited";
	case RBP_STOP_FAILING: return "most samples failed";
	default: return NULL;
	}
}

int cmd_top(int argc, char **argv)
{
	struct top_opts o = { .rate = 100, .delay = 1.0 };
	struct cli_subject subj = { 0 };
	struct rbp_target *t = NULL;
	struct rbp_vm *vm = NULL;
	struct rbp_vm_opts vo = { 0 };
	struct rbp_native *nat = NULL;
	struct rbp_profile p;
	struct rbp_sampler_status st;
	struct rbp_sampler_opts so = { 0 };
	struct view v = { .thread = -1, .o = &o };
	char cmdline[256];
	int rc = 0, err;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	vo.force_version = o.force_version;
	if ((err = cli_open_vm(o.pid, NULL, NULL, o.layout, &vo, &subj, &t, &vm))) {
		rbp_vm_free(vm);
		rbp_target_close(t);
		return cli_fail(err, &subj);
	}
	if (o.native && (err = rbp_native_open(t, &nat))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	if ((err = rbp_profile_init(&p))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	if (o.subprocesses && (err = rbp_procset_new(t, vm, &vo, &v.procs))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	rbp_proc_cmdline(o.pid, cmdline, sizeof(cmdline));
	v.version = rbp_vm_info(vm)->version;
	v.cmdline = cmdline;
	p.meta.ruby_version = rbp_profile_str(&p, v.version);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	cli_signals_init();
	/* every thread paused: the on-CPU share needs each one's state */
	so = (struct rbp_sampler_opts){ .rate_hz = o.rate, .nonblocking = (uint8_t)o.nonblocking,
		.pause_all = 1, .duration_ns = (uint64_t)(o.duration * 1e9), .should_stop = should_stop,
		.suspend = suspend, .progress = progress, .progress_ns = 50 * 1000000ull, .procs = v.procs, .native = nat, .ctx = &v };
	if (o.bpf)
		so.bpf = cli_bpf_sampler(t, vm, o.rate);
	v.tty = !term_enter();
	if (v.tty)
		v.dirty = 1;   /* an empty screen at once, not after a second */
	else if (!isatty(1))
		fprintf(stderr, "rbpeek: stdout is not a terminal: printing the table every %.1f s "
			"(Ctrl-C to stop)\n", o.delay);
	else
		fprintf(stderr, "rbpeek: stdin is not a terminal (no keys): printing the table "
			"every %.1f s\n", o.delay);
	err = rbp_sample_loop(t, vm, &so, &p, &st);
	rbp_bpf_sampler_close(so.bpf);
	term_restore();
	if (err) {
		rc = cli_fail(err, &subj);
	} else if (stop_words(st.stop)) {
		fprintf(stderr, "rbpeek: top stopped: %s", stop_words(st.stop));
		if (st.stop == RBP_STOP_FAILING)
			fprintf(stderr, " (last error: %s)", rbp_strerror(st.last_err));
		fputc('\n', stderr);
		rc = st.stop == RBP_STOP_EXITED ? 0 : cli_fail(st.last_err, &subj);
	}
	rbp_profile_free(&p);
cleanup:
	rbp_native_close(nat);
	rbp_procset_free(v.procs);
	rbp_vm_free(vm);
	rbp_target_close(t);
	return rc;
}
