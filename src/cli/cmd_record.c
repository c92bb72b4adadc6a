/*
 * cmd_record.c - `rbpeek record`: sample a process (by PID, or one we
 * spawn) until Ctrl-C, --duration or its exit, then write the profile.
 *
 * Whatever ends the recording, what was recorded is written: the raw file
 * (always, in the cache directory) and the chosen format.  The output path
 * is checked before sampling starts, so a typo does not cost a recording.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli/child.h"
#include "cli/cli.h"
#include "cli/invoker.h"
#include "cli/signals.h"
#include "output/output.h"
#include "profile/profile.h"
#include "profile/raw.h"
#include "profile/recording.h"
#include "profile/sampler.h"
#include "profile/subject.h"
#include "ruby/vm.h"
#include "util/err.h"

static const char record_usage[] =
	"usage: rbpeek record --pid PID [options]\n"
	"       rbpeek record [options] -- COMMAND [ARGS...]\n"
	"\n"
	"Sample every thread's Ruby stack until Ctrl-C, --duration or the program's exit,\n"
	"then write a profile (a flame graph by default) and a raw file to convert later.\n"
	"\n"
	"  -p, --pid PID           profile a running process\n"
	"  -r, --rate HZ           samples per second (default 100)\n"
	"  -d, --duration SECONDS  stop after this long\n"
	"  -o, --output FILE       where to write (default rbpeek-PID-YYYYmmdd-HHMMSS.EXT; - for stdout)\n"
	"  -f, --format FORMAT     output format (see below; default: the one -o FILE's name\n"
	"                          ends in, .svg .pb.gz .speedscope.json ..., else flamegraph)\n"
	"      --on-cpu            keep only samples of threads on a CPU or ready to run\n"
	"                          (not blocked in a system call: sleep, I/O, locks, the GVL)\n"
	"      --idle              keep samples of threads waiting for work (default: left\n"
	"                          out of the output, not of the raw file: a thread blocked\n"
	"                          in a pool's ConditionVariable#wait, Queue#pop, IO.select,\n"
	"                          accept; or that (almost) never ran; a request in sleep or waiting on\n"
	"                          a database still shows)\n"
	"      --no-idle           leave them out (the default)\n"
	"      --gvl               keep only samples of the thread holding the GVL\n"
	"      --threads           one root frame per thread\n"
	"      --function          aggregate by function (first line) instead of by line\n"
	"      --subprocesses      also record every Ruby process it starts (forked workers,\n"
	"                          children that exec Ruby), each under a 'process PID' root\n"
	"      --nonblocking       never stop a thread: a stack that changed while it was\n"
	"                          read is dropped (default: read without stopping, and\n"
	"                          stop the thread running Ruby only when a read tore twice)\n"
	"      --stop              stop the thread running Ruby at every tick (on a machine\n"
	"                          whose CPUs are full, +8% to a CPU-bound target at 100 Hz)\n"
	"      --no-gc             no \"(GC: marking)\"/\"(GC: sweeping)\"/\"(GC)\" frame on top of\n"
	"                          the stack of the thread running the garbage collector\n"
	"      --native            also unwind native stacks: C functions a C method calls\n"
	"                          (extensions, libc) appear above it (not with --nonblocking)\n"
	"      --sampler SAMPLER   ptrace (default): read every thread's stack from outside;\n"
	"                          bpf: the kernel copies the stack of a thread it interrupts\n"
	"                          on a CPU (on-CPU samples only, no pause; root; falls back\n"
	"                          to ptrace with a warning where eBPF is not allowed)\n"
	"      --max-hold USEC     keep no thread stopped longer than this (default 300):\n"
	"                          a sample whose threads take longer to stop or to read\n"
	"                          lets them go and is finished without pausing, as with\n"
	"                          --nonblocking (counted in the closing line); 0: no bound\n"
	"      --no-realtime       keep the sampling thread in the normal scheduling class\n"
	"                          (default: a real-time priority when allowed, e.g. as root,\n"
	"                          given up if sampling takes over half a CPU)\n"
	"      --raw-file PATH     write the raw profile (to convert later with 'rbpeek report')\n"
	"                          to PATH instead of the cache directory ~/.cache/rbpeek,\n"
	"                          which keeps the newest 20 raw files (and 512 MB at most)\n"
	"      --no-raw            keep no raw profile\n"
	"      --diff BASE         write how this recording differs from the raw file BASE\n"
	"                          (a recording of the same program): a differential flame\n"
	"                          graph, -f summary's table of the largest changes, or a\n"
	"                          pprof diff (as go tool pprof -normalize -diff_base)\n"
	"      --node-fraction F   -f callgraph/dot: leave out functions under this fraction\n"
	"                          of the samples (default 0.005; 0 keeps all)\n"
	"      --edge-fraction F   ... and calls under this fraction (default 0.001)\n"
	"      --node-count N      ... and all but the N largest functions (default 80)\n"
	"      --silent            no live status on stderr\n"
	"      --no-drop-root      run COMMAND as root from a root shell (refused under sudo,\n"
	"                          where COMMAND runs as the invoking user)\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n"
	"\n"
	"With -- COMMAND, once the profile is written rbpeek exits with the program's exit\n"
	"status (128+N when signal N ended it; 0 when it still runs after --duration);\n"
	"rbpeek's own exit codes (2-11) win when the profile could not be written.\n"
	"A COMMAND that runs no Ruby within half a second of its last exec is ended, with\n"
	"what it started, and rbpeek exits 5 (with --subprocesses, the Ruby processes it\n"
	"starts are recorded).\n"
	"\n"
	"formats:\n";

struct record_opts {
	struct cli_target_opts t; /* --pid, --force-version, --layout */
	char **cmd;               /* argv of the program to spawn, or NULL */
	uint32_t rate;
	double duration;
	const char *output;
	const char *format;
	struct rbp_sampler_opts so;
	int silent;
	int no_drop_root;
	int native;
	int subprocesses;
	const char *raw;          /* --raw-file PATH, "" for --no-raw, NULL: the cache */
	int idle;                 /* --idle: keep samples of threads waiting for work */
	int bpf;                  /* --sampler=bpf */
	const char *diff;         /* --diff BASE: the raw file to compare with */
};

static int parse_opts(int argc, char **argv, struct record_opts *o)
{
	enum { OPT_ONCPU = 256, OPT_GVL, OPT_THREADS, OPT_FUNCTION, OPT_NONBLOCK, OPT_SILENT, OPT_NODROP,
	       OPT_NOGC, OPT_NATIVE, OPT_SUBPROC, OPT_NORT, OPT_MAXHOLD, OPT_DIFF, OPT_STOP };
	static const struct option longopts[] = {
		CLI_OPT_PID,
		CLI_OPTS_WATCH,
		CLI_OPTS_OUTPUT,
		{ "on-cpu", no_argument, NULL, OPT_ONCPU },
		{ "gvl", no_argument, NULL, OPT_GVL },
		{ "threads", no_argument, NULL, OPT_THREADS },
		{ "function", no_argument, NULL, OPT_FUNCTION },
		{ "subprocesses", no_argument, NULL, OPT_SUBPROC },
		{ "nonblocking", no_argument, NULL, OPT_NONBLOCK },
		{ "stop", no_argument, NULL, OPT_STOP },
		{ "native", no_argument, NULL, OPT_NATIVE },
		{ "silent", no_argument, NULL, OPT_SILENT },
		{ "no-drop-root", no_argument, NULL, OPT_NODROP },
		CLI_OPTS_LAYOUT,
		{ "no-gc", no_argument, NULL, OPT_NOGC },
		{ "no-realtime", no_argument, NULL, OPT_NORT },
		{ "max-hold", required_argument, NULL, OPT_MAXHOLD },
		{ "diff", required_argument, NULL, OPT_DIFF },
		CLI_OPTS_GRAPH,
		CLI_OPTS_RAW,
		CLI_OPTS_IDLE,
		CLI_OPTS_SAMPLER,
		CLI_OPTS_END
	};
	struct cli_parser cp = { .cmd = "record", .usage = record_usage, .formats = 1,
		.shortopts = "+:p:r:d:o:f:h", .longopts = longopts, .t = &o->t, .unit = "Hz",
		.rate = &o->rate, .duration = &o->duration, .output = &o->output,
		.format = &o->format, .raw = &o->raw, .bpf = &o->bpf, .idle = &o->idle };
	char *end;
	int c;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case OPT_ONCPU: o->so.on_cpu = 1; break;
		case OPT_GVL: o->so.gvl_only = 1; break;
		case OPT_THREADS: o->so.threads_as_roots = 1; break;
		case OPT_FUNCTION: o->so.by_function = 1; break;
		case OPT_SUBPROC: o->subprocesses = 1; break;
		case OPT_NONBLOCK: o->so.nonblocking = 1; break;
		case OPT_STOP: o->so.stop_gvl = 1; break;
		case OPT_NATIVE: o->native = 1; break;
		case OPT_SILENT: o->silent = 1; break;
		case OPT_NODROP: o->no_drop_root = 1; break;
		case OPT_NOGC: o->so.no_gc = 1; break;
		case OPT_NORT: o->so.realtime = 0; break;
		case OPT_DIFF: o->diff = optarg; break;
		case CLI_OPT_GRAPH:
			if (cli_graph_opt("record", longopts[cp.index].name, optarg))
				return EXIT_USAGE;
			break;
		case OPT_MAXHOLD: {
			errno = 0;
			unsigned long long us = strtoull(optarg, &end, 10);
			if (errno || *end || !*optarg || *optarg == '-' || us > 10000000ull)
				return cli_usage_error("record", "invalid --max-hold '%s' (microseconds, "
						       "0 to 10000000; 0: no bound)", optarg);
			o->so.max_hold_ns = us ? us * 1000ull : UINT64_MAX;
			break;
		}
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	if (!o->t.pid == !o->cmd)
		return cli_usage_error("record", "give either --pid PID or -- COMMAND [ARGS...]");
	return cli_sampling_check("record", o->native, o->so.nonblocking, o->bpf, o->rate,
				  o->native ? "--native" : o->subprocesses ? "--subprocesses" : NULL);
}

/* ---- live status ------------------------------------------------------ */

struct live {
	int lines;   /* lines printed last time, to redraw over */
	int tty;
	struct rbp_procset *procs;   /* --subprocesses, else NULL */
};

/* Top functions by self samples, for the live display. */
static void top_functions(const struct rbp_profile *p, FILE *out, int *lines)
{
	uint64_t *self = calloc(p->n_frames + 1, sizeof(*self));
	size_t best[5] = { 0 }, n_best = 0;

	if (!self || !p->n_samples) {
		free(self);
		return;
	}
	for (size_t i = 0; i < p->n_samples; i++)
		self[p->nodes[p->samples[i].node].frame]++;
	for (size_t k = 0; k < 5; k++) {
		size_t arg = SIZE_MAX;
		for (size_t i = 0; i < p->n_frames; i++) {
			int taken = 0;
			for (size_t j = 0; j < n_best; j++)
				taken |= best[j] == i;
			if (!taken && self[i] && (arg == SIZE_MAX || self[i] > self[arg]))
				arg = i;
		}
		if (arg == SIZE_MAX)
			break;
		best[n_best++] = arg;
	}
	for (size_t j = 0; j < n_best; j++) {
		char name[160];
		rbp_frame_name(&p->frames[best[j]], name, sizeof(name));
		fprintf(out, "  %5.1f%%  %s\n", 100.0 * (double)self[best[j]] / (double)p->n_samples, name);
		(*lines)++;
	}
	free(self);
}

static void progress(void *ctx, const struct rbp_sampler_status *st, const struct rbp_profile *p)
{
	struct live *lv = ctx;

	if (!lv->tty)
		return;
	if (lv->lines)
		fprintf(stderr, "\033[%dA", lv->lines);
	fprintf(stderr, "\r\033[Jrecording: %.1f s, %llu samples, %llu errors, %llu late",
		(double)st->elapsed_ns / 1e9, (unsigned long long)st->samples,
		(unsigned long long)st->errors, (unsigned long long)st->late);
	if (lv->procs)
		fprintf(stderr, ", %zu processes", rbp_procset_count(lv->procs));
	fputs(" (Ctrl-C to stop)\n", stderr);
	lv->lines = 1;
	top_functions(p, stderr, &lv->lines);
	fflush(stderr);
}

static void print_stats(const struct rbp_sampler_status *st, uint32_t rate, int gvl_only,
			uint64_t max_hold_ns, int bpf)
{
	double secs = (double)st->elapsed_ns / 1e9;
	double late_pct = st->ticks ? 100.0 * (double)st->late / (double)st->ticks : 0;

	fprintf(stderr, "rbpeek: %s after %.1f s: %llu samples in %llu ticks, %llu errors, "
		"%llu late (%.1f%%, %llu skipped)", cli_stop_words(st->stop), secs,
		(unsigned long long)st->samples, (unsigned long long)st->ticks,
		(unsigned long long)st->errors, (unsigned long long)st->late, late_pct,
		(unsigned long long)st->skipped);
	if (gvl_only)   /* those ticks gave no sample */
		fprintf(stderr, "; %llu ticks found no thread holding the GVL",
			(unsigned long long)st->no_gvl_holder);
	if (st->ticks)
		fprintf(stderr, "; sampling took %.0f/%.0f/%.0f us (min/avg/max)",
			(double)st->tick_ns_min / 1e3,
			(double)st->tick_ns_sum / 1e3 / (double)st->ticks,
			(double)st->tick_ns_max / 1e3);
	if (st->ticks && !bpf)
		fprintf(stderr, "; %llu ticks stopped a thread, %llu reads torn, %llu stacks dropped torn",
			(unsigned long long)(st->stopped ? st->stopped : st->holds),
			(unsigned long long)st->torn_reads, (unsigned long long)st->torn);
	if (st->holds)
		fprintf(stderr, "; threads held stopped %.0f/%.0f us (avg/max)",
			(double)st->held_ns_sum / 1e3 / (double)st->holds, (double)st->held_ns_max / 1e3);
	if (st->holds && max_hold_ns != UINT64_MAX)
		fprintf(stderr, ", %llu let go at the %.0f us bound", (unsigned long long)st->over_budget,
			(double)(max_hold_ns ? max_hold_ns : RBP_DEFAULT_MAX_HOLD_NS) / 1e3);
	fputc('\n', stderr);
	double cpu, rss;
	if (!cli_own_usage(&cpu, &rss) && st->ticks)
		fprintf(stderr, "rbpeek: own CPU %.3f s (%.1f%% of one core, %.1f us per tick), "
			"max RSS %.1f MB; scheduling: %s\n", cpu, secs > 0 ? 100.0 * cpu / secs : 0,
			cpu * 1e6 / (double)st->ticks, rss,
			st->sched == RBP_SCHED_REALTIME ? "real-time" :
			st->sched == RBP_SCHED_DROPPED ?
			"normal (real-time given up: sampling took over half a CPU for 100 ms)" : "normal");
	switch (rbp_sampler_late_cause(st, rate)) {
	case RBP_LATE_COST:
		fprintf(stderr, "hint: %.1f%% of samples were late: reading one takes %.0f us of the "
			"%.0f us between samples; lower the rate with -r\n", late_pct,
			(double)st->tick_ns_sum / 1e3 / (double)st->ticks, 1e6 / rate);
		break;
	case RBP_LATE_HOST:
		fprintf(stderr, "hint: %.1f%% of samples were late because the machine was busy "
			"(reading one took only %.0f us)%s\n", late_pct,
			(double)st->tick_ns_sum / 1e3 / (double)st->ticks,
			st->sched == RBP_SCHED_NORMAL ?
			"; as root the sampling thread gets a real-time priority" : "");
		break;
	default:
		break;
	}
	if (st->stop == RBP_STOP_FAILING)
		fprintf(stderr, "hint: the last error was: %s\n", rbp_strerror(st->last_err));
}

/* Native unwinding done: the root process's, and with --subprocesses every member's. */
static void print_native_stats(const struct rbp_recording *r)
{
	struct rbp_recording_native ns;

	rbp_recording_native_stats(r, &ns);
	fprintf(stderr, "rbpeek: native: %llu stacks unwound, %.1f frames each, %llu addresses "
		"symbolized%s\n", (unsigned long long)ns.unwinds,
		ns.unwinds ? (double)ns.frames / (double)ns.unwinds : 0.0,
		(unsigned long long)ns.symbolized, rbp_recording_procs(r) ? " (all processes)" : "");
}

/* ---- the command ------------------------------------------------------- */

/* The command, with --diff's BASE kept in *base (freed by cmd_record on every path). */
static int record(int argc, char **argv, struct rbp_profile *base_)
{
	struct record_opts o = { .rate = 100, .so.realtime = 1 };
	struct cli_subject subj = { 0 };
	struct rbp_subject s = { 0 };
	struct rbp_profile p, *base = base_;
	struct rbp_sampler_status st = { 0 };
	struct rbp_vm_opts vo = { 0 };
	struct live lv = { 0 };
	struct rbp_recording *rec = NULL;
	struct rbp_recording_config rc_cfg;
	struct rbp_recording_status rst;
	const struct rbp_format *fmt;
	int rc, err, child = 0;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	if ((rc = cli_pick_format("record", o.format, o.output, &fmt)))
		return rc;
	if (o.cmd && o.no_drop_root && (rc = cli_check_no_drop_root("record", o.cmd[0])))
		return rc;
	/* BASE is read first: a wrong file is said before anything is recorded */
	if (o.diff && (rc = cli_diff_load("record", o.diff, fmt, base)))
		return rc;
	/* a program is not started for nothing; a --pid is first attached (below) */
	if (o.cmd && (rc = cli_check_outputs(o.output, o.raw)))
		return rc;
	/* wake for each tick within 1 us, not the default 50 us of slack */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	cli_signals_init();
	if (o.cmd && (child = cli_child_spawn(o.cmd, o.no_drop_root ? 0 : CLI_SPAWN_AS_INVOKER)) < 0)
		return EXIT_USAGE;
	subj.pid = o.cmd ? child : o.t.pid;
	vo.force_version = o.t.force_version;
	cli_vm_env(&vo, o.t.layout);
	err = cli_child_attach(subj.pid, o.cmd != NULL, &vo, &s);
	if (err == RBP_ENOTRUBY && o.subprocesses) {
		rbp_subject_close(&s);   /* the target the attach left open */
		err = rbp_subject_open_process(&s, subj.pid);   /* not Ruby itself: its children may be */
	}
	if (err) {
		subj.version = vo.found_version;
		subj.forced = o.t.force_version;
		subj.vo = &vo;
		if (err == RBP_ENOPROC && o.cmd)
			return cli_child_gone_early(o.cmd);
		rc = err == RBP_ENOTRUBY && o.cmd ? cli_child_not_ruby(o.cmd, subj.pid, &vo) :
		     cli_fail(err, &subj);
		if (o.cmd)   /* the program was started to be recorded: it ends with us */
			cli_child_kill();
		rbp_subject_close(&s);   /* what was opened of the target before the error */
		return rc;
	}
	if (o.t.pid && (rc = cli_check_outputs(o.output, o.raw)))
		goto cleanup;
	rc_cfg = (struct rbp_recording_config){ .subprocesses = (uint8_t)o.subprocesses,
		.native = (uint8_t)o.native, .bpf = (uint8_t)o.bpf, .rate_hz = o.rate, .vo = &vo };
	if ((err = rbp_recording_open(&s, &rc_cfg, &rec, &rst))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	if (rst.bpf_err)
		cli_bpf_fallback(rst.bpf_why, rst.bpf_err);
	if ((err = rbp_profile_init(&p))) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	lv.procs = rbp_recording_procs(rec);
	if (o.cmd)
		p.meta.cmdline = rbp_profile_str(&p, o.cmd[0]);
	o.so.rate_hz = o.rate;
	o.so.duration_ns = (uint64_t)(o.duration * 1e9);
	o.so.should_stop = cli_should_stop;
	o.so.suspend = cli_suspend;
	o.so.progress = progress;
	o.so.child_exited = o.cmd ? cli_child_exited : NULL;
	o.so.ctx = &lv;
	if (rst.bpf)
		o.so.on_cpu = 1;
	lv.tty = !o.silent && isatty(2);
	if (!o.silent)
		fprintf(stderr, "rbpeek: recording process %d (%s%s)%s at %u Hz%s%s\n", subj.pid,
			rbp_recording_ruby(rec) ? "ruby " : "not Ruby",
			rbp_recording_ruby(rec) ? rbp_recording_ruby(rec) : "",
			lv.procs ? " and its Ruby subprocesses" : "", o.rate,
			rst.bpf ? " of CPU time (in-kernel sampler)" : "",
			lv.tty ? "; press Ctrl-C to stop" : "");
	err = rbp_recording_run(rec, &o.so, &p, &st);
	p.meta.ruby_version = rbp_profile_str(&p, rbp_recording_version(rec));
	if (!o.silent)
		print_stats(&st, o.rate, o.so.gvl_only, o.so.max_hold_ns, o.bpf);
	if (!o.silent && rbp_recording_native(rec))
		print_native_stats(rec);
	if (!o.silent && lv.procs)
		fprintf(stderr, "rbpeek: followed %llu Ruby processes\n",
			(unsigned long long)rbp_procset_attached(lv.procs));
	if (err) {
		rc = cli_fail(err, &subj);
	} else if (!p.n_samples && st.stop == RBP_STOP_FAILING) {
		/* every read failed: the same words and exit code as snapshot's */
		rc = cli_fail(st.last_err, &subj);
	} else if (!p.n_samples) {
		fprintf(stderr, "rbpeek: error: no samples were collected (%s)%s\n", cli_stop_words(st.stop),
			o.so.on_cpu || o.so.gvl_only ? "; --on-cpu/--gvl keep only running threads" : "");
		rc = EXIT_NOSAMPLES;
	} else {
		char title[512];
		size_t idle = rbp_profile_mark_idle_threads(&p);
		if (idle == p.n_samples && !o.idle) {
			fprintf(stderr, "rbpeek: every sample was of a thread waiting for work: "
				"all are kept\n");
			o.idle = 1;
		}
		cli_profile_title(&p, idle, o.idle, title, sizeof(title));
		if (!o.silent && !o.idle && idle)
			fprintf(stderr, "rbpeek: %zu of %zu samples (%.0f%%) were threads waiting for work "
				"(a pool's ConditionVariable#wait, IO.select, ...): left out (--idle keeps "
				"them)\n", idle, p.n_samples, 100.0 * (double)idle / (double)p.n_samples);
		if (o.diff)
			rc = cli_diff_write(base, o.diff, &p, fmt, o.output, o.raw, o.idle, o.silent);
		else
		rc = cli_write_outputs(&p, fmt, o.output, o.raw, o.idle ? 0 : RBP_SAMPLE_IDLE,
				       o.silent, title);
	}
	rbp_profile_free(&p);
cleanup:
	rbp_recording_close(rec);
	rbp_subject_close(&s);   /* what was opened before the recording took it */
	if (o.cmd)   /* rbpeek exits as the program did, once the profile is written */
		rc = cli_child_end(st.stop == RBP_STOP_DURATION, rc);
	return rc;
}

int cmd_record(int argc, char **argv)
{
	struct rbp_profile base = { 0 };
	int rc = record(argc, argv, &base);

	rbp_profile_free(&base);
	return rc;
}
