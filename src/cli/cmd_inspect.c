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
#include "util/json.h"

static const char inspect_usage[] =
	"usage: rbpeek inspect (--pid PID | --core FILE) [--force-version X.Y.Z]\n"
	"                      [--layout auto|dwarf|table] [--fields] [--json]\n"
	"\n"
	"Print what rbpeek finds in a Ruby process and how: the Ruby version, the file\n"
	"Ruby lives in, where its struct layout came from (the DWARF of which file, or\n"
	"the compiled table of which version), the VM and symbol table addresses and\n"
	"the discovery methods.  Every layout source tried is listed with its outcome\n"
	"(used, the field it lacks, what did not fit), and the features (stacks, gvl,\n"
	"gc, heap) the layout in use cannot read, with the field missing; when rbpeek\n"
	"refuses the process, this says why (and exits with the refusal's code).\n"
	"\n"
	"      --json            the same as one JSON object (for bug reports)\n"
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

/* Every layout source tried, and what each gave; then the features unavailable. */
static void print_explain(const struct rbp_layout_explain *x, const struct rbp_vm_info *in)
{
	if (!x->n)
		return;
	printf("layouts tried:\n");
	for (size_t i = 0; i < x->n; i++) {
		const struct rbp_layout_attempt *a = &x->v[i];
		printf("  %s %s: %s\n", a->source, a->where, a->result);
		for (int f = 0; f < RBP_FEAT_N; f++)
			if (a->unavailable & (1u << f))
				printf("    %s unavailable: lacks %s\n",
				       rbp_feature_name((enum rbp_feature)f), a->missing[f]);
	}
	for (int f = 0; in && f < RBP_FEAT_N; f++)
		if (in->unavailable & (1u << f))
			printf("unavailable:     %s (the layout lacks %s)\n",
			       rbp_feature_name((enum rbp_feature)f), in->missing[f]);
}

static void json_kv(const char *k, const char *v, int comma)
{
	printf("%s", comma ? "," : "");
	rbp_json_string(stdout, k);
	putchar(':');
	rbp_json_string(stdout, v ? v : "");
}

/* The same as one JSON object; err the attach's outcome. */
static void print_json(const struct cli_target_opts *o, const struct rbp_vm_opts *vo,
		       const struct rbp_layout_explain *x, const struct rbp_vm *vm, int err,
		       const struct rbp_stacks *s, int stacks_err)
{
	const struct rbp_vm_info *in = vm ? rbp_vm_info(vm) : NULL;
	char buf[64];

	printf("{");
	if (o->core)
		json_kv("core", o->core, 0);
	else
		printf("\"pid\":%d", o->pid);
	json_kv("ruby_version", vo->found_version, 1);
	json_kv("error", err ? rbp_strerror(err) : "", 1);
	json_kv("problem", err == RBP_ELAYOUT && vo->layout_problem ? vo->layout_problem : "", 1);
	printf(",\"layouts_tried\":[");
	for (size_t i = 0; i < x->n; i++) {
		const struct rbp_layout_attempt *a = &x->v[i];
		printf("%s{", i ? "," : "");
		json_kv("source", a->source, 0);
		json_kv("where", a->where, 1);
		json_kv("result", a->result, 1);
		printf(",\"unavailable\":{");
		for (int f = 0, n = 0; f < RBP_FEAT_N; f++)
			if (a->unavailable & (1u << f))
				json_kv(rbp_feature_name((enum rbp_feature)f), a->missing[f], n++);
		printf("}}");
	}
	printf("]");
	if (in) {
		json_kv("layout_source", in->layout_source, 1);
		json_kv("layout_path", in->layout_path, 1);
		json_kv("layout_version", in->layout_version, 1);
		json_kv("layout_note", in->layout_note, 1);
		printf(",\"unavailable\":{");
		for (int f = 0, n = 0; f < RBP_FEAT_N; f++)
			if (in->unavailable & (1u << f))
				json_kv(rbp_feature_name((enum rbp_feature)f), in->missing[f], n++);
		printf("}");
		json_kv("ruby_path", in->ruby_path, 1);
		json_kv("debug_path", in->debug_path, 1);
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)in->vm_addr);
		json_kv("vm", buf, 1);
		json_kv("vm_method", in->vm_method, 1);
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)in->symbols_addr);
		json_kv("symbol_table", buf, 1);
		json_kv("symbols_method", in->symbols_method, 1);
		if (!stacks_err)
			printf(",\"threads\":%zu", s->n_threads);
	}
	printf("}\n");
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_PID,
		{ "core", required_argument, NULL, 'c' },
		CLI_OPTS_LAYOUT,
		{ "fields", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		CLI_OPTS_END
	};
	struct cli_target_opts o = { 0 };
	struct cli_parser cp = { .cmd = "inspect", .usage = inspect_usage, .shortopts = ":p:c:h",
		.longopts = longopts, .t = &o };
	struct cli_subject subj = { 0 };
	struct rbp_vm_opts vo = { 0 };
	struct rbp_subject sub = { 0 };
	struct rbp_stacks s = { 0 };
	struct rbp_layout_explain explain = { 0 };
	int c, err, fields = 0, json = 0;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 'f': fields = 1; break;
		case 'j': json = 1; break;
		}
	}
	if (cli_target_check("inspect", argc, argv, &o))
		return EXIT_USAGE;
	vo.explain = &explain;
	err = cli_open_vm(&o, &vo, &subj, &sub);
	if (json) {
		int serr = err ? err : rbp_subject_read_stacks(&sub, &s);
		if (!err || rbp_subject_opened(&sub))
			print_json(&o, &vo, &explain, err ? NULL : sub.vm, err, &s, serr);
		rbp_stacks_free(&s);
		int rc = err ? cli_fail(err, &subj) : 0;
		rbp_subject_close(&sub);
		return rc;
	}
	if (rbp_subject_opened(&sub) && o.core)
		printf("target:          core file %s (pid %d)\n", o.core, rbp_subject_pid(&sub));
	else if (rbp_subject_opened(&sub))
		printf("target:          process %d\n", o.pid);
	if (rbp_subject_opened(&sub) && *vo.found_version)
		printf("ruby version:    %s\n", vo.found_version);
	if (err) {
		print_explain(&explain, NULL);
		int rc = cli_fail(err, &subj);
		rbp_subject_close(&sub);
		return rc;
	}
	const struct rbp_vm_info *in = rbp_vm_info(sub.vm);
	if (!strcmp(in->layout_source, "dwarf"))
		printf("layout:          dwarf: %s (Ruby %s; %zu compile units read in %.1f ms)\n",
		       in->layout_path, in->layout_version, in->layout_units, in->layout_ms);
	else
		printf("layout:          table: %s\n", in->layout_version);
	if (*in->layout_note)
		printf("layout note:     %s\n", in->layout_note);
	print_explain(&explain, in);
	const struct rbp_layout *L = rbp_vm_layout(sub.vm, NULL);
	if (L->jit.entry)
		printf("jit entry:       rb_iseq_constant_body + %d (a frame running JIT code "
		       "is marked [jit])\n", L->jit.entry);
	printf("ruby lives in:   %s (load bias 0x%llx)\n", in->ruby_path,
	       (unsigned long long)in->ruby_bias);
	printf("debug info:      %s\n", *in->debug_path ? in->debug_path : "(none used)");
	printf("vm:              0x%llx (found by %s)\n", (unsigned long long)in->vm_addr,
	       in->vm_method);
	printf("symbol table:    0x%llx (found by %s)\n", (unsigned long long)in->symbols_addr,
	       in->symbols_method);
	uint64_t os;
	enum rbp_gc_phase gc;
	if (in->unavailable & (1u << RBP_FEAT_GC))
		printf("collector:       unreadable (the layout lacks %s)\n", in->missing[RBP_FEAT_GC]);
	else if ((err = rbp_vm_objspace(sub.vm, &os)) || (err = rbp_vm_gc_phase(sub.vm, &gc)))
		printf("collector:       unreadable (%s)\n", err == RBP_ENOSYM ?
		       "a GC library (librubygc.*) is loaded" : rbp_strerror(err));
	else
		printf("collector:       objspace 0x%llx, %s\n", (unsigned long long)os,
		       gc == RBP_GC_NONE ? "not collecting" : rbp_gc_label(gc));
	err = rbp_subject_read_stacks(&sub, &s);
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
