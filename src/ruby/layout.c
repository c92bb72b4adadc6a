/*
 * layout.c - pick the rbp_layout for a Ruby version string, and decide the
 * shape of its structures (struct rbp_layout_shape): the one file that tells
 * versions apart by a version number or by a -1 offset.  The tables
 * themselves are generated (tables/layouts.c, tools/layout/gen).
 */
#include "ruby/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "X.Y" or "X.Y.Z" (anything after Z, such as "preview1", is ignored).
 * Returns 0 on success; *patch is -1 when absent. */
static int parse_version(const char *s, long *major, long *minor, long *patch)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	*major = strtol(s, &end, 10);
	if (*end != '.' || end[1] < '0' || end[1] > '9')
		return -1;
	*minor = strtol(end + 1, &end, 10);
	*patch = -1;
	if (*end == '.' && end[1] >= '0' && end[1] <= '9')
		*patch = strtol(end + 1, &end, 10);
	if (*major > 255 || *minor > 255)
		return -1;
	return 0;
}

static long patch_of(const char *s)
{
	long ma, mi, pa;

	if (parse_version(s, &ma, &mi, &pa) != 0 || pa < 0)
		return 0;
	return pa;
}

const struct rbp_layout *rbp_layout_find(const char *version)
{
	long major, minor, patch;
	const struct rbp_layout *best_lower = NULL, *lowest = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	if (patch < 0)
		patch = 0;
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		if (l->major != major || l->minor != minor)
			continue;
		long first = patch_of(l->version);
		long last = l->last ? patch_of(l->last) : first;
		if (patch >= first && patch <= last)
			return l;
		if (first <= patch && (!best_lower || first > patch_of(best_lower->version)))
			best_lower = l;
		if (!lowest || first < patch_of(lowest->version))
			lowest = l;
	}
	/* Unknown patch release: the nearest lower one, else the oldest we know. */
	return best_lower ? best_lower : lowest;
}

static long version_key(long major, long minor, long patch)
{
	return (major * 1000 + minor) * 10000 + (patch < 0 ? 0 : patch);
}

const struct rbp_layout *rbp_layout_newest_below(const char *version)
{
	long major, minor, patch, want, best_k = -1;
	const struct rbp_layout *best = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	want = version_key(major, minor, patch);
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		long k = version_key(l->major, l->minor, patch_of(l->version));
		if (k <= want && k > best_k) {
			best_k = k;
			best = l;
		}
	}
	return best;
}

const char *rbp_layout_closest(const char *version)
{
	long major, minor, patch, best_d = -1;
	const struct rbp_layout *best = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		long d = labs((long)(l->major * 100 + l->minor) - (major * 100 + minor)) * 2;
		if ((long)(l->major * 100 + l->minor) > major * 100 + minor)
			d++;   /* prefer the older of two equally near versions */
		if (best_d < 0 || d < best_d) {
			best_d = d;
			best = l;
		}
	}
	return best ? (best->last ? best->last : best->version) : NULL;
}

const struct rbp_layout *rbp_layout_other_minor(const char *version)
{
	const struct rbp_layout *best = NULL;
	unsigned ma = 0, mi = 0;
	int best_d = 0;

	if (sscanf(version, "%u.%u", &ma, &mi) != 2)
		return NULL;
	int want = (uint8_t)ma * 100 + (uint8_t)mi;
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		int d = abs((l->major * 100 + l->minor) - want);
		if (d && (!best || d < best_d)) {
			best = l;
			best_d = d;
		}
	}
	return best;
}

const char *rbp_layout_supported(void)
{
	static char buf[512];
	size_t n = 0;

	buf[0] = '\0';
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		int dup = 0;
		for (const struct rbp_layout *p = rbp_layouts; p < l; p++)
			if (p->major == l->major && p->minor == l->minor)
				dup = 1;
		if (dup)
			continue;
		int w = snprintf(buf + n, sizeof buf - n, "%s%u.%u", n ? ", " : "",
				 (unsigned)l->major, (unsigned)l->minor);
		if (w < 0 || (size_t)w >= sizeof buf - n)
			break;
		n += (size_t)w;
	}
	return buf;
}

/* 1 when L's version is major.minor or newer. */
static int at_least(const struct rbp_layout *L, unsigned major, unsigned minor)
{
	return L->major > major || (L->major == major && L->minor >= minor);
}

static void set_thread_shape(struct rbp_layout *L)
{
	struct rbp_layout_shape *s = &L->shape;

	s->threads = L->vm.main_ractor >= 0 ? RBP_THREADS_IN_RACTOR : RBP_THREADS_IN_VM;
	if (s->threads == RBP_THREADS_IN_RACTOR)
		s->gvl = L->ractor.gvl_owner >= 0 ? RBP_GVL_IN_RACTOR : RBP_GVL_NONE;
	else
		s->gvl = L->vm.gvl_owner >= 0 ? RBP_GVL_IN_VM : RBP_GVL_NONE;
	s->thread_ec = L->thread.ec_embedded ? RBP_THREAD_EC_EMBEDDED : RBP_THREAD_EC_POINTER;
	if (L->thread.tid >= 0)
		s->thread_id = RBP_TID_IN_THREAD;
	else if (L->thread.nt >= 0)
		s->thread_id = RBP_TID_IN_NATIVE_THREAD;
	else if (L->thread.id >= 0)
		s->thread_id = RBP_TID_IN_PTHREAD;
	else
		s->thread_id = RBP_TID_NONE;
}

static void set_code_shape(struct rbp_layout *L)
{
	struct rbp_layout_shape *s = &L->shape;

	s->first_lineno = L->iseq_body.location_first_lineno_size == 4 ?
			  RBP_FIRST_LINENO_INT : RBP_FIRST_LINENO_FIXNUM;
	if (L->iseq_body.insns_info_positions < 0)
		s->insns_info = RBP_INSNS_INFO_PLAIN;
	else if (L->iseq_body.insns_info_succ < 0)
		s->insns_info = RBP_INSNS_INFO_POSITIONS;
	else
		s->insns_info = RBP_INSNS_INFO_SUCC;
	/* 3.4 gives a rescue/ensure frame's line to the frame it ran for */
	s->rescue_line = at_least(L, 3, 4) ? RBP_RESCUE_LINE_CARRIED : RBP_RESCUE_LINE_OWN;
	s->cfunc = L->method_def.body_iseq_ptr >= 0 ? RBP_CFUNC_IN_DEF_BODY : RBP_CFUNC_UNKNOWN;
	/* 3.3 moved rb_wb_protected_newobj_of's klass after a new ec argument */
	s->newobj = at_least(L, 4, 1) ? RBP_NEWOBJ_ONE :
		    at_least(L, 3, 3) ? RBP_NEWOBJ_EC_KLASS : RBP_NEWOBJ_KLASS;
	/* 3.0-3.3: rb_class_allocate_instance is in gc.c, not exported */
	s->allocator = L->major == 3 && L->minor <= 3 ? RBP_ALLOCATOR_IN_GC : RBP_ALLOCATOR_NEWOBJ;
}

static void set_object_shape(struct rbp_layout *L)
{
	struct rbp_layout_shape *s = &L->shape;

	if (L->rstring.len >= 0)
		s->str_len = RBP_STR_LEN_TOP;
	else if (L->rstring.embed_len_mask)
		s->str_len = RBP_STR_LEN_IN_FLAGS;
	else
		s->str_len = RBP_STR_LEN_EMBED_FIELD;
	/* 4.1: the symbol table's chunks wrap darrays of sym_id_entry */
	s->id_table = L->id.chunk_data >= 0 ? RBP_ID_TABLE_DARRAYS : RBP_ID_TABLE_ARRAYS;
	if (L->rclass.ext_ptr >= 0)
		s->classext = RBP_CLASSEXT_POINTER;
	else if (L->rclass.ext_inline >= 0)
		s->classext = RBP_CLASSEXT_INLINE;
	else
		s->classext = RBP_CLASSEXT_NONE;
	/* 3.2's tables carry the rb_shape numbers; nothing else has them */
	if (L->rb_shape.size >= 8 && L->vm.shape_list >= 0 && L->classext.iv_ptr >= 0)
		s->class_ivars = RBP_CLASS_IVARS_SHAPES;
	else if (L->classext.iv_tbl >= 0)
		s->class_ivars = RBP_CLASS_IVARS_IV_TBL;
	else
		s->class_ivars = RBP_CLASS_IVARS_NONE;
	s->class_path = L->classext.classpath >= 0 ? RBP_CLASS_FIELD_CLASSEXT : RBP_CLASS_FIELD_IVAR;
	s->attached = L->classext.attached >= 0 ? RBP_CLASS_FIELD_CLASSEXT : RBP_CLASS_FIELD_IVAR;
}

static void set_gc_shape(struct rbp_layout *L)
{
	struct rbp_layout_shape *s = &L->shape;

	s->objspace = L->vm.objspace >= 0 ? RBP_OBJSPACE_IN_VM : RBP_OBJSPACE_NONE;
	s->gc_flags = L->objspace.mode.off >= 0 && L->objspace.during_gc.off >= 0 ?
		      RBP_GC_FLAGS_IN_OBJSPACE : RBP_GC_FLAGS_NONE;
	if (L->objspace.pages_sorted < 0 || L->heap_page.start < 0)
		s->heap_pages = RBP_HEAP_PAGES_NONE;
	else if (L->darray.data >= 0)
		s->heap_pages = RBP_HEAP_PAGES_DARRAY;
	else
		s->heap_pages = RBP_HEAP_PAGES_ARRAY;
	s->slot_size = L->heap_page.slot_size >= 0 ? RBP_SLOT_SIZE_PER_PAGE : RBP_SLOT_SIZE_FIXED;
}

void rbp_layout_set_shape(struct rbp_layout *L)
{
	set_thread_shape(L);
	set_code_shape(L);
	set_object_shape(L);
	set_gc_shape(L);
}

void rbp_layout_use(struct rbp_layout *out, const struct rbp_layout *entry)
{
	*out = *entry;
	rbp_layout_set_shape(out);
}

const char *rbp_feature_name(enum rbp_feature f)
{
	static const char *const names[RBP_FEAT_N] = { "stacks", "gvl", "gc", "heap" };

	return (unsigned)f < RBP_FEAT_N ? names[f] : "?";
}
