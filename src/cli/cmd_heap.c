/*
 * cmd_heap.c - `rbpeek heap`: what fills a Ruby process's object heap,
 * read from outside: object counts by type (as ObjectSpace.count_objects
 * names them) and by class, heap pages and free slots.
 *
 * A live process is paused only while its heap pages are copied and
 * counted (src/ruby/heap.c); the time is printed.  Core files are read as
 * they are.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "profile/subject.h"
#include "ruby/gc.h"
#include "ruby/layout.h"
#include "ruby/vm.h"
#include "util/err.h"
#include "util/json.h"
#include "util/text.h"

static const char heap_usage[] =
	"usage: rbpeek heap --pid PID [--json] [--top N]\n"
	"       rbpeek heap --core FILE [--json] [--top N]\n"
	"\n"
	"Count the objects on a Ruby process's heap: by type (T_STRING, T_ARRAY, ...,\n"
	"as ObjectSpace.count_objects), by class, and heap pages and free slots.\n"
	"The process is paused while its heap is copied and counted (tens of ms per\n"
	"million slots; the time is printed).\n"
	"\n"
	"  -p, --pid PID           the Ruby process to inspect\n"
	"  -c, --core FILE         a core file of a Ruby process\n"
	"      --sysroot DIR       with --core: find the process's mapped files under DIR\n"
	"  -n, --top N             show the N biggest classes (default 20; 0: all)\n"
	"  -j, --json              print one JSON object instead of text\n"
	"      --force-version X.Y.Z  use the memory layout of this Ruby version (validated)\n"
	"      --layout SOURCE     where Ruby's struct offsets come from: auto (its\n"
	"                          DWARF when present, else the table), dwarf or table\n"
	"  -h, --help              show this help\n";

struct heap_opts {
	struct cli_target_opts t;
	int json;
	long top;
};

static int parse_opts(int argc, char **argv, struct heap_opts *o)
{
	static const struct option longopts[] = {
		CLI_OPTS_TARGET,
		{ "top", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		CLI_OPTS_END
	};
	struct cli_parser cp = { .cmd = "heap", .usage = heap_usage, .shortopts = ":p:c:n:jh",
		.longopts = longopts, .t = &o->t };
	char *end;
	int c;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 'n':
			o->top = strtol(optarg, &end, 10);
			if (!*optarg || *end || o->top < 0 || o->top > 1000000)
				return cli_usage_error("heap", "invalid --top '%s' (a count, 0 for all)",
						       optarg);
			break;
		case 'j': o->json = 1; break;
		}
	}
	return cli_target_check("heap", argc, argv, &o->t);
}

static const char *gc_state(enum rbp_gc_phase g)
{
	return g == RBP_GC_NONE ? "not running" : rbp_gc_label(g);
}

static size_t shown_classes(const struct rbp_heap *h, long top)
{
	return top == 0 || (size_t)top > h->n_classes ? h->n_classes : (size_t)top;
}

static void print_text(const struct rbp_heap *h, int pid, const char *version, long top)
{
	printf("Process %d: ruby %s, %llu heap pages, %llu slots: %llu live objects, %llu free\n",
	       pid, version, (unsigned long long)h->pages, (unsigned long long)h->slots,
	       (unsigned long long)(h->slots - h->free_slots), (unsigned long long)h->free_slots);
	printf("read in a %.1f ms pause; GC %s\n", h->pause_ns / 1e6, gc_state(h->gc));
	if (h->bad_pages)
		printf("(%llu pages could not be read and are not counted)\n",
		       (unsigned long long)h->bad_pages);
	if (h->n_pools > 1)
		for (size_t i = 0; i < h->n_pools; i++)
			printf("  %4u-byte slots: %8llu pages %10llu slots %10llu free\n",
			       h->pools[i].slot_size, (unsigned long long)h->pools[i].pages,
			       (unsigned long long)h->pools[i].slots,
			       (unsigned long long)h->pools[i].free_slots);
	printf("\nObjects by type:\n");
	for (unsigned t = 1; t < RBP_HEAP_TYPES; t++)
		if (h->by_type[t])
			printf("  %-12s %10llu\n", rbp_heap_type_name(t) ? rbp_heap_type_name(t) : "T_?",
			       (unsigned long long)h->by_type[t]);
	size_t n = shown_classes(h, top);
	printf("\nBiggest classes (%zu of %zu):\n", n, h->n_classes);
	for (size_t i = 0; i < n; i++)
	{
		printf("  %10llu  ", (unsigned long long)h->classes[i].count);
		rbp_text_put(stdout, h->classes[i].name);   /* control characters escaped */
		putchar('\n');
	}
}

static void print_json(const struct rbp_heap *h, int pid, const char *version, long top)
{
	printf("{\"pid\":%d,\"ruby_version\":", pid);
	rbp_json_string(stdout, version);
	printf(",\"pause_ms\":%.3f,\"gc\":", h->pause_ns / 1e6);
	rbp_json_string(stdout, h->gc == RBP_GC_NONE ? "none" : rbp_gc_label(h->gc));
	printf(",\"pages\":%llu,\"slots\":%llu,\"free_slots\":%llu,\"bad_pages\":%llu",
	       (unsigned long long)h->pages, (unsigned long long)h->slots,
	       (unsigned long long)h->free_slots, (unsigned long long)h->bad_pages);
	printf(",\"pools\":[");
	for (size_t i = 0; i < h->n_pools; i++)
		printf("%s{\"slot_size\":%u,\"pages\":%llu,\"slots\":%llu,\"free_slots\":%llu}",
		       i ? "," : "", h->pools[i].slot_size, (unsigned long long)h->pools[i].pages,
		       (unsigned long long)h->pools[i].slots,
		       (unsigned long long)h->pools[i].free_slots);
	printf("],\"types\":{");
	int first = 1;
	for (unsigned t = 1; t < RBP_HEAP_TYPES; t++) {
		if (!h->by_type[t])
			continue;
		printf("%s\"%s\":%llu", first ? "" : ",",
		       rbp_heap_type_name(t) ? rbp_heap_type_name(t) : "T_UNKNOWN",
		       (unsigned long long)h->by_type[t]);
		first = 0;
	}
	printf("},\"n_classes\":%zu,\"classes\":[", h->n_classes);
	size_t n = shown_classes(h, top);
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"name\":", i ? "," : "");
		rbp_json_string(stdout, h->classes[i].name);
		printf(",\"count\":%llu}", (unsigned long long)h->classes[i].count);
	}
	printf("]}\n");
}

/*
 * Open the target o names into s (the caller closes it) and count its heap
 * into h: 0, or the error printed and its exit code.
 */
static int read_heap(const struct heap_opts *o, struct rbp_subject *s, struct rbp_heap *h)
{
	struct cli_subject subj = { .own_features = 1 };
	struct rbp_vm_opts vo = { 0 };
	int err = cli_open_vm(&o->t, &vo, &subj, s);

	const struct rbp_vm_info *in = err ? NULL : rbp_vm_info(s->vm);
	if (in && (in->unavailable & (1u << RBP_FEAT_HEAP))) {
		/* a Ruby newer than rbpeek whose DWARF lacks what the heap needs */
		fprintf(stderr, "rbpeek: error: %s %d: the heap of this Ruby (%s) is not readable: "
			"its layout lacks %s\n"
			"hint: stacks still work (record, snapshot); 'rbpeek inspect' lists what "
			"is missing\n", o->t.core ? "core of process" : "process", rbp_subject_pid(s),
			in->version, in->missing[RBP_FEAT_HEAP]);
		return EXIT_VERSION;
	}
	if (!err && (err = rbp_vm_read_heap(s->vm, h)) == RBP_ELAYOUT)
		vo.layout_problem = rbp_vm_info(s->vm)->validation;   /* what did not fit */
	if (err == RBP_ENOSYM) {
		/* the only build without a known objspace: a modular GC library */
		fprintf(stderr, "rbpeek: error: %s %d: its garbage collector is loaded from a "
			"library (librubygc.*, RUBY_GC_LIBRARY), whose heap rbpeek cannot read\n"
			"hint: ObjectSpace.count_objects inside the process gives the counts by type\n",
			o->t.core ? "core of process" : "process", rbp_subject_pid(s));
		return EXIT_VERSION;
	}
	return err ? cli_fail(err, &subj) : 0;
}

int cmd_heap(int argc, char **argv)
{
	struct heap_opts o = { .top = 20 };
	struct rbp_subject s = { 0 };
	struct rbp_heap h = { 0 };
	int rc;

	if ((rc = parse_opts(argc, argv, &o)))
		return rc;
	if (!(rc = read_heap(&o, &s, &h))) {
		if (o.json)
			print_json(&h, rbp_subject_pid(&s), rbp_vm_info(s.vm)->version, o.top);
		else
			print_text(&h, rbp_subject_pid(&s), rbp_vm_info(s.vm)->version, o.top);
		rc = fflush(stdout) ? EXIT_INTERNAL : 0;
	}
	rbp_heap_free(&h);
	rbp_subject_close(&s);
	return rc;
}
