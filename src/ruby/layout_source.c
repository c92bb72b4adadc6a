/*
 * layout_source.c - where a target's layout comes from: the DWARF of the
 * Ruby it runs, or a compiled table.
 *
 * Precedence (rbp_vm_opts.layout, RBP_LAYOUT_AUTO): the DWARF first when
 * the Ruby file has it - in the file itself, as split debug info named by
 * its build-id (/usr/lib/debug/.build-id/XX/YYYY.debug), or by its
 * .gnu_debuglink - because it describes that very build (configure
 * options, patches, versions newer than rbpeek); the table for its version
 * otherwise, or when the DWARF lacks something rbpeek needs (the reason
 * goes in info.layout_note).  --force-version means a table.
 */
#include "ruby/internal.h"
#include "ruby/layout_dwarf.h"

#include <stdio.h>
#include <time.h>

/* The candidate files for DWARF, best first, each tried through the target's root. */
static int next_candidate(struct rbp_vm *vm, int i, char *path, size_t cap)
{
	char link[256], rel[4400];
	const char *file = vm->info.ruby_path, *slash = strrchr(file, '/');
	int dir = slash ? (int)(slash - file) : 0;

	switch (i) {
	case 0:   /* the file itself (-g builds: ruby-build, asdf, Docker images) */
		return snprintf(path, cap, "%s", vm->ruby_file) < (int)cap ? 0 : -1;
	case 1:   /* the distribution's split debug info, by build-id */
		return rv_build_id_file(vm, path, cap) ? -1 : 0;
	}
	/* by .gnu_debuglink: next to the file, in .debug/, under /usr/lib/debug */
	if (i > 7 || rbp_dwarf_debuglink(vm->ruby_file, link, sizeof(link)))
		return -1;
	switch ((i - 2) % 3) {
	case 0: snprintf(rel, sizeof(rel), "%.*s/%s", dir, file, link); break;
	case 1: snprintf(rel, sizeof(rel), "%.*s/.debug/%s", dir, file, link); break;
	default: snprintf(rel, sizeof(rel), "/usr/lib/debug%.*s/%s", dir, file, link); break;
	}
	if (!strcmp(rel, file))
		return -1;
	/* i 2-4: through the target's root; 5-7: ours */
	if (i <= 4)
		return rbp_target_path(vm->t, rel, path, cap) ? -1 : 0;
	return snprintf(path, cap, "%s", rel) < (int)cap ? 0 : -1;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/*
 * vm->dwarf_layout from the first candidate with usable DWARF; the
 * constants DWARF lacks from consts.  The reason for a failure goes in
 * vm->layout_note.
 */
static int dwarf_layout(struct rbp_vm *vm, const struct rbp_layout *consts)
{
	struct rbp_layout_dwarf_report rep;
	struct timespec t0;
	char path[4400];
	int tried = 0, err = RBP_ENODWARF;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(vm->layout_note, sizeof(vm->layout_note),
		 "no DWARF: not in %s, no split debug info (build-id, .gnu_debuglink)",
		 vm->info.ruby_path);
	for (int i = 0; i < 8; i++) {
		struct rbp_dwarf *d;
		if (next_candidate(vm, i, path, sizeof(path)) || rbp_dwarf_open(path, &d))
			continue;
		tried++;
		const char *version = rbp_strpool_intern0(&vm->pool, vm->version);
		if (!version) {
			rbp_dwarf_close(d);
			return RBP_ENOMEM;
		}
		err = rbp_layout_from_dwarf(d, version, consts, &vm->dwarf_layout, &rep);
		rbp_dwarf_close(d);
		vm->info.layout_units += rep.units_read;
		if (err == RBP_ENOMEM)
			return err;
		if (err) {
			snprintf(vm->layout_note, sizeof(vm->layout_note),
				 "the DWARF of %.400s lacks %s", path, rep.missing);
			err = RBP_ENODWARF;
			continue;
		}
		vm->info.layout_path = rbp_strpool_intern0(&vm->pool, path);
		memcpy(vm->layout_from_table, rep.from_table_map, sizeof(vm->layout_from_table));
		if (rep.n_from_table)
			snprintf(vm->layout_note, sizeof(vm->layout_note),
				 "%zu constants not in the DWARF, from the %s table: %s",
				 rep.n_from_table, consts->version, rep.from_table);
		else
			vm->layout_note[0] = '\0';
		break;
	}
	if (tried)
		vm->info.layout_ms = ms_since(&t0);
	return err;
}

int rv_pick_layout(struct rbp_vm *vm, const struct rbp_vm_opts *opts)
{
	enum rbp_layout_mode mode = opts ? opts->layout : RBP_LAYOUT_AUTO;
	const char *want = opts && opts->force_version ? opts->force_version : vm->version;
	const struct rbp_layout *table = rbp_layout_find(want), *consts = table;
	int err;

	if (opts && opts->force_version && mode == RBP_LAYOUT_AUTO)
		mode = RBP_LAYOUT_TABLE;
	vm->info.layout_source = "table";
	vm->info.layout_path = vm->info.layout_note = "";
	if (mode != RBP_LAYOUT_TABLE) {
		/* constants the DWARF lacks: from the nearest table when none matches */
		if (!consts)
			consts = rbp_layout_find(rbp_layout_closest(vm->version));
		if (!consts)
			consts = &rbp_layouts[0];
		err = dwarf_layout(vm, consts);
		vm->info.layout_note = vm->layout_note;
		if (!err) {
			vm->L = &vm->dwarf_layout;
			vm->info.layout_source = "dwarf";
			vm->info.layout_version = vm->L->version;
			return RBP_OK;
		}
		if (err != RBP_ENODWARF || mode == RBP_LAYOUT_DWARF)
			return err;
	}
	if (!table)
		return RBP_EVERSION;
	vm->L = table;
	vm->info.layout_version = table->version;
	return RBP_OK;
}
