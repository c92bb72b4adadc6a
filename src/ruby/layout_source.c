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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

_Static_assert(RBP_VM_FEATURES == RBP_FEAT_N, "vm.h's feature count");
_Static_assert(sizeof(((struct rbp_layout_dwarf_report *)0)->feat_missing[0]) ==
	       sizeof(((struct rbp_layout_attempt *)0)->missing[0]), "missing field names");

/*
 * Split debug info: the file the distribution's -dbg package installs
 * under /usr/lib/debug/.build-id/XX/YYYY.debug, named by the build-id;
 * looked for in the target's root first, then in ours, and used only when
 * its build-id matches.  The path into path; RBP_ENOSYM when none.
 */
int rv_build_id_file(struct rbp_vm *vm, char *path, size_t cap)
{
	uint8_t id[64], id2[64];
	size_t len, len2;
	char rel[200];
	struct rbp_elf *dbg;

	if (rbp_elf_build_id(vm->elf, id, sizeof(id), &len) || len < 2)
		return RBP_ENOSYM;
	int n = snprintf(rel, sizeof(rel), "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (size_t i = 1; i < len; i++)
		n += snprintf(rel + n, sizeof(rel) - (size_t)n, "%02x", id[i]);
	snprintf(rel + n, sizeof(rel) - (size_t)n, ".debug");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0 ? rbp_target_path(vm->t, rel, path, cap) :
				snprintf(path, cap, "%s", rel) < 0)
			continue;
		if (rbp_elf_open(path, &dbg))
			continue;
		int same = !rbp_elf_build_id(dbg, id2, sizeof(id2), &len2) && len2 == len &&
			   !memcmp(id, id2, len);
		rbp_elf_close(dbg);
		if (same)
			return RBP_OK;
	}
	return RBP_ENOSYM;
}

/* One DWARF outcome for a build-id and version (rbp_layout_cache). */
struct cache_entry {
	uint8_t id[64];
	size_t id_len;
	char version[32];            /* the layout's .version/.last point here */
	int err;                     /* RBP_OK, or RBP_ENODWARF: none usable */
	struct rbp_layout layout;
	uint8_t from_table[256];
	char *path;                  /* the file whose DWARF gave it (owned) */
	char note[640];
	size_t units;
	unsigned unavailable;        /* features the DWARF cannot read */
	char feat_missing[RBP_FEAT_N][128];
	struct rbp_layout_explain explain; /* the DWARF sources tried */
};

struct rbp_layout_cache {
	struct cache_entry **v;
	size_t n, cap;
};

struct rbp_layout_cache *rbp_layout_cache_new(void)
{
	return calloc(1, sizeof(struct rbp_layout_cache));
}

void rbp_layout_cache_free(struct rbp_layout_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i]->path);
		free(c->v[i]);
	}
	free(c->v);
	free(c);
}

/* path as the target sees it (like info.ruby_path): without the root it is read through. */
static const char *shown_path(const struct rbp_vm *vm, const char *path)
{
	size_t rl = strlen(vm->t->root);

	return rl && !strncmp(path, vm->t->root, rl) && path[rl] == '/' ? path + rl : path;
}

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

struct rbp_layout_attempt *rv_explain(struct rbp_vm *vm, const char *source, const char *where,
				      const char *fmt, ...)
{
	struct rbp_layout_explain *x = &vm->explain;
	struct rbp_layout_attempt *a;
	va_list ap;

	if (x->n == RBP_LAYOUT_MAX_ATTEMPTS)
		return NULL;
	a = &x->v[x->n++];
	memset(a, 0, sizeof(*a));
	snprintf(a->source, sizeof(a->source), "%s", source);
	snprintf(a->where, sizeof(a->where), "%s", where);
	va_start(ap, fmt);
	vsnprintf(a->result, sizeof(a->result), fmt, ap);
	va_end(ap);
	return a;
}

void rv_explain_result(struct rbp_vm *vm, const char *fmt, ...)
{
	struct rbp_layout_attempt *a;
	va_list ap;

	if (!vm->explain.n)
		return;
	a = &vm->explain.v[vm->explain.n - 1];
	va_start(ap, fmt);
	vsnprintf(a->result, sizeof(a->result), fmt, ap);
	va_end(ap);
}

/* The features the layout in use cannot read, into vm->info. */
static void set_features(struct rbp_vm *vm, unsigned unavailable, char (*missing)[128])
{
	vm->info.unavailable = unavailable;
	for (int f = 0; f < RBP_FEAT_N; f++) {
		memcpy(vm->feat_missing[f], missing[f], sizeof(vm->feat_missing[f]));
		vm->info.missing[f] = vm->feat_missing[f];
	}
}

/* "gc (rb_vm_t.objspace), heap (rb_vm_t.objspace)" into buf; "" when none. */
static void features_str(unsigned unavailable, char (*missing)[128], char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int f = 0; f < RBP_FEAT_N; f++) {
		if (!(unavailable & (1u << f)))
			continue;
		int w = snprintf(buf + n, cap - n, "%s%s (%s)", n ? ", " : "",
				 rbp_feature_name((enum rbp_feature)f), missing[f]);
		if (w < 0 || (size_t)w >= cap - n)
			break;
		n += (size_t)w;
	}
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/*
 * vm->layout from the first candidate with usable DWARF; the
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
		int oerr;
		if (next_candidate(vm, i, path, sizeof(path)))
			continue;
		if ((oerr = rbp_dwarf_open(path, &d))) {
			/* the file itself always; the others when they exist */
			if (i == 0 || oerr != RBP_ENOFILE)
				rv_explain(vm, "dwarf", shown_path(vm, path), "%s",
					   oerr == RBP_ENOFILE ?
					   "cannot be opened" : "no DWARF debug information");
			continue;
		}
		tried++;
		const char *version = rbp_strpool_intern0(&vm->pool, vm->version);
		if (!version) {
			rbp_dwarf_close(d);
			return RBP_ENOMEM;
		}
		err = rbp_layout_from_dwarf(d, version, consts, &vm->layout, &rep);
		rbp_dwarf_close(d);
		vm->info.layout_units += rep.units_read;
		if (err == RBP_ENOMEM)
			return err;
		struct rbp_layout_attempt *a = rv_explain(vm, "dwarf", shown_path(vm, path), err ?
			"lacks %s: no stacks" : "used", rep.missing);
		if (a) {
			a->unavailable = rep.unavailable;
			memcpy(a->missing, rep.feat_missing, sizeof(a->missing));
		}
		if (err) {
			snprintf(vm->layout_note, sizeof(vm->layout_note),
				 "the DWARF of %.400s lacks %s", path, rep.missing);
			err = RBP_ENODWARF;
			continue;
		}
		set_features(vm, rep.unavailable, rep.feat_missing);
		if (!(vm->info.layout_path = rbp_strpool_intern0(&vm->pool, shown_path(vm, path))))
			return RBP_ENOMEM;
		memcpy(vm->layout_from_table, rep.from_table_map, sizeof(vm->layout_from_table));
		char feats[400];
		features_str(rep.unavailable, rep.feat_missing, feats, sizeof(feats));
		/* a note cut short is still a note: the length is not needed */
		int len;
		if (rep.n_from_table)
			len = snprintf(vm->layout_note, sizeof(vm->layout_note),
				       "%zu constants not in the DWARF, from the %.16s table: %.250s%s%.250s",
				       rep.n_from_table, consts->version, rep.from_table,
				       *feats ? "; unavailable: " : "", feats);
		else
			len = snprintf(vm->layout_note, sizeof(vm->layout_note), "%s%.300s",
				       *feats ? "unavailable: " : "", feats);
		(void)len;
		break;
	}
	if (tried)
		vm->info.layout_ms = ms_since(&t0);
	return err;
}

/* The cache entry of this Ruby file and version, or NULL. */
static struct cache_entry *cache_find(struct rbp_layout_cache *c, const uint8_t *id, size_t len,
				      const char *version)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (c->v[i]->id_len == len && !memcmp(c->v[i]->id, id, len) &&
		    !strcmp(c->v[i]->version, version))
			return c->v[i];
	return NULL;
}

/* Remember vm's DWARF outcome err; a failure to remember is not an error. */
static void cache_put(struct rbp_layout_cache *c, const uint8_t *id, size_t len,
		      const struct rbp_vm *vm, int err)
{
	struct cache_entry *e;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4;
		struct cache_entry **v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	if (!(e = calloc(1, sizeof(*e))))
		return;
	memcpy(e->id, id, len);
	e->id_len = len;
	snprintf(e->version, sizeof(e->version), "%s", vm->version);
	e->err = err;
	e->layout = vm->layout;
	e->layout.version = e->layout.last = e->version;
	memcpy(e->from_table, vm->layout_from_table, sizeof(e->from_table));
	memcpy(e->note, vm->layout_note, sizeof(e->note));
	e->units = vm->info.layout_units;
	e->unavailable = vm->info.unavailable;
	memcpy(e->feat_missing, vm->feat_missing, sizeof(e->feat_missing));
	e->explain = vm->explain;
	if (!err && !(e->path = strdup(vm->info.layout_path))) {
		free(e);
		return;
	}
	c->v[c->n++] = e;
}

/* dwarf_layout(), through opts' cache when there is one and the file has a build-id. */
static int cached_dwarf_layout(struct rbp_vm *vm, const struct rbp_vm_opts *opts,
			       const struct rbp_layout *consts)
{
	struct rbp_layout_cache *c = opts ? opts->layout_cache : NULL;
	uint8_t id[64];
	size_t len;
	struct cache_entry *e;
	int err;

	if (!c || rbp_elf_build_id(vm->elf, id, sizeof(id), &len) || len > sizeof(id))
		return dwarf_layout(vm, consts);
	if ((e = cache_find(c, id, len, vm->version))) {
		const char *version = rbp_strpool_intern0(&vm->pool, e->version);
		const char *path = e->path ? rbp_strpool_intern0(&vm->pool, e->path) : "";
		if (!version || !path)
			return RBP_ENOMEM;
		vm->layout = e->layout;
		vm->layout.version = vm->layout.last = version;
		memcpy(vm->layout_from_table, e->from_table, sizeof(vm->layout_from_table));
		memcpy(vm->layout_note, e->note, sizeof(vm->layout_note));
		vm->info.layout_path = path;
		vm->info.layout_units = e->units;
		set_features(vm, e->unavailable, e->feat_missing);
		vm->explain = e->explain;
		return e->err;
	}
	err = dwarf_layout(vm, consts);
	if (!err || err == RBP_ENODWARF)
		cache_put(c, id, len, vm, err);
	return err;
}

/* 1 when field f of L is absent (-1 offset): an unavailable feature's. */
static int absent(const struct rbp_layout *L, const struct rbp_layout_field *f)
{
	if (f->kind == RBP_LF_BITFIELD)
		return ((const struct rbp_bitfield *)(const void *)((const char *)L + f->off))->off == -1;
	return f->kind == RBP_LF_I16 && rbp_layout_field_get(L, f) == -1;
}

/*
 * Append to the note the fields in which the DWARF layout differs from the
 * version's table (a build with other options than the release's, such as
 * -DVM_DEBUG_BP_CHECK=1): the DWARF is right for this build, the table is
 * not, and a user comparing with another machine wants to know.
 */
static void note_differences(struct rbp_vm *vm, const struct rbp_layout *table)
{
	size_t n = strlen(vm->layout_note), diffs = 0;

	for (size_t i = 0; i < rbp_layout_n_fields; i++) {
		const struct rbp_layout_field *f = &rbp_layout_fields[i];
		if (vm->layout_from_table[i] || !strcmp(f->name, "major") || !strcmp(f->name, "minor") ||
		    rbp_layout_field_eq(&vm->layout, table, f))
			continue;
		/* a field of an unavailable feature, left absent: the note says so */
		if (vm->info.unavailable && absent(&vm->layout, f))
			continue;
		int w = snprintf(vm->layout_note + n, sizeof(vm->layout_note) - n, "%s%s",
				 diffs ? ", " : n ? "; differs from the " : "differs from the ",
				 diffs ? f->name : "");
		if (w > 0 && (size_t)w < sizeof(vm->layout_note) - n)
			n += (size_t)w;
		if (!diffs) {
			w = snprintf(vm->layout_note + n, sizeof(vm->layout_note) - n,
				     "%s table in: %s", table->version, f->name);
			if (w > 0 && (size_t)w < sizeof(vm->layout_note) - n)
				n += (size_t)w;
		}
		diffs++;
	}
}

int rv_pick_layout(struct rbp_vm *vm, const struct rbp_vm_opts *opts)
{
	enum rbp_layout_mode mode = opts ? opts->layout : RBP_LAYOUT_AUTO;
	const char *want = opts && opts->force_version ? opts->force_version : vm->version;
	const struct rbp_layout *table = rbp_layout_find(want), *consts = table;
	int err;

	if (opts && opts->test_no_table && !opts->force_version) {
		/* tests: a version rbpeek has no table for (4.1 on release day) */
		table = NULL;
		consts = rbp_layout_other_minor(vm->version);
	}

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
		err = cached_dwarf_layout(vm, opts, consts);
		vm->info.layout_note = vm->layout_note;
		if (!err) {
			if (table)
				note_differences(vm, table);
			vm->L = &vm->layout;
			vm->info.layout_source = "dwarf";
			vm->info.layout_version = vm->L->version;
			return RBP_OK;
		}
		if (err != RBP_ENODWARF || mode == RBP_LAYOUT_DWARF)
			return err;
	}
	if (!table && !(opts && (opts->force_version || opts->test_no_table))) {
		/* newer than every table: the nearest older one, if it validates
		 * (validate.c; rv_discover says so) */
		if ((table = rbp_layout_newest_below(want)))
			vm->info.layout_assumed = 1;
	}
	if (!table) {
		rv_explain(vm, "table", vm->version, "none for Ruby %s (this rbpeek knows %s)",
			   vm->version, rbp_layout_supported());
		return RBP_EVERSION;
	}
	rv_explain(vm, vm->info.layout_assumed ? "nearest older table" : "table", table->version,
		   "used");
	rbp_layout_use(&vm->layout, table);
	vm->L = &vm->layout;
	vm->info.layout_version = table->version;
	return RBP_OK;
}
