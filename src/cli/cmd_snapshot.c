/*
 * cmd_snapshot.c - `rbpeek snapshot`: every thread's Ruby stack, once.
 *
 * Live processes are paused for the read (ptrace SEIZE + INTERRUPT of every
 * thread) so the stacks are consistent, unless --nonblocking.  Thread
 * scheduler states are read before pausing (a paused thread shows 't').
 * Termination signals are held while the target is paused, so Ctrl-C can
 * never leave it stopped.  With --native each thread's native stack is
 * unwound while paused and merged into its Ruby stack (ruby/merge.c).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "profile/procset.h"
#include "profile/subject.h"
#include "ruby/gc.h"
#include "ruby/vm.h"
#include "util/err.h"
#include "util/json.h"
#include "util/text.h"

static const char snapshot_usage[] =
	"usage: rbpeek snapshot --pid PID [--subprocesses] [--nonblocking | --native] [--json] [--no-gc]\n"
	"       rbpeek snapshot --core FILE [--json] [--no-gc]\n"
	"\n"
	"Print the Ruby stack of every thread: innermost frame first, one per line,\n"
	"as 'label (path:line)'.  A thread running the garbage collector shows\n"
	"'(GC: marking)', '(GC: sweeping)' or '(GC)' on top.\n"
	"\n"
	"  -p, --pid PID           the Ruby process to inspect\n"
	"  -c, --core FILE         a core file of a Ruby process (gcore, or a kernel dump)\n"
	"      --sysroot DIR       with --core: find the process's mapped files under DIR\n"
	"  -j, --json              print one JSON object instead of text\n"
	"  -n, --nonblocking       read without pausing the process (a stack that changed\n"
	"                          while it was read is left out)\n"
	"      --no-gc             no GC frame on top of the thread running the collector\n"
	"      --native            also unwind native stacks: C functions a C method calls\n"
	"                          (extensions, libc) appear above it, marked [native]\n"
	"      --subprocesses      also every Ruby process descended from PID, one after another\n"
	"                          with its command line (JSON: {\"processes\": [{\"cmdline\":...}]})\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n";

struct snapshot_opts {
	struct cli_target_opts t;
	int json;
	int nonblocking;
	int no_gc;
	int native;
	int subprocesses;
};

/* OS-level facts about one thread, read before pausing. */
struct os_thread {
	char state;        /* from /proc; 0 when unknown (core files) */
	char comm[17];
};

static const char *state_name(char st)
{
	switch (st) {
	case 'R': return "running";
	case 'S': case 'I': return "sleeping";
	case 'D': return "disk-sleep";
	case 'T': case 't': return "stopped";
	case 'Z': case 'X': return "zombie";
	default: return "unknown";
	}
}

static int parse_opts(int argc, char **argv, struct snapshot_opts *o)
{
	static const struct option longopts[] = {
		CLI_OPTS_TARGET,
		{ "json", no_argument, NULL, 'j' },
		{ "nonblocking", no_argument, NULL, 'n' },
		{ "native", no_argument, NULL, 'N' },
		{ "no-gc", no_argument, NULL, 'G' },
		{ "subprocesses", no_argument, NULL, 'P' },
		CLI_OPTS_END
	};
	struct cli_parser cp = { .cmd = "snapshot", .usage = snapshot_usage,
		.shortopts = ":p:c:jnh", .longopts = longopts, .t = &o->t };
	int c;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 'j': o->json = 1; break;
		case 'n': o->nonblocking = 1; break;
		case 'N': o->native = 1; break;
		case 'G': o->no_gc = 1; break;
		case 'P': o->subprocesses = 1; break;
		}
	}
	if (cli_target_check("snapshot", argc, argv, &o->t))
		return EXIT_USAGE;
	if (o->native && !rbp_subject_native_available())
		return cli_no_native();
	if (o->native && o->t.core)
		return cli_usage_error("snapshot", "--native needs a live process (--pid), not a core file");
	if (o->native && o->nonblocking)
		return cli_usage_error("snapshot", "--native cannot be used with --nonblocking "
				       "(native stacks are read while the process is paused)");
	if (o->subprocesses && o->t.core)
		return cli_usage_error("snapshot", "--subprocesses needs --pid");
	return 0;
}

static void match_os_threads(const struct rbp_stacks *s, const struct rbp_os_threads *ot,
			     struct os_thread *os)
{
	for (size_t i = 0; i < s->n_threads; i++) {
		memset(&os[i], 0, sizeof(os[i]));
		for (size_t j = 0; j < ot->n; j++) {
			if (s->threads[i].tid && ot->tids[j] == s->threads[i].tid) {
				os[i].state = ot->info[j].state;
				memcpy(os[i].comm, ot->info[j].comm, sizeof(os[i].comm));
			}
		}
	}
}

/* Thread#name, else "main" for the main thread, else the OS name. */
static const char *thread_name(const struct rbp_thread *t, const struct os_thread *os)
{
	const char *name = rbp_thread_ruby_name(t);
	return name ? name : os->comm[0] ? os->comm : NULL;
}

/* Names from the target, control characters escaped (util/text.h). */
static void put_text(const char *s)
{
	rbp_text_put(stdout, s);
}

static void print_text(const struct rbp_stacks *s, const struct os_thread *os,
		       int pid, const char *version, const char *cmdline, int no_gc)
{
	printf("Process %d: ruby ", pid);
	put_text(version);
	printf(", %zu thread%s\n", s->n_threads, s->n_threads == 1 ? "" : "s");
	if (cmdline) {
		fputs("Command: ", stdout);
		put_text(cmdline);
		putchar('\n');
	}
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct rbp_thread *t = &s->threads[i];
		const char *name = thread_name(t, &os[i]);
		printf("\nThread %d", (int)t->tid);
		if (name) {
			fputs(" \"", stdout);
			put_text(name);
			putchar('"');
		}
		printf(" (%s%s)\n", t->has_gvl ? "holds GVL, " : "", state_name(os[i].state));
		if (t->err)
			printf("    (stack unreadable: %s)\n", rbp_strerror(t->err));
		if (t->gc && !no_gc)
			printf("    %s\n", rbp_gc_label(t->gc));
		for (size_t j = 0; j < t->n_frames; j++) {
			const struct rbp_frame *f = &s->frames[t->first_frame + j];
			printf("    %s", f->kind == RBP_FRAME_NATIVE ? "[native] " : "");
			put_text(f->label);
			if (f->path[0]) {
				fputs(" (", stdout);
				put_text(f->path);
				printf(":%d)", (int)f->line);
			}
			putchar('\n');
		}
	}
}

static void print_json(const struct rbp_stacks *s, const struct os_thread *os,
		       int pid, const char *version, const char *cmdline, int no_gc)
{
	printf("{\"pid\":%d,\"ruby_version\":", pid);
	rbp_json_string(stdout, version);
	if (cmdline) {
		printf(",\"cmdline\":");
		rbp_json_string(stdout, cmdline);
	}
	printf(",\"threads\":[");
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct rbp_thread *t = &s->threads[i];
		printf("%s{\"tid\":%d,\"name\":", i ? "," : "", (int)t->tid);
		rbp_json_string(stdout, thread_name(t, &os[i]));
		printf(",\"main\":%s,\"gvl\":%s,\"state\":\"%s\"", t->is_main ? "true" : "false",
		       t->has_gvl ? "true" : "false", state_name(os[i].state));
		if (t->err) {
			printf(",\"error\":");
			rbp_json_string(stdout, rbp_strerror(t->err));
		}
		printf(",\"frames\":[");
		int gc = t->gc && !no_gc;
		if (gc) {
			printf("{\"label\":");
			rbp_json_string(stdout, rbp_gc_label(t->gc));
			printf(",\"path\":\"\",\"line\":0,\"kind\":\"gc\"}");
		}
		for (size_t j = 0; j < t->n_frames; j++) {
			const struct rbp_frame *f = &s->frames[t->first_frame + j];
			printf("%s{\"label\":", j || gc ? "," : "");
			rbp_json_string(stdout, f->label);
			printf(",\"path\":");
			rbp_json_string(stdout, f->path);
			printf(",\"line\":%d,\"kind\":\"%s\"}", (int)f->line,
			       f->kind == RBP_FRAME_CFUNC ? "cfunc" :
			       f->kind == RBP_FRAME_NATIVE ? "native" : "ruby");
		}
		printf("]}");
	}
	printf("]}\n");
}

/*
 * Print one process's stacks (read by the caller: err is the read's),
 * after `before` (a separator), with its command line when cmdline is
 * non-NULL (--subprocesses: which process is which); nothing is printed on
 * failure.  Frees s and ot.  An RBP_E* code on failure.
 */
static int snap_print(int err, struct rbp_stacks *s, struct rbp_os_threads *ot, int pid,
		      const char *version, const struct snapshot_opts *o, const char *before,
		      const char *cmdline)
{
	struct os_thread *os = NULL;

	if (!err && !(os = calloc(s->n_threads + 1, sizeof(*os))))
		err = RBP_ENOMEM;
	if (!err) {
		match_os_threads(s, ot, os);
		fputs(before, stdout);
		if (o->json)
			print_json(s, os, pid, version, cmdline, o->no_gc);
		else
			print_text(s, os, pid, version, cmdline, o->no_gc);
	}
	free(os);
	rbp_os_threads_free(ot);
	rbp_stacks_free(s);
	return err;
}

/* The one process s: read, then printed. */
static int snap_one(struct rbp_subject *sub, const struct snapshot_opts *o)
{
	struct rbp_stacks s = { 0 };
	struct rbp_os_threads ot = { 0 };
	int err = rbp_subject_snapshot(sub, o->native, o->nonblocking, &s, &ot);

	return snap_print(err, &s, &ot, rbp_subject_pid(sub), rbp_vm_info(sub->vm)->version, o, "",
			  NULL);
}

/*
 * --subprocesses: the root (when Ruby) and every Ruby descendant found by
 * one scan, in the set's order.  Processes that exit meanwhile are left
 * out; fails only when no process could be printed.
 */
static int snap_tree(struct rbp_subject *sub, struct rbp_vm_opts *vo, const struct snapshot_opts *o)
{
	struct rbp_procset *ps = NULL;
	struct timespec now;
	size_t printed = 0;
	int err, last = RBP_ENOTRUBY;

	if ((err = rbp_subject_procset(sub, vo, &ps)))
		return err;
	clock_gettime(CLOCK_MONOTONIC, &now);
	err = rbp_procset_refresh(ps, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
	for (size_t i = 0; !err && i < rbp_procset_count(ps); i++) {
		struct rbp_procset_member *m = rbp_procset_member(ps, i);
		const char *before = printed ? (o->json ? "," : "\n") : o->json ? "{\"processes\":[" : "";
		char cmdline[512];   /* now, not at attach: a worker may have retitled itself */
		struct rbp_stacks s = { 0 };
		struct rbp_os_threads ot = { 0 };
		rbp_process_cmdline(m->pid, cmdline, sizeof(cmdline));
		last = rbp_member_snapshot(m, o->native, o->nonblocking, &s, &ot);
		last = snap_print(last, &s, &ot, (int)m->pid, rbp_vm_info(m->vm)->version, o, before,
				  cmdline);
		if (last == RBP_ENOMEM)
			err = last;
		else if (!last)
			printed++;
	}
	if (o->json && printed)
		fputs("]}\n", stdout);
	rbp_procset_free(ps);
	return err ? err : printed ? RBP_OK : last;
}

int cmd_snapshot(int argc, char **argv)
{
	struct snapshot_opts o = { 0 };
	struct cli_subject subj = { 0 };
	struct rbp_subject s = { 0 };
	struct rbp_vm_opts vo = { 0 };
	int err, rc;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	err = cli_open_vm(&o.t, &vo, &subj, &s);
	if (err == RBP_ENOTRUBY && o.subprocesses)
		err = RBP_OK;   /* not Ruby itself: its children may be */
	if (!err)
		err = o.subprocesses ? snap_tree(&s, &vo, &o) : snap_one(&s, &o);
	if (err) {
		rc = cli_fail(err, &subj);
		goto cleanup;
	}
	rc = fflush(stdout) ? EXIT_INTERNAL : 0;
cleanup:
	rbp_subject_close(&s);
	return rc;
}
