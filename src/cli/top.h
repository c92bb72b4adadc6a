/*
 * top.h - what `rbpeek top` (cmd_top.c) and its screen (top_draw.c) share:
 * the options, and the view (what is on screen and how to draw it).
 */
#ifndef RBP_CLI_TOP_H
#define RBP_CLI_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "cli/cli.h"
#include "profile/procset.h"
#include "profile/profile.h"

/* The columns, in order: what a row is sorted by (view.sort). */
enum { COL_SELF_PCT, COL_TOTAL_PCT, COL_SELF_TIME, COL_TOTAL_TIME, TOP_N_COLS };

struct top_opts {
	struct cli_target_opts t; /* --pid, --force-version, --layout */
	uint32_t rate;
	double delay, duration;
	long iterations;
	int subprocesses;
	int nonblocking;
	int native;
	int bpf;                  /* --sampler=bpf */
	int idle;                 /* --idle: show threads waiting for work from the start */
};

/* What is on screen and how to draw it. */
struct view {
	int tty;               /* full-screen mode (else plain text) */
	int sort;              /* COL_* */
	int by_line;           /* rows per line instead of per function */
	long thread;           /* index into p->threads, -1 for all */
	int paused;            /* keep showing the same window */
	int show_idle;         /* count samples of threads waiting for work (key i) */
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

/*
 * Draw one screen (v->tty) or one table (plain text) of the current
 * window on stdout.  Returns RBP_OK or RBP_ENOMEM.
 */
int top_draw(const struct rbp_profile *p, struct view *v);

#endif
