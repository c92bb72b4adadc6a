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
#include "cli/top.h"
#include "output/output.h"
#include "profile/procset.h"
#include "profile/profile.h"
#include "profile/recording.h"
#include "profile/sampler.h"
#include "profile/subject.h"
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
	"      --nonblocking       never pause the process (a stack that changed while it\n"
	"                          was read is left out)\n"
	"      --native            also unwind native stacks: C functions a C method calls\n"
	"                          get rows of their own (not with --nonblocking; with\n"
	"                          --subprocesses, in every process)\n"
	"      --sampler SAMPLER   ptrace (default) or bpf: the kernel copies the stack of a\n"
	"                          thread it interrupts on a CPU (on-CPU samples only, no\n"
	"                          pause; root; ptrace with a warning where eBPF is not allowed)\n"
	"      --idle              show threads waiting for work (a pool's waits, IO.select,\n"
	"                          a master in IO#wait_readable, ...; default: hidden, their\n"
	"                          share in the header; key i toggles)\n"
	"      --no-idle           hide them (the default)\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n"
	"\n"
	"keys: < > (or arrows) change the sort column, 1-4 pick it; l per line / per function;\n"
	"t next thread, T previous, a all threads; i show/hide idle threads; p or space pause;\n"
	"q or Ctrl-C quit.\n"
	"When stdout is not a terminal the table is printed as text every refresh.\n";

static int parse_opts(int argc, char **argv, struct top_opts *o)
{
	enum { OPT_DELAY = 256, OPT_SUBPROC, OPT_NONBLOCK, OPT_NATIVE };
	static const struct option longopts[] = {
		CLI_OPT_PID,
		CLI_OPTS_WATCH,
		{ "delay", required_argument, NULL, OPT_DELAY },
		{ "iterations", required_argument, NULL, 'n' },
		{ "subprocesses", no_argument, NULL, OPT_SUBPROC },
		{ "nonblocking", no_argument, NULL, OPT_NONBLOCK },
		{ "native", no_argument, NULL, OPT_NATIVE },
		CLI_OPTS_IDLE,
		CLI_OPTS_SAMPLER,
		CLI_OPTS_LAYOUT,
		CLI_OPTS_END
	};
	struct cli_parser cp = { .cmd = "top", .usage = top_usage, .shortopts = "+:p:r:d:n:h",
		.longopts = longopts, .t = &o->t, .unit = "Hz", .rate = &o->rate,
		.duration = &o->duration, .bpf = &o->bpf, .idle = &o->idle };
	char *end;
	int c;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case OPT_DELAY:
			if (cli_parse_seconds(optarg, &o->delay) || o->delay < 0.1)
				return cli_usage_error("top", "invalid delay '%s' (at least 0.1 s)", optarg);
			break;
		case 'n':
			o->iterations = strtol(optarg, &end, 10);
			if (*end || o->iterations < 1)
				return cli_usage_error("top", "invalid iteration count '%s'", optarg);
			break;
		case OPT_SUBPROC: o->subprocesses = 1; break;
		case OPT_NONBLOCK: o->nonblocking = 1; break;
		case OPT_NATIVE: o->native = 1; break;
		}
	}
	if (cli_pid_check("top", argc, argv, &o->t, "give --pid PID"))
		return EXIT_USAGE;
	return cli_sampling_check("top", o->native, o->nonblocking, o->bpf, o->rate,
				  o->native ? "--native" : o->subprocesses ? "--subprocesses" : NULL);
}

/* ---- keys and the sampler's callbacks ---------------------------------- */

static void handle_key(struct view *v, const struct rbp_profile *p, int key)
{
	switch (key) {
	case 'q': case 'Q': v->quit = 1; return;
	case '<': case ',': case TERM_KEY_LEFT: v->sort = (v->sort + TOP_N_COLS - 1) % TOP_N_COLS; break;
	case '>': case '.': case TERM_KEY_RIGHT: v->sort = (v->sort + 1) % TOP_N_COLS; break;
	case '1': case '2': case '3': case '4': v->sort = key - '1'; break;
	case 'l': case 'f': v->by_line = !v->by_line; break;
	case 't': v->thread = v->thread + 1 < (long)p->n_threads ? v->thread + 1 : -1; break;
	case 'T': v->thread = v->thread < 0 ? (long)p->n_threads - 1 : v->thread - 1; break;
	case 'a': v->thread = -1; break;
	case 'p': case ' ': v->paused = !v->paused; break;
	case 'i': v->show_idle = !v->show_idle; break;
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
		if (top_draw(p, v))
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
	struct rbp_subject s = { 0 };
	struct rbp_vm_opts vo = { 0 };
	struct rbp_profile p;
	struct rbp_sampler_status st;
	struct rbp_sampler_opts so = { 0 };
	struct rbp_recording *rec = NULL;
	struct rbp_recording_config cfg;
	struct rbp_recording_status rst;
	struct view v = { .thread = -1, .o = &o };
	char cmdline[256];
	int rc = 0, err;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	if ((err = cli_open_vm(&o.t, &vo, &subj, &s))) {
		rbp_subject_close(&s);
		return cli_fail(err, &subj);
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	cli_signals_init();
	cfg = (struct rbp_recording_config){ .subprocesses = (uint8_t)o.subprocesses,
		.native = (uint8_t)o.native, .bpf = (uint8_t)o.bpf, .rate_hz = o.rate, .vo = &vo };
	if ((err = rbp_recording_open(&s, &cfg, &rec, &rst))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	if ((err = rbp_profile_init(&p))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	v.procs = rbp_recording_procs(rec);
	v.show_idle = o.idle;
	rbp_process_cmdline(o.t.pid, cmdline, sizeof(cmdline));
	v.version = rbp_recording_ruby(rec);
	v.cmdline = cmdline;
	p.meta.ruby_version = rbp_profile_str(&p, v.version);
	/* every thread paused: the on-CPU share needs each one's state */
	so = (struct rbp_sampler_opts){ .rate_hz = o.rate, .nonblocking = (uint8_t)o.nonblocking,
		.pause_all = 1, .duration_ns = (uint64_t)(o.duration * 1e9), .should_stop = should_stop,
		.suspend = suspend, .progress = progress, .progress_ns = 50 * 1000000ull, .ctx = &v };
	if (rst.bpf_err)
		cli_bpf_fallback(rst.bpf_why, rst.bpf_err);
	v.tty = !term_enter();
	if (v.tty)
		v.dirty = 1;   /* an empty screen at once, not after a second */
	else if (!isatty(1))
		fprintf(stderr, "rbpeek: stdout is not a terminal: printing the table every %.1f s "
			"(Ctrl-C to stop)\n", o.delay);
	else
		fprintf(stderr, "rbpeek: stdin is not a terminal (no keys): printing the table "
			"every %.1f s\n", o.delay);
	err = rbp_recording_run(rec, &so, &p, &st);
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
	rbp_recording_close(rec);
	rbp_subject_close(&s);   /* what was opened before the recording took it */
	return rc;
}
