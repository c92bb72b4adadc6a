/*
 * cmd_alloc.c - `rbpeek alloc`: who allocates objects in a running Ruby
 * process, by class and by allocating site, live.
 *
 * Mechanism: a uprobe (perf_event_open on the kernel's uprobe PMU, see
 * src/proc/uprobe.h) on each of Ruby's allocation entry points (see
 * src/ruby/alloc.h), in every thread.  Every call is reported, with the
 * argument registers, so the count per class is exact.  (Reporting only
 * every Nth call, which perf offers, aliases with loops: a loop making 3
 * Strings and 1 Array per round, sampled every 16th call, only ever shows
 * the same String; the cost is the breakpoint trap taken on every call
 * anyway, not the report.)
 *
 * The allocating site is the thread's Ruby stack, for a random subset of
 * the allocations: each with probability p, which follows the allocation
 * rate so that about --rate stacks are taken per second.  A random choice
 * cannot lock onto a loop's rhythm nor favour allocations followed by a
 * pause.  Two ways to take a stack:
 *
 *  - exact (default where the kernel allows eBPF): a small eBPF program on
 *    the same uprobes (src/proc/framecap.h) copies the allocating thread's
 *    control frames and their environment words in the kernel, at the
 *    allocation; p is its threshold, updated every 100 ms; the copies are
 *    decoded by the ordinary walker (rbp_vm_decode_frames).  It keeps a
 *    map tid -> rb_thread_t, refreshed with the thread list.
 *  - approximate (--no-bpf, or bpf() refused: one warning says why): the
 *    stack is read from outside as soon as the report arrives, without
 *    pausing the thread; usually still in the same method, not always at
 *    the same line, and at chance when methods alternate every few
 *    microseconds.  The stats line says how old the reports were.
 *
 * Each stack read becomes a profile sample whose stack is the Ruby stack
 * plus one leaf frame naming the class, so every record format shows who
 * allocates what; one sample stands for (allocations / samples)
 * allocations, said in the title.  Nothing stays attached to the target:
 * the perf events are rbpeek's file descriptors and vanish with it, even on
 * SIGKILL.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
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
#include "proc/target.h"
#include "proc/uprobe.h"
#include "ruby/alloc.h"
#include "ruby/vm.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/vec.h"

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
	int pid;
	double duration;
	uint32_t rate;
	int top;
	const char *output;
	const char *format;
	const char *force_version;
	const char *layout;       /* --layout, NULL when not given */
	int silent;
	const char *raw;          /* --raw-file PATH, "" for --no-raw, NULL: the cache */
	int no_bpf;
};

/* One (site, class) pair and how many stack samples it got. */
struct row {
	uint32_t site;    /* profile frame id of the innermost frame, UINT32_MAX none */
	uint32_t cls;     /* profile frame id of the class leaf */
	uint64_t n;
};

struct run {
	const struct alloc_opts *o;
	struct rbp_target *t;
	struct rbp_vm *vm;
	struct rbp_profile *p;
	const struct rbp_alloc_probe *probes;
	struct rbp_stacks stacks;
	struct rbp_framecap *cap;    /* exact sites: frames copied in the kernel; NULL approximate */
	int prog_fds[RBP_ALLOC_MAX_PROBES];
	struct rbp_stacks threads;   /* the thread list (names, rb_thread_t), for cap */
	uint32_t cap_pick;           /* the threshold the kernel has now */
	uint64_t truncated;          /* copies with frames beyond the copy's limit */
	uint64_t thread_errors;      /* thread list reads that failed */
	char approx_why[512];        /* why sites are approximate, said once the uprobes are in */
	int approx_err;
	struct rbp_hmap frame_ids;   /* mix(label*, path*, line, kind) -> frame id + 1 */
	struct rbp_hmap class_ids;   /* klass VALUE -> class frame id + 1 */
	struct rbp_hmap class_n;     /* class frame id + 1 -> allocations (every one) */
	struct rbp_hmap row_index;   /* mix(site + 1, cls + 1) -> row index + 1 */
	struct row *rows;
	size_t n_rows, cap_rows;
	uint64_t start;              /* CLOCK_MONOTONIC ns */
	uint64_t drain_us;           /* the next wait for reports (DRAIN_US while busy) */
	uint64_t allocs;             /* allocations reported (all of them) */
	uint64_t samples;            /* of which stacks were read (profile samples) */
	uint64_t no_stack;           /* stacks with no Ruby frame (or unreadable) */
	uint64_t read_errors;        /* ... of which the read failed */
	uint32_t pick;               /* a stack is read when random32 < pick */
	uint64_t rng;                /* xorshift64 state */
	uint64_t allocs_at_adapt;    /* allocs when pick was last adapted */
	uint64_t adapt_time;         /* ... and when */
	double tokens;               /* stack reads allowed now (refilled at --rate per
				      * second, at most a tenth of a second's worth):
				      * bounds the work while pick catches up with a
				      * changing allocation rate */
	uint64_t token_time;         /* when tokens were last refilled */
	uint64_t age_sum, age_max;   /* ns from the allocation to its stack read */
	int lines;                   /* lines of the live table on screen */
	int tty;
};

/*
 * How often the rings are drained: mostly the delay between an allocation
 * and the read of its stack.  Shorter costs rbpeek more wakeups, so while
 * nothing arrives the interval doubles up to DRAIN_IDLE_US.
 */
#define DRAIN_US 250
#define DRAIN_IDLE_US 20000

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void print_usage(void)
{
	fputs(alloc_usage, stdout);
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		printf("  %-16s %s\n", f->name, f->desc);
}

static int parse_opts(int argc, char **argv, struct alloc_opts *o)
{
	enum { OPT_SILENT = 256, OPT_FORCE, OPT_LAYOUT, OPT_NO_BPF, OPT_RAWFILE, OPT_NORAW };
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "rate", required_argument, NULL, 'r' },
		{ "top", required_argument, NULL, 't' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "silent", no_argument, NULL, OPT_SILENT },
		{ "force-version", required_argument, NULL, OPT_FORCE },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "no-bpf", no_argument, NULL, OPT_NO_BPF },
		{ "raw-file", required_argument, NULL, OPT_RAWFILE },
		{ "no-raw", no_argument, NULL, OPT_NORAW },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char *end;
	long v;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:p:d:r:t:o:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!(o->pid = cli_parse_pid(optarg)))
				return cli_usage_error("alloc", "invalid PID '%s'", optarg);
			break;
		case 'd':
			o->duration = strtod(optarg, &end);
			if (*end || !(o->duration > 0) || o->duration > 1e7)
				return cli_usage_error("alloc", "invalid duration '%s' (seconds)", optarg);
			break;
		case 'r':
			if (!(o->rate = cli_parse_rate(optarg)))
				return cli_usage_error("alloc", "invalid rate '%s' (1 to 100000 stacks/s)",
						       optarg);
			break;
		case 't':
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 1000)
				return cli_usage_error("alloc", "invalid --top '%s' (1 to 1000)", optarg);
			o->top = (int)v;
			break;
		case 'o': o->output = optarg; break;
		case 'f': o->format = optarg; break;
		case OPT_SILENT: o->silent = 1; break;
		case OPT_FORCE: o->force_version = optarg; break;
		case OPT_LAYOUT:
			if (cli_layout_opt("alloc", optarg, &o->layout))
				return EXIT_USAGE;
			break;
		case OPT_NO_BPF: o->no_bpf = 1; break;
		case OPT_RAWFILE:
			if (cli_raw_file_opt("alloc", optarg, &o->raw))
				return EXIT_USAGE;
			break;
		case OPT_NORAW: o->raw = ""; break;
		case 'h': print_usage(); exit(0);
		default:
			return cli_other_opt("alloc", c, argv, NULL);
		}
	}
	if (optind < argc)
		return cli_usage_error("alloc", "unexpected argument '%s'", argv[optind]);
	if (!o->pid)
		return cli_usage_error("alloc", "give the process to watch: --pid PID");
	return 0;
}

/* ---- samples into the profile ------------------------------------------ */

static int frame_id(struct run *r, const struct rbp_frame *f, uint32_t *id)
{
	uint64_t key = rbp_mix64(rbp_mix64((uintptr_t)f->label, (uintptr_t)f->path),
				 (uint64_t)(uint32_t)f->line << 2 | f->kind), v;
	int err;

	if (rbp_hmap_get(&r->frame_ids, key, &v)) {
		*id = (uint32_t)v - 1;
		return RBP_OK;
	}
	if ((err = rbp_profile_frame(r->p, f->label, f->path, f->line, f->first_line,
				     f->kind == RBP_FRAME_CFUNC ? RBP_PFRAME_CFUNC : RBP_PFRAME_RUBY, id)))
		return err;
	return rbp_hmap_put(&r->frame_ids, key, *id + 1ull);
}

/* The leaf frame naming the class of an allocation ("String"). */
static int class_id(struct run *r, uint64_t klass, uint32_t *id)
{
	uint64_t key = klass ? klass : 1, v;   /* 1 is never a class: stands for 0 */
	int err;

	if (rbp_hmap_get(&r->class_ids, key, &v)) {
		*id = (uint32_t)v - 1;
		return RBP_OK;
	}
	if ((err = rbp_profile_frame(r->p, rbp_alloc_class_name(r->vm, klass), "", 0, 0,
				     RBP_PFRAME_CFUNC, id)))
		return err;
	return rbp_hmap_put(&r->class_ids, key, *id + 1ull);
}

static int count_row(struct run *r, uint32_t site, uint32_t cls)
{
	uint64_t key = rbp_mix64((uint64_t)site + 1, (uint64_t)cls + 1), v;
	int err;

	if (rbp_hmap_get(&r->row_index, key, &v)) {
		r->rows[v - 1].n++;
		return RBP_OK;
	}
	if ((err = rbp_grow(&r->rows, &r->cap_rows, r->n_rows + 1, sizeof(*r->rows))))
		return err;
	r->rows[r->n_rows++] = (struct row){ site, cls, 1 };
	return rbp_hmap_put(&r->row_index, key, r->n_rows);
}

/* The thread's name as record shows it: Ruby's name, else the OS one. */
static const char *thread_name(struct run *r, const struct rbp_thread *th, pid_t tid,
			       struct rbp_task_info *ti)
{
	const char *name = th ? rbp_thread_ruby_name(th) : NULL;

	if (name)
		return name;
	return rbp_task_info(r->t->pid, tid, ti) ? "" : ti->comm;
}

static uint32_t random32(struct run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return (uint32_t)(r->rng >> 32);
}

/*
 * Every 100 ms: the chance of reading a stack, so that about o->rate
 * stacks per second are read at the allocation rate since the last time.
 */
static void adapt_pick(struct run *r, uint64_t now)
{
	double secs = (double)(now - r->adapt_time) / 1e9;
	double rate = secs > 0 ? (double)(r->allocs - r->allocs_at_adapt) / secs : 0;
	double p = rate > r->o->rate ? r->o->rate / rate : 1.0;

	r->pick = p >= 1.0 ? UINT32_MAX : (uint32_t)(p * 4294967295.0);
	r->allocs_at_adapt = r->allocs;
	r->adapt_time = now;
	if (r->cap && r->pick != r->cap_pick && !rbp_framecap_set_pick(r->cap, r->pick))
		r->cap_pick = r->pick;
}

static void refill(struct run *r, uint64_t now)
{
	double cap = r->o->rate / 10.0 > 1 ? r->o->rate / 10.0 : 1;

	r->tokens += (double)(now - r->token_time) / 1e9 * r->o->rate;
	if (r->tokens > cap)
		r->tokens = cap;
	r->token_time = now;
}

static int count_class(struct run *r, uint32_t cls)
{
	uint64_t n = 0;

	rbp_hmap_get(&r->class_n, (uint64_t)cls + 1, &n);
	return rbp_hmap_put(&r->class_n, (uint64_t)cls + 1, n + 1);
}

/*
 * A profile sample: the stack of th (NULL: none could be had) with the
 * class leaf on top, for an allocation by thread tid at time_ns.
 */
static int add_sample(struct run *r, const struct rbp_thread *th, pid_t tid, uint64_t time_ns,
		      uint32_t cls)
{
	struct rbp_task_info ti;
	uint32_t node = 0, id, site = UINT32_MAX, idx;
	int err;

	if (th && !th->err && th->n_frames) {
		const struct rbp_frame *f = r->stacks.frames + th->first_frame;
		for (size_t i = th->n_frames; i-- > 0;) {
			if ((err = frame_id(r, &f[i], &id)) ||
			    (err = rbp_profile_child(r->p, node, id, &node)))
				return err;
		}
		site = id;
	} else {
		r->no_stack++;
	}
	if ((err = rbp_profile_child(r->p, node, cls, &node)) ||
	    (err = rbp_profile_thread(r->p, (int32_t)r->t->pid, tid,
				      thread_name(r, th, tid, &ti), &idx)) ||
	    (err = rbp_profile_add(r->p, time_ns > r->start ? time_ns - r->start : 0, idx,
				   node, 0)))
		return err;
	r->samples++;
	return count_row(r, site, cls);
}

/* Approximate sites: read the allocating thread's stack now, after the allocation. */
static int add_stack_sample(struct run *r, const struct rbp_uprobe_sample *s, uint32_t cls)
{
	const struct rbp_thread *th = NULL;
	int err;

	err = rbp_vm_read_thread_stack(r->vm, s->tid, &r->stacks);
	uint64_t now = now_ns();
	uint64_t age = now > s->time_ns ? now - s->time_ns : 0;
	r->age_sum += age;
	if (age > r->age_max)
		r->age_max = age;
	if (err == RBP_ENOMEM)
		return err;
	if (err)
		r->read_errors++;
	else if (r->stacks.n_threads)
		th = &r->stacks.threads[0];
	return add_sample(r, th, s->tid, s->time_ns, cls);
}

/* The thread list's entry for tid (for its name), or NULL. */
static const struct rbp_thread *listed_thread(const struct run *r, pid_t tid)
{
	for (size_t i = 0; i < r->threads.n_threads; i++)
		if (r->threads.threads[i].tid == tid)
			return &r->threads.threads[i];
	return NULL;
}

/* Exact sites: a copy the kernel made at the allocation, decoded. */
static int on_copy(void *ctx, const struct rbp_framecap_record *c)
{
	struct run *r = ctx;
	struct rbp_frame_copy fc = { c->tid, c->frames, c->env, c->n_frames };
	uint32_t cls;
	int err;

	if (r->tokens < 1 || c->probe >= RBP_ALLOC_MAX_PROBES)
		return RBP_OK;   /* over --rate while the kernel's threshold catches up */
	r->tokens -= 1;
	if ((err = class_id(r, c->arg, &cls)))
		return err;
	r->truncated += c->truncated;
	err = rbp_vm_decode_frames(r->vm, &fc, &r->stacks);
	if (err == RBP_ENOMEM)
		return err;
	struct rbp_thread *th = err || !r->stacks.n_threads ? NULL : &r->stacks.threads[0];
	const struct rbp_thread *known = listed_thread(r, c->tid);
	if (th && known) {
		th->name = known->name;
		th->is_main = known->is_main;
	}
	if (err)
		r->read_errors++;
	return add_sample(r, th, c->tid, c->time_ns, cls);
}

/* The thread list, and the kernel's map tid -> rb_thread_t from it. */
static int update_threads(struct run *r)
{
	pid_t tids[512];
	uint64_t addrs[512];
	size_t n = 0;
	int err;

	if ((err = rbp_vm_read_threads(r->vm, &r->threads))) {
		r->thread_errors++;
		return err == RBP_ENOMEM ? err : RBP_OK;   /* next time */
	}
	for (size_t i = 0; i < r->threads.n_threads && n < 512; i++)
		if (r->threads.threads[i].tid && !r->threads.threads[i].err) {
			tids[n] = r->threads.threads[i].tid;
			addrs[n++] = r->threads.threads[i].addr;
		}
	return rbp_framecap_set_threads(r->cap, tids, addrs, n);
}

static int on_sample(void *ctx, const struct rbp_uprobe_sample *s)
{
	struct run *r = ctx;
	uint32_t cls;
	int err;

	if ((err = class_id(r, s->args[r->probes[s->probe].klass_arg], &cls)) ||
	    (err = count_class(r, cls)))
		return err;
	r->allocs++;
	if (r->cap)
		return RBP_OK;   /* stacks come from the kernel's copies (on_copy) */
	if ((r->pick != UINT32_MAX && random32(r) >= r->pick) || r->tokens < 1)
		return RBP_OK;
	r->tokens -= 1;
	return add_stack_sample(r, s, cls);
}

/* ---- tables -------------------------------------------------------------- */

struct tally {
	uint32_t key;     /* frame id (class or site) */
	uint32_t cls;     /* sites: the class allocated most there */
	uint64_t n, cls_n;
};

static int cmp_tally(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;
	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Allocations per class (exact), largest first. */
static struct tally *tally_classes(const struct run *r, size_t *n)
{
	struct tally *t = calloc(r->class_n.len + 1, sizeof(*t));

	*n = 0;
	for (size_t i = 0; t && i < r->class_n.cap; i++)
		if (r->class_n.keys[i])
			t[(*n)++] = (struct tally){ .key = (uint32_t)(r->class_n.keys[i] - 1),
						    .n = r->class_n.vals[i] };
	if (t)
		qsort(t, *n, sizeof(*t), cmp_tally);
	return t;
}

/* Stack samples per site, with the class most allocated there, largest first. */
static struct tally *tally_sites(const struct run *r, size_t *n)
{
	struct tally *t = calloc(r->n_rows + 1, sizeof(*t));
	struct rbp_hmap index = { 0 };
	uint64_t v;

	*n = 0;
	for (size_t i = 0; t && i < r->n_rows; i++) {
		const struct row *w = &r->rows[i];
		struct tally *e;
		if (rbp_hmap_get(&index, (uint64_t)w->site + 1, &v)) {
			e = &t[v - 1];
		} else {
			e = &t[(*n)++];
			e->key = w->site;
			rbp_hmap_put(&index, (uint64_t)w->site + 1, *n);
		}
		e->n += w->n;
		if (w->n > e->cls_n) {
			e->cls = w->cls;
			e->cls_n = w->n;
		}
	}
	rbp_hmap_clear(&index);
	if (t)
		qsort(t, *n, sizeof(*t), cmp_tally);
	return t;
}

/*
 * The class table (exact counts) and the site table (shares of the stack
 * samples, scaled to all allocations: "~").  Returns the lines printed.
 */
static int print_tables(const struct run *r, FILE *out, size_t top)
{
	struct tally *t;
	size_t n;
	int lines = 2;

	if ((t = tally_classes(r, &n))) {
		fprintf(out, "  %12s  %6s  %s\n", "allocations", "share", "class");
		for (size_t i = 0; i < n && i < top; i++, lines++)
			fprintf(out, "  %12llu  %5.1f%%  %s\n", (unsigned long long)t[i].n,
				100.0 * (double)t[i].n / (double)r->allocs, r->p->frames[t[i].key].label);
		free(t);
	}
	if ((t = tally_sites(r, &n))) {
		double scale = r->samples ? (double)r->allocs / (double)r->samples : 0;
		fprintf(out, "  %12s  %6s  %s\n", "allocations", "share",
			"site (innermost frame)  [class allocated most there]");
		for (size_t i = 0; i < n && i < top; i++, lines++) {
			char name[512];
			if (t[i].key == UINT32_MAX)
				snprintf(name, sizeof(name), "(no Ruby frame)");
			else
				rbp_frame_name(&r->p->frames[t[i].key], name, sizeof(name));
			fprintf(out, " ~%12.0f  %5.1f%%  %s  [%s %.0f%%]\n", (double)t[i].n * scale,
				100.0 * (double)t[i].n / (double)r->samples, name,
				r->p->frames[t[i].cls].label, 100.0 * (double)t[i].cls_n / (double)t[i].n);
		}
		free(t);
	}
	return lines;
}

static void print_header(const struct run *r, FILE *out, double secs, int live)
{
	fprintf(out, "rbpeek alloc: pid %d, %.1f s, %llu allocations (%.0f/s), sites from %llu "
		"stacks%s\n", (int)r->t->pid, secs, (unsigned long long)r->allocs,
		secs > 0 ? (double)r->allocs / secs : 0.0, (unsigned long long)r->samples,
		live ? "  Ctrl-C to stop" : "");
}

/*
 * The live table, redrawn in place: built in memory, then written with
 * each line cut to the terminal's width and as many rows as its height
 * allows, so that moving the cursor up by the lines printed lands where
 * the table began.
 */
static void redraw(struct run *r, double secs)
{
	struct winsize ws = { 0 };
	char *buf = NULL;
	size_t len = 0, cols = 80, rows = 24;
	FILE *mem;

	if (!ioctl(2, TIOCGWINSZ, &ws) && ws.ws_col && ws.ws_row)
		cols = ws.ws_col, rows = ws.ws_row;
	size_t top = rows > 8 ? (rows - 5) / 2 : 1;
	if (top > (size_t)r->o->top)
		top = (size_t)r->o->top;
	if (!(mem = open_memstream(&buf, &len)))
		return;
	print_header(r, mem, secs, 1);
	print_tables(r, mem, top);
	fclose(mem);
	if (r->lines)
		fprintf(stderr, "\033[%dA", r->lines);
	fputs("\r\033[J", stderr);
	r->lines = 0;
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		nl = strchr(line, '\n');
		size_t n = (size_t)(nl - line);
		fprintf(stderr, "%.*s\n", (int)(n < cols - 1 ? n : cols - 1), line);
		r->lines++;
	}
	free(buf);
	fflush(stderr);
}

static void progress(struct run *r)
{
	double secs = (double)(now_ns() - r->start) / 1e9;

	if (r->o->silent)
		return;
	if (!r->tty) {
		fprintf(stderr, "rbpeek: %.0f s: %llu allocations, %llu stacks\n", secs,
			(unsigned long long)r->allocs, (unsigned long long)r->samples);
		return;
	}
	redraw(r, secs);
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

/* Read samples until Ctrl-C, the duration, or the target's exit. */
static int watch(struct run *r, struct rbp_uprobes *u, const char **why)
{
	uint64_t deadline = r->o->duration > 0 ? r->start + (uint64_t)(r->o->duration * 1e9) : 0;
	uint64_t next_refresh = r->start + 200000000ull, next_progress = r->start + 1000000000ull;
	int err;

	*why = "stopped";
	while (!cli_stop_signal()) {
		cli_suspend_if_pending(NULL, NULL);   /* Ctrl-Z: nothing is held here */
		uint64_t now = now_ns();
		if (deadline && now >= deadline) {
			*why = "duration reached";
			break;
		}
		refill(r, now);
		uint64_t before = r->allocs;
		if ((err = rbp_uprobes_read(u, r->drain_us, on_sample, r)) ||
		    (r->cap && (err = rbp_framecap_read(r->cap, on_copy, r))))
			return err;
		r->drain_us = r->allocs != before ? DRAIN_US :
			      r->drain_us * 2 > DRAIN_IDLE_US ? DRAIN_IDLE_US : r->drain_us * 2;
		now = now_ns();
		if (now >= r->adapt_time + 100000000ull)
			adapt_pick(r, now);
		if (now >= next_refresh) {
			err = rbp_uprobes_refresh(u);
			if (err == RBP_ENOPROC || kill(r->t->pid, 0)) {
				rbp_uprobes_read(u, 0, on_sample, r);   /* the last samples */
				if (r->cap)
					rbp_framecap_read(r->cap, on_copy, r);
				*why = "process exited";
				break;
			}
			if (r->cap && (err = update_threads(r)))
				return err;
			next_refresh = now + 200000000ull;
		}
		if (now >= next_progress) {
			progress(r);
			next_progress = now + 1000000000ull;
		}
	}
	return RBP_OK;
}

static void print_stats(const struct run *r, const struct rbp_uprobes *u, const char *why,
			size_t n_probes)
{
	struct rbp_uprobe_stats us;
	struct rusage ru;
	double secs = (double)(now_ns() - r->start) / 1e9;

	rbp_uprobes_stats(u, &us);
	fprintf(stderr, "rbpeek: %s after %.1f s: %llu allocations, %llu lost (the kernel's "
		"buffer was full), stacks of %llu (%llu without a Ruby frame, %llu unreadable); "
		"%zu probes x %zu threads\n", why, secs, (unsigned long long)r->allocs,
		(unsigned long long)us.lost, (unsigned long long)r->samples,
		(unsigned long long)r->no_stack, (unsigned long long)r->read_errors, n_probes,
		us.threads);
	if (us.lost)
		fprintf(stderr, "hint: lost reports make the counts low; rbpeek did not keep up "
			"(a busy machine?)\n");
	if (r->cap) {
		struct rbp_framecap_stats cs;
		rbp_framecap_stats(r->cap, &cs);
		fprintf(stderr, "rbpeek: sites exact: stacks copied in the kernel at the allocation "
			"(%llu copies, %llu lost, %llu deeper than %d frames: outermost cut)\n",
			(unsigned long long)cs.records, (unsigned long long)cs.lost,
			(unsigned long long)r->truncated, RBP_FRAMECAP_MAX_FRAMES);
		if (cs.runs)
			fprintf(stderr, "rbpeek: eBPF program: %llu runs, %.0f ns each on average\n",
				(unsigned long long)cs.runs, (double)cs.run_ns / (double)cs.runs);
	} else if (r->samples) {
		fprintf(stderr, "rbpeek: sites approximate: stacks read %.0f us after the allocation "
			"on average (max %.0f us)\n", (double)r->age_sum / 1e3 / (double)r->samples,
			(double)r->age_max / 1e3);
	}
	if (!getrusage(RUSAGE_SELF, &ru)) {
		double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		fprintf(stderr, "rbpeek: own CPU %.3f s (%.1f%% of one core)\n", cpu,
			secs > 0 ? 100.0 * cpu / secs : 0);
	}
}

/* The one warning of approximate sites. */
static void warn_approximate(const struct run *r)
{
	const char *why = r->approx_why;
	int err = r->approx_err;

	if (!why[0])
		return;
	fprintf(stderr, "rbpeek: warning: no exact allocation sites: %s; sites are approximate "
		"(stacks read just after the allocation)%s\n", why,
		err == RBP_EPERM ? "; exact sites need root (CAP_BPF and CAP_PERFMON)" : "");
}

/*
 * Exact sites: load the frame-copying eBPF program (one per probe) and
 * fill its thread map, before the uprobes exist (loading takes a while,
 * and the uprobes' rings are not drained meanwhile).  Where the kernel
 * refuses, say why once and go on with approximate sites (r->cap NULL).
 * Only RBP_ENOMEM is an error.
 */
static int setup_copies(struct run *r, const struct rbp_alloc_probe *probes, size_t n)
{
	struct rbp_framecap_layout L;
	uint8_t regs[RBP_ALLOC_MAX_PROBES];
	char why[512];
	int err;

	if (r->o->no_bpf) {
		snprintf(r->approx_why, sizeof(r->approx_why), "--no-bpf given");
		return RBP_OK;
	}
	rbp_vm_framecap_layout(r->vm, &L);
	for (size_t i = 0; i < n; i++)
		regs[i] = probes[i].klass_arg;
	err = rbp_framecap_open(&L, regs, n, &r->cap, why, sizeof(why));
	for (size_t i = 0; !err && i < n; i++)
		r->prog_fds[i] = rbp_framecap_prog_fd(r->cap, i);
	if (!err && !(err = update_threads(r))) {
		/* $RBPEEK_BPF_STATS=1: time the program (bench/alloc.rb) */
		if (getenv("RBPEEK_BPF_STATS") && rbp_framecap_enable_stats(r->cap))
			fprintf(stderr, "rbpeek: warning: cannot enable eBPF run-time statistics\n");
		return RBP_OK;
	}
	if (r->cap)
		snprintf(why, sizeof(why), "filling the thread map failed: %s", rbp_strerror(err));
	rbp_framecap_close(r->cap);
	r->cap = NULL;
	if (err == RBP_ENOMEM)
		return err;
	snprintf(r->approx_why, sizeof(r->approx_why), "%s", why);
	r->approx_err = err;
	return RBP_OK;
}

/*
 * The program on every uprobe event.  Should the kernel refuse, the
 * uprobes are reopened without it (a half-attached program must not
 * stay) and sites are approximate.
 */
static int attach_copies(struct run *r, const struct rbp_uprobe_spec *specs, size_t n,
			 struct rbp_uprobes **u)
{
	int err;

	if (!r->cap || !(err = rbp_uprobes_set_bpf(*u, r->prog_fds)))
		return RBP_OK;
	snprintf(r->approx_why, sizeof(r->approx_why),
		 "attaching the BPF program to the uprobes failed: %s", rbp_strerror(err));
	r->approx_err = err;
	rbp_framecap_close(r->cap);
	r->cap = NULL;
	rbp_uprobes_close(*u);
	*u = NULL;
	return rbp_uprobes_open(r->t->pid, specs, n, 1, u);
}

/* Attach, find the probe points, open the uprobes. */
static int setup(struct run *r, struct alloc_opts *o, struct cli_subject *subj,
		 struct rbp_alloc_probe *probes, size_t *n_probes, struct rbp_uprobes **u)
{
	struct rbp_vm_opts vo = { .force_version = o->force_version };
	struct rbp_uprobe_spec specs[RBP_ALLOC_MAX_PROBES];
	int err;

	cli_vm_env(&vo, o->layout);
	if ((err = rbp_target_open_pid(o->pid, &r->t)) || (err = rbp_vm_attach(r->t, &vo, &r->vm))) {
		subj->version = vo.found_version;
		subj->forced = o->force_version;
		subj->vo = &vo;
		return cli_fail(err, subj);
	}
	cli_layout_warning(r->vm);
	subj->version = rbp_vm_info(r->vm)->version;
	if ((err = rbp_uprobe_available()) ||
	    (err = rbp_alloc_probes(r->vm, probes, RBP_ALLOC_MAX_PROBES, n_probes)))
		return fail_probes(err, subj);
	for (size_t i = 0; i < *n_probes; i++)
		specs[i] = (struct rbp_uprobe_spec){ probes[i].path, probes[i].offset };
	if ((err = setup_copies(r, probes, *n_probes)))
		return cli_fail(err, subj);
	if ((err = rbp_uprobes_open(o->pid, specs, *n_probes, 1, u)) ||
	    (err = attach_copies(r, specs, *n_probes, u)))
		return fail_probes(err, subj);
	warn_approximate(r);
	return 0;
}

static int finish(struct run *r, const struct rbp_format *fmt)
{
	char title[512];
	const struct alloc_opts *o = r->o;

	/* the final table on stdout, unless the profile goes there */
	FILE *table = o->output && !strcmp(o->output, "-") ? stderr : stdout;

	print_header(r, table, (double)r->p->meta.duration_ns / 1e9, 0);
	print_tables(r, table, (size_t)r->o->top);
	fflush(table);
	if (!r->samples) {
		fprintf(stderr, "rbpeek: error: no allocations were seen (the process allocated no "
			"object meanwhile)\n");
		return EXIT_NOSAMPLES;
	}
	snprintf(title, sizeof(title), "rbpeek alloc: pid %d, %.1f s, %llu allocations, stacks of "
		 "%llu (1 sample = %.1f allocations)", (int)r->t->pid,
		 (double)r->p->meta.duration_ns / 1e9, (unsigned long long)r->allocs,
		 (unsigned long long)r->samples, (double)r->allocs / (double)r->samples);
	return cli_write_outputs(r->p, fmt, o->output, o->raw, 0, o->silent, title);
}

int cmd_alloc(int argc, char **argv)
{
	struct alloc_opts o = { .rate = 1000, .top = 10 };
	struct cli_subject subj = { 0 };
	struct rbp_alloc_probe probes[RBP_ALLOC_MAX_PROBES];
	struct rbp_uprobes *u = NULL;
	struct rbp_profile p;
	struct run r = { .o = &o, .p = &p, .probes = probes };
	const struct rbp_format *fmt;
	size_t n_probes = 0;
	const char *why;
	int rc, err;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	if ((rc = cli_pick_format("alloc", o.format, o.output, &fmt)))
		return rc;
	if ((err = rbp_profile_init(&p)))
		return cli_fail(err, &subj);
	subj.pid = o.pid;
	cli_signals_init();
	/* the output is checked once the target is known to be readable */
	if ((rc = setup(&r, &o, &subj, probes, &n_probes, &u)) || (rc = cli_check_output(o.output)) ||
	    (o.raw && *o.raw && (rc = cli_check_output(o.raw))))
		goto cleanup;
	p.meta.pid = o.pid;
	p.meta.ruby_version = rbp_profile_str(&p, subj.version);
	p.meta.start_unix_ns = (uint64_t)time(NULL) * 1000000000ull;
	r.tty = !o.silent && isatty(2);
	/*
	 * Stacks are read after the allocation: the sooner, the likelier the
	 * thread is still where it allocated.  A higher priority (when allowed:
	 * root) cuts that delay several-fold on a busy machine; the work it
	 * buys is bounded by --rate.
	 */
	setpriority(PRIO_PROCESS, 0, -15);
	if (!o.silent)
		fprintf(stderr, "rbpeek: watching allocations of process %d (ruby %s)%s\n", o.pid,
			subj.version, r.tty ? "; press Ctrl-C to stop" : "");
	r.start = now_ns();
	r.rng = r.start | 1;
	r.pick = UINT32_MAX;   /* every stack until the rate is known */
	r.adapt_time = r.token_time = r.start;
	/*
	 * The kernel copies a stack when its random number is below its
	 * threshold: until the allocation rate is known (100 ms), assume a
	 * busy 200,000 allocations/s rather than flood the rings.
	 */
	if (r.cap) {
		double p0 = o.rate / 200000.0;
		r.cap_pick = p0 >= 1.0 ? UINT32_MAX : (uint32_t)(p0 * 4294967295.0);
		if ((err = rbp_framecap_set_pick(r.cap, r.cap_pick)))
			r.cap_pick = 0;
	}
	r.drain_us = DRAIN_US;
	r.tokens = 1;
	err = watch(&r, u, &why);
	p.meta.duration_ns = now_ns() - r.start;
	if (r.lines)   /* the live table gives way to the final one */
		fprintf(stderr, "\033[%dA\r\033[J", r.lines);
	if (!o.silent)
		print_stats(&r, u, why, n_probes);
	rbp_uprobes_close(u);   /* the probes leave the target before anything else */
	u = NULL;
	rbp_framecap_close(r.cap);
	r.cap = NULL;
	rc = err ? cli_fail(err, &subj) : finish(&r, fmt);
cleanup:
	rbp_uprobes_close(u);
	rbp_framecap_close(r.cap);
	rbp_stacks_free(&r.stacks);
	rbp_stacks_free(&r.threads);
	rbp_hmap_clear(&r.frame_ids);
	rbp_hmap_clear(&r.class_ids);
	rbp_hmap_clear(&r.class_n);
	rbp_hmap_clear(&r.row_index);
	free(r.rows);
	rbp_profile_free(&p);
	rbp_vm_free(r.vm);
	rbp_target_close(r.t);
	return rc;
}
