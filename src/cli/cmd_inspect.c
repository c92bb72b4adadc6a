/*
 * cmd_inspect.c - `rbpeek inspect`: what rbpeek found in a process and how.
 * This is what users paste into bug reports.
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

static const char inspect_usage[] =
	"usage: rbpeek inspect (--pid PID | --core FILE) [--force-version X.Y.Z]\n"
	"                      [--layout auto|dwarf|table] [--fields]\n"
	"\n"
	"Print what rbpeek finds in a Ruby process and how: the Ruby version, the file\n"
	"Ruby lives in, where its struct layout came from (the DWARF of which file, or\n"
	"the compiled table of which version), the VM and symbol table addresses and\n"
	"the discovery methods.\n"
	"\n"
	"      --layout SOURCE   where Ruby's struct offsets come from: auto (its DWARF\n"
	"                        when present, else the compiled table), dwarf or table\n"
	"      --fields          also print every field of the layout, one per line\n"
	"                        (\"name value\", \"(table)\" after a constant a DWARF\n"
	"                        layout took from a table)\n";

/* Every field of the layout in use, "name value", for comparing two sources. */
static void print_fields(const struct rbp_vm *vm)
{
	const uint8_t *from_table;
	const struct rbp_layout *L = rbp_vm_layout(vm, &from_table);
	char buf[96];

	printf("fields:\n");
	for (size_t i = 0; i < rbp_layout_n_fields; i++) {
		rbp_layout_field_str(L, &rbp_layout_fields[i], buf, sizeof(buf));
		printf("  %-32s %s%s\n", rbp_layout_fields[i].name, buf,
		       from_table[i] ? " (table)" : "");
	}
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_PID,
		{ "core", required_argument, NULL, 'c' },
		CLI_OPTS_LAYOUT,
		{ "fields", no_argument, NULL, 'f' },
		CLI_OPTS_END
	};
	struct cli_target_opts o = { 0 };
	struct cli_parser cp = { .cmd = "inspect", .usage = inspect_usage, .shortopts = ":p:c:h",
		.longopts = longopts, .t = &o };
	struct cli_subject subj = { 0 };
	struct rbp_vm_opts vo = { 0 };
	struct rbp_subject sub = { 0 };
	struct rbp_stacks s = { 0 };
	int c, err, fields = 0;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 'f': fields = 1; break;
		}
	}
	if (cli_target_check("inspect", argc, argv, &o))
		return EXIT_USAGE;
	err = cli_open_vm(&o, &vo, &subj, &sub);
	if (sub.t && o.core)
		printf("target:          core file %s (pid %d)\n", o.core, (int)sub.t->pid);
	else if (sub.t)
		printf("target:          process %d\n", o.pid);
	if (sub.t && *vo.found_version)
		printf("ruby version:    %s\n", vo.found_version);
	if (err)
		return cli_fail(err, &subj);
	const struct rbp_vm_info *in = rbp_vm_info(sub.vm);
	if (!strcmp(in->layout_source, "dwarf"))
		printf("layout:          dwarf: %s (Ruby %s; %zu compile units read in %.1f ms)\n",
		       in->layout_path, in->layout_version, in->layout_units, in->layout_ms);
	else
		printf("layout:          table: %s\n", in->layout_version);
	if (*in->layout_note)
		printf("layout note:     %s\n", in->layout_note);
	printf("ruby lives in:   %s (load bias 0x%llx)\n", in->ruby_path,
	       (unsigned long long)in->ruby_bias);
	printf("debug info:      %s\n", *in->debug_path ? in->debug_path : "(none used)");
	printf("vm:              0x%llx (found by %s)\n", (unsigned long long)in->vm_addr,
	       in->vm_method);
	printf("symbol table:    0x%llx (found by %s)\n", (unsigned long long)in->symbols_addr,
	       in->symbols_method);
	uint64_t os;
	enum rbp_gc_phase gc;
	if ((err = rbp_vm_objspace(sub.vm, &os)) || (err = rbp_vm_gc_phase(sub.vm, &gc)))
		printf("collector:       unreadable (%s)\n", err == RBP_ENOSYM ?
		       "a GC library (librubygc.*) is loaded" : rbp_strerror(err));
	else
		printf("collector:       objspace 0x%llx, %s\n", (unsigned long long)os,
		       gc == RBP_GC_NONE ? "not collecting" : rbp_gc_label(gc));
	err = rbp_vm_read_stacks(sub.vm, &s);
	if (!err) {
		printf("threads:         %zu\n", s.n_threads);
		for (size_t i = 0; i < s.n_threads; i++)
			printf("  thread 0x%llx: tid %d, %zu frames%s%s%s\n",
			       (unsigned long long)s.threads[i].addr, (int)s.threads[i].tid,
			       s.threads[i].n_frames, s.threads[i].is_main ? ", main" : "",
			       s.threads[i].has_gvl ? ", holds GVL" : "",
			       s.threads[i].err ? ", unreadable" : "");
	} else {
		printf("threads:         unreadable (%s)\n", rbp_strerror(err));
	}
	rbp_stacks_free(&s);
	if (fields)
		print_fields(sub.vm);
	rbp_subject_close(&sub);
	return 0;
}
