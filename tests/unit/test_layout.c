/*
 * test_layout.c - version lookup and sanity of the generated layout tables,
 * and the one seam for versions: no file under src/ruby/ but layout.c
 * decides a shape from a version number or an absent (-1) offset.
 *
 * Run from the top of the tree (tests/run does).
 */
#include "ruby/layout.h"
#include "harness.h"

#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The offsets of one struct must be distinct (ignoring absent fields and
 * the unions listed by the caller). */
static int distinct(const int16_t *offs, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (offs[i] >= 0 && offs[i] == offs[j])
				return 0;
	return 1;
}

static int in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }
static int off_ok(int v, int max) { return v == -1 || (v >= 0 && v < max); }
static int aligned8(int v) { return v == -1 || v % 8 == 0; }

static int version_le(const char *a, const char *b)
{
	unsigned a1 = 0, a2 = 0, a3 = 0, b1 = 0, b2 = 0, b3 = 0;
	sscanf(a, "%u.%u.%u", &a1, &a2, &a3);
	sscanf(b, "%u.%u.%u", &b1, &b2, &b3);
	if (a1 != b1) return a1 < b1;
	if (a2 != b2) return a2 < b2;
	return a3 <= b3;
}

/*
 * Lines of the C files in dir that test a layout's version or an absent
 * offset: a layout's major/minor read (L->major, l->minor, layout.minor)
 * or a layout field compared with -1 or with 0 as a sign (L->cfp.iseq < 0,
 * vm->L->id.chunk_data >= 0, L->x == -1).  Files that may: layout.c (the
 * seam), layout_dwarf.c (fills major/minor from a version string) and
 * layout_fields.c (the field list).  Each offending line is printed on
 * stderr unless quiet; returns their count, or -1 when dir cannot be read.
 */
static int version_tests_outside_layout_c(const char *dir, int quiet)
{
	static const char *const allowed[] = { "layout.c", "layout_dwarf.c", "layout_fields.c" };
	regex_t re;
	DIR *d;
	struct dirent *e;
	int bad = 0;

	if (regcomp(&re, "\\<(L|l|layout)(->|\\.)(major|minor)\\>|"
			 "\\<(L|l|layout)->[a-z_]+(\\.[a-z_]+)* *(< *0|>= *0|[!=]= *-1)\\>",
		    REG_EXTENDED | REG_NOSUB))
		return -1;
	if (!(d = opendir(dir))) {
		regfree(&re);
		return -1;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name), k;
		char path[512], line[1024];
		FILE *f;
		int lineno = 0;

		if (n < 3 || strcmp(e->d_name + n - 2, ".c"))
			continue;
		for (k = 0; k < sizeof(allowed) / sizeof(allowed[0]); k++)
			if (!strcmp(e->d_name, allowed[k]))
				break;
		if (k < sizeof(allowed) / sizeof(allowed[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!(f = fopen(path, "r"))) {
			bad++;
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			lineno++;
			if (!regexec(&re, line, 0, NULL, 0)) {
				if (!quiet)
					fprintf(stderr, "%s:%d: a version or -1 offset tested outside layout.c: %s",
						path, lineno, line);
				bad++;
			}
		}
		fclose(f);
	}
	closedir(d);
	regfree(&re);
	return bad;
}

int main(void)
{
	TEST("find 3.1.2") {
		const struct rbp_layout *l = rbp_layout_find("3.1.2");
		CHECK(l != NULL);
		if (l) {
			CHECK_EQ_INT(l->major, 3);
			CHECK_EQ_INT(l->minor, 1);
			/* numbers checked against Debian's libruby-3.1.so.3.1.2 */
			CHECK_EQ_INT(l->cfp.size, 64);
			CHECK_EQ_INT(l->ec.thread_ptr, 48);
			CHECK_EQ_INT(l->thread.self, 16);
			CHECK_EQ_INT(l->iseq.body, 16);
			CHECK_EQ_INT(l->iseq_body.location_first_lineno, 88);
			CHECK_EQ_INT(l->thread.status.off, 92);
			CHECK_EQ_INT(l->symbols.ids, 16);
			CHECK_EQ_INT(l->value.qnil, 8);
			/* rb_objspace: checked against rb_gc_count/rb_gc_stat in the same library */
			CHECK_EQ_INT(l->vm.objspace, 1104);
			CHECK_EQ_INT(l->objspace.pages_sorted, 256);
		}
	}
	TEST("find 3.1.7") {
		const struct rbp_layout *l = rbp_layout_find("3.1.7");
		CHECK(l != NULL);
		if (l) CHECK(l->major == 3 && l->minor == 1);
	}
	TEST("find 3.1.99 -> nearest lower patch") {
		const struct rbp_layout *l = rbp_layout_find("3.1.99");
		CHECK(l != NULL);
		if (l) {
			CHECK(l->major == 3 && l->minor == 1);
			/* no 3.1 entry starts later than the one chosen */
			for (const struct rbp_layout *o = rbp_layouts; o->version; o++)
				if (o->major == 3 && o->minor == 1 && o != l)
					CHECK(version_le(o->version, l->version));
		}
	}
	TEST("find range boundaries") {
		for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
			CHECK(rbp_layout_find(l->version) == l);
			CHECK(rbp_layout_find(l->last) == l);
		}
	}
	TEST("unknown versions") {
		CHECK(rbp_layout_find("9.9.9") == NULL);
		CHECK(rbp_layout_find("garbage") == NULL);
		CHECK(rbp_layout_find("") == NULL);
		CHECK(rbp_layout_find(NULL) == NULL);
		CHECK(rbp_layout_find("3") == NULL);
	}
	TEST("newer than every table -> the newest one below it") {
		const struct rbp_layout *l = rbp_layout_newest_below("9.9.9");
		CHECK(l == &rbp_layouts[0]);   /* the table is newest first */
		l = rbp_layout_newest_below("3.1.99");
		CHECK(l != NULL && l->major == 3 && l->minor == 1);
		/* a version between two minors: the older minor's newest entry */
		l = rbp_layout_newest_below("3.5.0");
		CHECK(l != NULL && l->major == 3 && l->minor == 4);
		CHECK(rbp_layout_newest_below("2.4.9") == NULL);   /* older than every table */
		CHECK(rbp_layout_newest_below("garbage") == NULL);
		CHECK(rbp_layout_newest_below(NULL) == NULL);
	}
	TEST("supported list") {
		const char *s = rbp_layout_supported();
		CHECK(s != NULL && strstr(s, "3.1") != NULL);
	}
	TEST("table sorted newest first, ranges sane") {
		int n = 0;
		for (const struct rbp_layout *l = rbp_layouts; l->version; l++, n++) {
			CHECK(l->last != NULL);
			CHECK(version_le(l->version, l->last));
			if (l != rbp_layouts)
				CHECK(version_le(l->version, l[-1].version));
		}
		CHECK(n >= 1);
	}
	/*
	 * The shapes layout.c decides, against what each version's source
	 * says (the versions are named here, in a test, on purpose: the
	 * readers never see them).
	 */
	for (const struct rbp_layout *e = rbp_layouts; e->version; e++) {
		char name[64];
		struct rbp_layout l;
		snprintf(name, sizeof name, "shape %s", e->version);
		rbp_layout_use(&l, e);
		int v = l.major * 100 + l.minor;
		TEST(name) {
			CHECK(!memcmp(&l, e, offsetof(struct rbp_layout, shape)));
			CHECK(e->shape.threads == 0);   /* the tables carry no shape */
			CHECK_EQ_INT(l.shape.threads, v >= 300 ? RBP_THREADS_IN_RACTOR : RBP_THREADS_IN_VM);
			CHECK_EQ_INT(l.shape.gvl, v >= 300 ? RBP_GVL_IN_RACTOR :
				     v >= 206 ? RBP_GVL_IN_VM : RBP_GVL_NONE);
			CHECK_EQ_INT(l.shape.thread_ec, v >= 206 ? RBP_THREAD_EC_POINTER :
				     RBP_THREAD_EC_EMBEDDED);
			CHECK_EQ_INT(l.shape.thread_id, v >= 302 ? RBP_TID_IN_NATIVE_THREAD :
				     v == 301 ? RBP_TID_IN_THREAD : RBP_TID_IN_PTHREAD);
			CHECK_EQ_INT(l.shape.first_lineno, v >= 302 ? RBP_FIRST_LINENO_INT :
				     RBP_FIRST_LINENO_FIXNUM);
			CHECK_EQ_INT(l.shape.insns_info, v >= 206 ? RBP_INSNS_INFO_SUCC :
				     RBP_INSNS_INFO_PLAIN);
			CHECK_EQ_INT(l.shape.rescue_line, v >= 304 ? RBP_RESCUE_LINE_CARRIED :
				     RBP_RESCUE_LINE_OWN);
			CHECK_EQ_INT(l.shape.cfunc, RBP_CFUNC_IN_DEF_BODY);
			CHECK_EQ_INT(l.shape.str_len, v >= 303 ? RBP_STR_LEN_TOP :
				     v == 302 ? RBP_STR_LEN_EMBED_FIELD : RBP_STR_LEN_IN_FLAGS);
			CHECK_EQ_INT(l.shape.id_table, v >= 401 ? RBP_ID_TABLE_DARRAYS :
				     RBP_ID_TABLE_ARRAYS);
			CHECK(l.shape.classext == RBP_CLASSEXT_POINTER ||
			      l.shape.classext == RBP_CLASSEXT_INLINE);
			if (v >= 303)
				CHECK_EQ_INT(l.shape.classext, RBP_CLASSEXT_INLINE);
			CHECK_EQ_INT(l.shape.class_ivars, v >= 303 ? RBP_CLASS_IVARS_NONE :
				     v == 302 ? RBP_CLASS_IVARS_SHAPES : RBP_CLASS_IVARS_IV_TBL);
			CHECK_EQ_INT(l.shape.class_path, v >= 303 ? RBP_CLASS_FIELD_CLASSEXT :
				     RBP_CLASS_FIELD_IVAR);
			CHECK_EQ_INT(l.shape.attached, l.shape.class_path);
			CHECK_EQ_INT(l.shape.objspace, RBP_OBJSPACE_IN_VM);
			CHECK_EQ_INT(l.shape.gc_flags, RBP_GC_FLAGS_IN_OBJSPACE);
			CHECK_EQ_INT(l.shape.heap_pages, v >= 304 ? RBP_HEAP_PAGES_DARRAY :
				     RBP_HEAP_PAGES_ARRAY);
			CHECK_EQ_INT(l.shape.slot_size, v >= 301 ? RBP_SLOT_SIZE_PER_PAGE :
				     RBP_SLOT_SIZE_FIXED);
			CHECK_EQ_INT(l.shape.newobj, v >= 401 ? RBP_NEWOBJ_ONE : v >= 303 ? RBP_NEWOBJ_EC_KLASS : RBP_NEWOBJ_KLASS);
			CHECK_EQ_INT(l.shape.allocator, v >= 300 && v <= 303 ? RBP_ALLOCATOR_IN_GC :
				     RBP_ALLOCATOR_NEWOBJ);
		}
	}
	TEST("shape: a layout without a field takes the shape without it") {
		struct rbp_layout l;
		rbp_layout_use(&l, rbp_layout_find("3.1.2"));
		CHECK_EQ_INT(l.shape.thread_id, RBP_TID_IN_THREAD);
		l.thread.tid = -1;
		rbp_layout_set_shape(&l);
		CHECK_EQ_INT(l.shape.thread_id, RBP_TID_IN_PTHREAD);
		l.thread.id = -1;
		l.objspace.pages_sorted = -1;
		l.vm.objspace = -1;
		rbp_layout_set_shape(&l);
		CHECK_EQ_INT(l.shape.thread_id, RBP_TID_NONE);
		CHECK_EQ_INT(l.shape.heap_pages, RBP_HEAP_PAGES_NONE);
		CHECK_EQ_INT(l.shape.objspace, RBP_OBJSPACE_NONE);
	}
	TEST("other minor: the nearest entry of another X.Y") {
		const struct rbp_layout *o = rbp_layout_other_minor("3.1.2");
		CHECK(o != NULL && !(o->major == 3 && o->minor == 1));
		if (o)
			CHECK(o->major == 3 && (o->minor == 0 || o->minor == 2));
		CHECK(rbp_layout_other_minor("garbage") == NULL);
	}

	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		char name[64];
		snprintf(name, sizeof name, "entry %s", l->version);
		TEST(name) {
			CHECK(in_range(l->major, 2, 4));
			CHECK(l->value.qnil != l->value.qfalse && l->value.qnil != l->value.qtrue && l->value.qundef != l->value.qnil);
			CHECK_EQ_INT(l->value.t_mask, 0x1f);
			CHECK(l->value.t_string && l->value.t_array && l->value.t_class && l->value.t_imemo);
			CHECK(in_range(l->value.fl_ushift, 8, 16));
			CHECK(l->value.fl_singleton != 0 && (l->value.fl_singleton & (l->value.fl_singleton - 1)) == 0);

			/* VM and threads */
			if (l->major >= 3) {
				CHECK(off_ok(l->vm.main_ractor, 1024) && l->vm.main_ractor >= 0);
				CHECK(l->ractor.threads_set >= 0 && l->ractor.threads_cnt >= 0);
				CHECK(l->ractor.gvl_owner >= 0 && l->ractor.running_ec >= 0);
				CHECK(l->vm.living_threads == -1);
			} else {
				CHECK(l->vm.main_ractor == -1 && l->ractor.threads_set == -1);
				CHECK(l->vm.living_threads >= 0);
				/* 2.5: gvl.acquired is only a flag */
				CHECK(l->vm.gvl_owner >= 0 || l->minor < 6);
			}
			CHECK(off_ok(l->vm.main_thread, 4096) && l->vm.main_thread >= 0);
			CHECK(aligned8(l->vm.main_thread) && aligned8(l->ractor.threads_set));
			CHECK(off_ok(l->ractor.threads_set, 4096) && off_ok(l->ractor.running_ec, 4096));
			int16_t th[] = { l->thread.lt_node, l->thread.vm, l->thread.ec, l->thread.self,
					 l->thread.name, l->thread.id, l->thread.tid, l->thread.nt,
					 l->thread.status.off };
			CHECK(distinct(th, (int)(sizeof th / sizeof th[0])));
			for (size_t i = 0; i < sizeof th / sizeof th[0]; i++)
				CHECK(off_ok(th[i], 4096));
			CHECK(aligned8(l->thread.vm) && aligned8(l->thread.self) && aligned8(l->thread.name));
			CHECK(l->thread.tid >= 0 || l->native_thread.tid >= 0 || l->thread.id >= 0);
			CHECK(l->thread.status.off >= 0 && l->thread.status.mask != 0);
			CHECK(l->thread.status.size == 1 || l->thread.status.size == 2 ||
			      l->thread.status.size == 4 || l->thread.status.size == 8);
			CHECK(l->thread.status.mask >= l->thread.status_killed);
			CHECK(l->thread.status_runnable != l->thread.status_killed);

			/* execution context and frames */
			int16_t ec[] = { l->ec.vm_stack, l->ec.vm_stack_size, l->ec.cfp, l->ec.thread_ptr };
			CHECK(distinct(ec, 4));
			for (int i = 0; i < 4; i++)
				CHECK(ec[i] >= 0 && ec[i] < 256 && ec[i] % 8 == 0);
			CHECK(l->cfp.size % 8 == 0 && in_range(l->cfp.size, 48, 96));
			int16_t cf[] = { l->cfp.pc, l->cfp.sp, l->cfp.iseq, l->cfp.self, l->cfp.ep };
			CHECK(distinct(cf, 5));
			for (int i = 0; i < 5; i++)
				CHECK(cf[i] >= 0 && cf[i] + 8 <= l->cfp.size && cf[i] % 8 == 0);
			CHECK(l->env.me_cref == -2 && l->env.specval == -1 && l->env.flags == 0);
			CHECK_EQ_INT(l->frame_magic.cfunc & l->frame_magic.mask, l->frame_magic.cfunc);
			CHECK(l->frame_magic.cfunc != l->frame_magic.method);

			/* iseq */
			CHECK(l->iseq.body >= 0 && l->iseq.body < 64);
			int16_t body[] = { l->iseq_body.type, l->iseq_body.iseq_size, l->iseq_body.iseq_encoded,
					   l->iseq_body.location_pathobj, l->iseq_body.location_base_label,
					   l->iseq_body.location_label, l->iseq_body.location_first_lineno,
					   l->iseq_body.insns_info_body, l->iseq_body.insns_info_positions,
					   l->iseq_body.insns_info_size, l->iseq_body.insns_info_succ,
					   l->iseq_body.local_iseq, l->iseq_body.parent_iseq };
			CHECK(distinct(body, (int)(sizeof body / sizeof body[0])));
			for (size_t i = 0; i < sizeof body / sizeof body[0]; i++)
				CHECK(off_ok(body[i], 1024));
			CHECK(aligned8(l->iseq_body.iseq_encoded) && aligned8(l->iseq_body.location_label) &&
			      aligned8(l->iseq_body.insns_info_body) && aligned8(l->iseq_body.local_iseq));
			CHECK(l->insn_info.size >= 4 && l->insn_info.size <= 32);
			CHECK(l->insn_info.line_no >= 0 && l->insn_info.line_no + 4 <= l->insn_info.size);
			CHECK(l->iseq_type.method != l->iseq_type.block);

			/* method entries */
			int16_t me[] = { l->me.flags, l->me.defined_class, l->me.def, l->me.called_id, l->me.owner };
			CHECK(distinct(me, 5));
			for (int i = 0; i < 5; i++)
				CHECK(me[i] >= 0 && me[i] < 64 && me[i] % 8 == 0);
			CHECK(l->method_def.type.off >= 0 && l->method_def.type.mask != 0);
			CHECK(l->method_def.type.mask >= l->method_type.bmethod);
			CHECK(off_ok(l->method_def.original_id, 128) && l->method_def.original_id >= 0);
			CHECK(off_ok(l->method_def.body_iseq_ptr, 128) && l->method_def.body_iseq_ptr >= 0);
			CHECK(l->method_type.iseq != l->method_type.cfunc);

			/* strings and arrays */
			CHECK(l->rstring.noembed != 0 && (l->rstring.noembed & (l->rstring.noembed - 1)) == 0);
			CHECK(l->rstring.len >= 0 || l->rstring.embed_len >= 0 || l->rstring.embed_len_mask != 0);
			CHECK(l->rstring.len >= 0 || l->rstring.heap_len >= 0);
			CHECK(l->rstring.embed_ary >= 16 && l->rstring.heap_ptr >= 16 && l->rstring.heap_ptr < 64);
			CHECK(l->rarray.embed_flag != 0 && l->rarray.embed_len_mask != 0);
			CHECK_EQ_INT(l->rarray.embed_len_mask >> l->rarray.embed_len_shift << l->rarray.embed_len_shift,
				     l->rarray.embed_len_mask);
			CHECK(l->rarray.heap_len >= 16 && l->rarray.heap_ptr > l->rarray.heap_len);

			/* classes */
			CHECK((l->rclass.ext_ptr >= 0) != (l->rclass.ext_inline >= 0));
			CHECK(off_ok(l->rclass.ext_ptr, 64) && off_ok(l->rclass.ext_inline, 256));
			/* 4.0 keeps class fields in an object (fields_obj), not a table */
			CHECK(l->classext.iv_tbl >= 0 || l->classext.iv_ptr >= 0 || l->major >= 4);
			CHECK(off_ok(l->classext.classpath, 512) && off_ok(l->classext.attached, 512));
			CHECK(l->classext.id_attached != 0 || l->classext.attached >= 0);

			/* st_table */
			int16_t st[] = { l->st.num_entries, l->st.entries_start, l->st.entries_bound, l->st.entries };
			CHECK(distinct(st, 4));
			for (int i = 0; i < 4; i++)
				CHECK(st[i] >= 0 && st[i] < 64);
			CHECK(l->st_entry.size == 24 && l->st_entry.key < l->st_entry.record);

			/* symbols */
			CHECK(l->symbols.last_id >= 0 && l->symbols.ids >= 0 &&
			      l->symbols.last_id != l->symbols.ids);
			CHECK(l->id.scope_shift >= 3 && l->id.scope_shift <= 4);
			CHECK(l->id.last_op_id > 0 && l->id.last_op_id < 0x1000);
			CHECK(l->id.entry_unit == 512 && l->id.entry_size >= 2 && l->id.entry_str < l->id.entry_size);
			/* 4.1+: chunks are T_DATA (RTypedData.data after flags, klass, fields_obj, type) */
			CHECK(l->id.chunk_data == -1 || (l->id.chunk_data >= 16 && aligned8(l->id.chunk_data) &&
							 l->id.chunk_first >= 8 && l->value.t_data == 0xc));

			/* the collector (rb_objspace) */
			CHECK(l->vm.objspace > 0 && l->vm.objspace < 4096 && aligned8(l->vm.objspace));
			CHECK(l->objspace.mode.off >= 0 && l->objspace.mode.off < 128 && l->objspace.mode.mask == 3);
			CHECK(l->objspace.during_gc.off >= 0 && l->objspace.during_gc.off < 128 && l->objspace.during_gc.mask == 1);
			CHECK(l->objspace.mode.off != l->objspace.during_gc.off || l->objspace.mode.shift != l->objspace.during_gc.shift);
			CHECK(l->objspace.mode_none == 0 && l->objspace.mode_marking != l->objspace.mode_sweeping);
			CHECK(l->objspace.mode_marking <= 3 && l->objspace.mode_sweeping <= 3);
			CHECK(l->objspace.mode_compacting <= 3 || l->objspace.mode_compacting == 255);
			CHECK(l->objspace.pages_sorted > 0 && l->objspace.pages_sorted < 4096 && aligned8(l->objspace.pages_sorted));
			/* a page count beside a plain array, or a darray (3.4+) */
			CHECK((l->objspace.pages_count >= 0) != (l->darray.data >= 0));
			CHECK(l->darray.data == -1 || (l->darray.len >= 0 && l->darray.len < l->darray.data));
			int16_t page[] = { l->heap_page.start, l->heap_page.total_slots, l->heap_page.free_slots, l->heap_page.slot_size };
			CHECK(distinct(page, 4));
			for (int i = 0; i < 4; i++)
				CHECK(off_ok(page[i], 64));
			CHECK(l->heap_page.start >= 0 && aligned8(l->heap_page.start));
			CHECK(l->heap_page.total_slots >= 0 && l->heap_page.free_slots >= 0);
			CHECK(l->heap_page.slot_size >= 0 || l->major < 3 || (l->major == 3 && l->minor < 1));
			/* sizeof(RVALUE) / BASE_SLOT_SIZE; 4.1+ the smallest of its twelve pools */
			CHECK(l->heap_page.slot_size_base == (l->major > 4 || (l->major == 4 && l->minor >= 1) ? 32 : 40));
			CHECK(l->heap_page.page_size >= 16 * 1024 - 64 && l->heap_page.page_size <= 64 * 1024);
		}
	}
	TEST("only layout.c tests a version or a -1 offset (src/ruby)")
		CHECK(version_tests_outside_layout_c("src/ruby", 0) == 0);
	TEST("the seam check finds a version test") {
		/* the check itself: a file that does what it forbids is found */
		char dir[] = "/tmp/rbpeek-test-seam.XXXXXX", path[64];
		FILE *f;
		CHECK(mkdtemp(dir) != NULL);
		snprintf(path, sizeof(path), "%s/walk.c", dir);
		if ((f = fopen(path, "w"))) {
			fputs("static int ok(void) { return L->cfp.size; }\n"
			      "\tif (vm->L->id.chunk_data >= 0)\n"
			      "\tif (L->major < 3 || L->minor == 2)\n", f);
			fclose(f);
		}
		CHECK(version_tests_outside_layout_c(dir, 1) == 2);
		remove(path);
		rmdir(dir);
	}
	return harness_report();
}
