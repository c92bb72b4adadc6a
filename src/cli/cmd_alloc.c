/*
 * cmd_alloc.c - `rbpeek alloc`: who allocates objects in a running Ruby
 * process, by class and by allocating site, live.  The watching is
 * profile/allocwatch.h's (mechanism, exact and approximate sites); this
 * file holds the command line, the live table, the statistics and the
 * final write.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/signals.h"
#include "output/output.h"
#include "profile/allocwatch.h"
#include "profile/subject.h"
#include "ruby/vm.h"
#include "util/err.h"
#include "util/text.h"

static const char alloc_usage[] =
	"usage: rbpeek alloc --pid PID [options]\n"
	"\n"
	"Watch a running Ruby process allocate objects: new objects per class and per\n"
	"allocating site (Ruby function, file, line), as a table refreshed every second,\n"
	"then a profile of the allocation stacks (a flame graph by default).  Class counts\n"
	"are exact; sites come from the stacks of a random subset of the allocations,\n"
	"copied by an eBPF program in the kernel at the allocation (exact sites), or,\n"
	"with --no-bpf or where the kernel refuses eBPF, read just after it (approximate\n"
	"sites; a warning says so).  Needs root (kernel uprobes and eBPF; without\n"
	"CAP_BPF only approximate sites).\n"
	"\n"
	"  -p, --pid PID           the process to watch\n"
	"  -d, --duration SECONDS  stop after this long (default: until Ctrl-C or exit)\n"
	"  -r, --rate N            take about N allocating stacks per second (default 1000)\n"
	"  -t, --top N             rows per table (default 10)\n"
	"  -o, --output FILE       where to write (default rbpeek-PID-YYYYmmdd-HHMMSS.EXT; - for stdout)\n"
	"  -f, --format FORMAT     output format (see below; default: the one -o FILE's name\n"
	"                          ends in, .svg .pb.gz .speedscope.json ..., else flamegraph)\n"
	"      --raw-file PATH     write the raw profile to PATH instead of the cache\n"
	"                          directory (which keeps the newest 20, 512 MB at most)\n"
	"      --no-raw            keep no raw profile\n"
	"      --silent            no live table on stderr\n"
	"      --no-bpf            read stacks from outside after the allocation (approximate\n"
	"                          sites; what happens anyway where eBPF is refused)\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n"
	"\n"
	"Overhead: every allocation of the target traps into the kernel while rbpeek\n"
	"watches (microseconds each); see docs/commands/alloc.md for measured figures.\n"
	"\n"
	"formats:\n";

struct alloc_opts {
	struct cli_target_opts t; /* --pid, --force-version, --layout */
	double duration;
	uint32_t rate;
	int top;
	const char *output;
	const char *format;
	int silent;
	const char *raw;          /* --raw-file PATH, "" for --no-raw, NULL: the cache */
	int no_bpf;
};

/* The live table on stderr. */
struct live {
	const struct alloc_opts *o;
	int lines;                   /* lines of the live table on screen */
	int tty;
};

static int parse_opts(int argc, char **argv, struct alloc_opts *o)
{
	enum { OPT_SILENT = 256, OPT_NO_BPF };
	static const struct option longopts[] = {
		CLI_OPT_PID,
		CLI_OPTS_WATCH,
		{ "top", required_argument, NULL, 't' },
		CLI_OPTS_OUTPUT,
		{ "silent", no_argument, NULL, OPT_SILENT },
		CLI_OPTS_LAYOUT,
		{ "no-bpf", no_argument, NULL, OPT_NO_BPF },
		CLI_OPTS_RAW,
		CLI_OPTS_END
	};
	struct cli_parser cp = { .cmd = "alloc", .usage = alloc_usage, .formats = 1,
		.shortopts = "+:p:d:r:t:o:f:h", .longopts = longopts, .t = &o->t,
		.unit = "stacks/s", .rate = &o->rate, .duration = &o->duration,
		.output = &o->output, .format = &o->format, .raw = &o->raw };
	char *end;
	long v;
	int c;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 't':
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 1000)
				return cli_usage_error("alloc", "invalid --top '%s' (1 to 1000)", optarg);
			o->top = (int)v;
			break;
		case OPT_SILENT: o->silent = 1; break;
		case OPT_NO_BPF: o->no_bpf = 1; break;
		}
	}
	return cli_pid_check("alloc", argc, argv, &o->t, "give the process to watch: --pid PID");
}

/* ---- tables -------------------------------------------------------------- */

/*
 * The class table (exact counts) and the site table (shares of the stack
 * samples, scaled to all allocations: "~").  Returns the lines printed.
 */
static int print_tables(const struct rbp_alloc_count *c, FILE *out, size_t top)
{
	const struct rbp_profile *p = c->p;
	struct rbp_alloc_tally *t;
	size_t n;
	int lines = 2;

	if (!rbp_alloc_tally_classes(c, &t, &n)) {
		fprintf(out, "  %12s  %6s  %s\n", "allocations", "share", "class");
		for (size_t i = 0; i < n && i < top; i++, lines++) {
			fprintf(out, "  %12llu  %5.1f%%  ", (unsigned long long)t[i].n,
				100.0 * (double)t[i].n / (double)c->allocs);
			rbp_text_put(out, p->frames[t[i].key].label);   /* control characters escaped */
			fputc('\n', out);
		}
		free(t);
	}
	if (!rbp_alloc_tally_sites(c, &t, &n)) {
		double scale = c->samples ? (double)c->allocs / (double)c->samples : 0;
		fprintf(out, "  %12s  %6s  %s\n", "allocations", "share",
			"site (innermost frame)  [class allocated most there]");
		for (size_t i = 0; i < n && i < top; i++, lines++) {
			char name[512];
			if (t[i].key == UINT32_MAX)
				snprintf(name, sizeof(name), "(no Ruby frame)");
			else
				rbp_frame_name(&p->frames[t[i].key], name, sizeof(name));
			fprintf(out, " ~%12.0f  %5.1f%%  ", (double)t[i].n * scale,
				100.0 * (double)t[i].n / (double)c->samples);
			rbp_text_put(out, name);
			fputs("  [", out);
			rbp_text_put(out, p->frames[t[i].cls].label);
			fprintf(out, " %.0f%%]\n", 100.0 * (double)t[i].cls_n / (double)t[i].n);
		}
		free(t);
	}
	return lines;
}

static void print_header(const struct rbp_alloc_count *c, FILE *out, double secs, int live)
{
	fprintf(out, "rbpeek alloc: pid %d, %.1f s, %llu allocations (%.0f/s), sites from %llu "
		"stacks%s\n", (int)c->pid, secs, (unsigned long long)c->allocs,
		secs > 0 ? (double)c->allocs / secs : 0.0, (unsigned long long)c->samples,
		live ? "  Ctrl-C to stop" : "");
}

/*
 * The live table, redrawn in place: built in memory, then written with
 * each line cut to the terminal's width and as many rows as its height
 * allows, so that moving the cursor up by the lines printed lands where
 * the table began.
 */
static void redraw(struct live *lv, const struct rbp_alloc_count *c, double secs)
{
	struct winsize ws = { 0 };
	char *buf = NULL;
	size_t len = 0, cols = 80, rows = 24;
	FILE *mem;

	if (!ioctl(2, TIOCGWINSZ, &ws) && ws.ws_col && ws.ws_row)
		cols = ws.ws_col, rows = ws.ws_row;
	size_t top = rows > 8 ? (rows - 5) / 2 : 1;
	if (top > (size_t)lv->o->top)
		top = (size_t)lv->o->top;
	if (!(mem = open_memstream(&buf, &len)))
		return;
	print_header(c, mem, secs, 1);
	print_tables(c, mem, top);
	fclose(mem);
	if (lv->lines)
		fprintf(stderr, "\033[%dA", lv->lines);
	fputs("\r\033[J", stderr);
	lv->lines = 0;
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		nl = strchr(line, '\n');
		size_t n = (size_t)(nl - line);
		fprintf(stderr, "%.*s\n", (int)(n < cols - 1 ? n : cols - 1), line);
		lv->lines++;
	}
	free(buf);
	fflush(stderr);
}

static void progress(void *ctx, const struct rbp_allocwatch *w)
{
	struct live *lv = ctx;
	const struct rbp_alloc_count *c = rbp_allocwatch_count(w);
	double secs = (double)rbp_allocwatch_status(w)->elapsed_ns / 1e9;

	if (lv->o->silent)
		return;
	if (!lv->tty) {
		fprintf(stderr, "rbpeek: %.0f s: %llu allocations, %llu stacks\n", secs,
			(unsigned long long)c->allocs, (unsigned long long)c->samples);
		return;
	}
	redraw(lv, c, secs);
}

/* ---- the command ---------------------------------------------------------- */

static int fail_probes(int err, const struct cli_subject *subj)
{
	switch (err) {
	case RBP_EPERM:
		fprintf(stderr, "rbpeek: error: process %d: not allowed to place uprobes "
			"(rbpeek alloc needs root, or CAP_PERFMON on Linux 5.8+)\n"
			"hint: run it with sudo; in a container add --cap-add PERFMON "
			"(or SYS_ADMIN on older kernels)\n", subj->pid);
		return EXIT_PERM;
	case RBP_ENOUPROBE:
		fprintf(stderr, "rbpeek: error: this kernel has no uprobe perf events "
			"(no /sys/bus/event_source/devices/uprobe; CONFIG_UPROBE_EVENTS)\n"
			"hint: 'rbpeek record' (CPU samples) needs no uprobes; in-process tools such as "
			"memory_profiler see allocations without kernel help\n");
		return EXIT_VERSION;
	case RBP_ENOPROBE:
		fprintf(stderr, "rbpeek: error: process %d: Ruby %s exports none of the allocation "
			"functions rbpeek probes (rb_wb_protected_newobj_of, ...)\n"
			"hint: 'rbpeek record' (CPU samples) works with this Ruby; for allocations use an "
			"in-process tool such as memory_profiler or ObjectSpace.trace_object_allocations\n",
			subj->pid, subj->version ? subj->version : "?");
		return EXIT_VERSION;
	case RBP_EINVAL:
		fprintf(stderr, "rbpeek: error: process %d: the kernel refused a uprobe on Ruby's "
			"allocation functions\n", subj->pid);
		return EXIT_INTERNAL;
	default:
		return cli_fail(err, subj);
	}
}

/*
 * Exact sites, but the kernel dropped copies (its ring was full before
 * rbpeek read it): how many, and what that does to the figures.
 */
static void warn_copies_lost(const struct rbp_alloc_status *st, const struct rbp_alloc_count *c)
{
	uint64_t made = st->copies + st->copies_lost;
	double pct = made ? 100.0 * (double)st->copies_lost / (double)made : 0;

	fprintf(stderr, "rbpeek: warning: %llu of %llu stack copies (%.1f%%) were lost: the kernel's "
		"ring was full before rbpeek read it (a busy machine?). The class counts are not "
		"affected; the site shares come from the %llu stacks kept, so they are %s, and sites "
		"that allocate in bursts may be under-represented\n",
		(unsigned long long)st->copies_lost, (unsigned long long)made, pct,
		(unsigned long long)c->samples,
		pct >= 50 ? "much less precise than the rate asked for" : "less precise");
}

static void print_stats(const struct rbp_allocwatch *w)
{
	const struct rbp_alloc_status *st = rbp_allocwatch_status(w);
	const struct rbp_alloc_count *c = rbp_allocwatch_count(w);
	double secs = (double)st->elapsed_ns / 1e9, cpu, rss;

	fprintf(stderr, "rbpeek: %s after %.1f s: %llu allocations, %llu lost (the kernel's "
		"buffer was full), stacks of %llu (%llu without a Ruby frame, %llu unreadable); "
		"%zu probes, %zu uprobe events, %zu threads\n", cli_stop_words(st->stop), secs,
		(unsigned long long)c->allocs, (unsigned long long)st->lost,
		(unsigned long long)c->samples, (unsigned long long)c->no_stack,
		(unsigned long long)c->read_errors, st->probes, st->events, st->threads);
	if (st->lost)
		fprintf(stderr, "hint: lost reports make the counts low; rbpeek did not keep up "
			"(a busy machine?)\n");
	if (st->exact) {
		fprintf(stderr, "rbpeek: sites exact: stacks copied in the kernel at the allocation "
			"(%llu copies, %llu lost, %llu deeper than %d frames: outermost cut)\n",
			(unsigned long long)st->copies, (unsigned long long)st->copies_lost,
			(unsigned long long)c->truncated, st->copy_max_frames);
		if (st->copies_lost)
			warn_copies_lost(st, c);
		if (st->uncounted)
			fprintf(stderr, "rbpeek: warning: %llu allocations of classes the kernel's table "
				"had no room for are in the total but in no class's row\n",
				(unsigned long long)st->uncounted);
		if (st->bpf_runs)
			fprintf(stderr, "rbpeek: eBPF program: %llu runs, %.0f ns each on average\n",
				(unsigned long long)st->bpf_runs,
				(double)st->bpf_run_ns / (double)st->bpf_runs);
	} else if (c->samples) {
		fprintf(stderr, "rbpeek: sites approximate: stacks read %.0f us after the allocation "
			"on average (max %.0f us)\n", (double)c->age_sum / 1e3 / (double)c->samples,
			(double)c->age_max / 1e3);
	}
	if (!cli_own_usage(&cpu, &rss))
		fprintf(stderr, "rbpeek: own CPU %.3f s (%.1f%% of one core)\n", cpu,
			secs > 0 ? 100.0 * cpu / secs : 0);
}

/* What setting up said: the one warning of approximate sites, and eBPF statistics refused. */
static void warn_setup(const struct rbp_alloc_status *st)
{
	if (st->bpf_stats_err)
		fprintf(stderr, "rbpeek: warning: cannot enable eBPF run-time statistics\n");
	if (!st->approx_why[0])
		return;
	fprintf(stderr, "rbpeek: warning: no exact allocation sites: %s; sites are approximate "
		"(stacks read just after the allocation)%s\n", st->approx_why,
		st->approx_err == RBP_EPERM ? "; exact sites need root (CAP_BPF and CAP_PERFMON)" : "");
}

/* Attach, find the probe points, open the uprobes. */
static int setup(const struct alloc_opts *o, struct live *lv, struct rbp_profile *p,
		 struct cli_subject *subj, struct rbp_subject *s, struct rbp_allocwatch **w)
{
	struct rbp_vm_opts vo = { 0 };
	struct rbp_allocwatch_opts wo = {
		.rate = o->rate, .duration_ns = (uint64_t)(o->duration * 1e9), .no_bpf = (uint8_t)o->no_bpf,
		/* $RBPEEK_BPF_STATS=1: time the program (bench/alloc.rb) */
		.bpf_stats = getenv("RBPEEK_BPF_STATS") != NULL,
		.should_stop = cli_should_stop, .suspend = cli_suspend, .progress = progress, .ctx = lv,
	};
	int err;

	if ((err = cli_open_vm(&o->t, &vo, subj, s)))
		return cli_fail(err, subj);
	subj->version = rbp_vm_info(s->vm)->version;
	subj->vo = NULL;   /* vo is this function's */
	if ((err = rbp_allocwatch_open(s, &wo, p, w)))
		return fail_probes(err, subj);
	warn_setup(rbp_allocwatch_status(*w));
	return 0;
}

static int finish(const struct alloc_opts *o, const struct rbp_alloc_count *c,
		  const struct rbp_format *fmt)
{
	const struct rbp_profile *p = c->p;
	char title[512];

	/* the final table on stdout, unless the profile goes there */
	FILE *table = o->output && !strcmp(o->output, "-") ? stderr : stdout;

	print_header(c, table, (double)p->meta.duration_ns / 1e9, 0);
	print_tables(c, table, (size_t)o->top);
	fflush(table);
	if (!c->samples) {
		fprintf(stderr, "rbpeek: error: no allocations were seen (the process allocated no "
			"object meanwhile)\n");
		return EXIT_NOSAMPLES;
	}
	snprintf(title, sizeof(title), "rbpeek alloc: pid %d, %.1f s, %llu allocations, stacks of "
		 "%llu (1 sample = %.1f allocations)", (int)c->pid,
		 (double)p->meta.duration_ns / 1e9, (unsigned long long)c->allocs,
		 (unsigned long long)c->samples, (double)c->allocs / (double)c->samples);
	return cli_write_outputs(p, fmt, o->output, o->raw, 0, o->silent, title);
}

int cmd_alloc(int argc, char **argv)
{
	struct alloc_opts o = { .rate = 1000, .top = 10 };
	struct cli_subject subj = { 0 };
	struct rbp_subject s = { 0 };
	struct rbp_allocwatch *w = NULL;
	struct rbp_profile p;
	struct live lv = { .o = &o };
	const struct rbp_format *fmt;
	int rc, err;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	if ((rc = cli_pick_format("alloc", o.format, o.output, &fmt)))
		return rc;
	if ((err = rbp_profile_init(&p)))
		return cli_fail(err, &subj);
	cli_signals_init();
	/* the output is checked once the target is known to be readable */
	if ((rc = setup(&o, &lv, &p, &subj, &s, &w)) || (rc = cli_check_outputs(o.output, o.raw)))
		goto cleanup;
	p.meta.pid = o.t.pid;
	p.meta.ruby_version = rbp_profile_str(&p, subj.version);
	p.meta.start_unix_ns = (uint64_t)time(NULL) * 1000000000ull;
	lv.tty = !o.silent && isatty(2);
	/*
	 * Stacks are read after the allocation: the sooner, the likelier the
	 * thread is still where it allocated.  A higher priority (when allowed:
	 * root) cuts that delay several-fold on a busy machine; the work it
	 * buys is bounded by --rate.
	 */
	setpriority(PRIO_PROCESS, 0, -15);
	if (!o.silent)
		fprintf(stderr, "rbpeek: watching allocations of process %d (ruby %s)%s\n", o.t.pid,
			subj.version, lv.tty ? "; press Ctrl-C to stop" : "");
	err = rbp_allocwatch_run(w);
	if (lv.lines)   /* the live table gives way to the final one */
		fprintf(stderr, "\033[%dA\r\033[J", lv.lines);
	if (!o.silent)
		print_stats(w);
	rc = err ? cli_fail(err, &subj) : finish(&o, rbp_allocwatch_count(w), fmt);
cleanup:
	rbp_allocwatch_close(w);
	rbp_profile_free(&p);
	rbp_subject_close(&s);
	return rc;
}
