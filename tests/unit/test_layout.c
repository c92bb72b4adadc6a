/*
 * test_layout.c - version lookup and sanity of the generated layout tables.
 */
#include "ruby/layout.h"
#include "harness.h"

#include <string.h>

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

int main(void)
{
	TEST("find 3.1.2") {
		const struct rbp_layout *l = rbp_layout_find("3.1.2");
		CHECK(l != NULL);
		if (l) {
			CHECK_EQ_INT(l->major, 3);
			CHECK_EQ_INT(l->minor, 1);
			/* numbers checked against Debian's libruby-3.1.so.3.1.2 */
			CHECK_EQ_INT(l->cfp_size, 64);
			CHECK_EQ_INT(l->ec_thread_ptr, 48);
			CHECK_EQ_INT(l->thread_self, 16);
			CHECK_EQ_INT(l->iseq_body, 16);
			CHECK_EQ_INT(l->body_location_first_lineno, 88);
			CHECK_EQ_INT(l->thread_status.off, 92);
			CHECK_EQ_INT(l->symbols_ids, 16);
			CHECK_EQ_INT(l->qnil, 8);
			/* rb_objspace: checked against rb_gc_count/rb_gc_stat in the same library */
			CHECK_EQ_INT(l->vm_objspace, 1104);
			CHECK_EQ_INT(l->os_pages_sorted, 256);
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
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		char name[64];
		snprintf(name, sizeof name, "entry %s", l->version);
		TEST(name) {
			CHECK(in_range(l->major, 2, 4));
			CHECK(l->qnil != l->qfalse && l->qnil != l->qtrue && l->qundef != l->qnil);
			CHECK_EQ_INT(l->t_mask, 0x1f);
			CHECK(l->t_string && l->t_array && l->t_class && l->t_imemo);
			CHECK(in_range(l->fl_ushift, 8, 16));
			CHECK(l->fl_singleton != 0 && (l->fl_singleton & (l->fl_singleton - 1)) == 0);

			/* VM and threads */
			if (l->major >= 3) {
				CHECK(off_ok(l->vm_main_ractor, 1024) && l->vm_main_ractor >= 0);
				CHECK(l->ractor_threads_set >= 0 && l->ractor_threads_cnt >= 0);
				CHECK(l->ractor_gvl_owner >= 0 && l->ractor_running_ec >= 0);
				CHECK(l->vm_living_threads == -1);
			} else {
				CHECK(l->vm_main_ractor == -1 && l->ractor_threads_set == -1);
				CHECK(l->vm_living_threads >= 0);
				/* 2.5: gvl.acquired is only a flag */
				CHECK(l->vm_gvl_owner >= 0 || l->minor < 6);
			}
			CHECK(off_ok(l->vm_main_thread, 4096) && l->vm_main_thread >= 0);
			CHECK(aligned8(l->vm_main_thread) && aligned8(l->ractor_threads_set));
			CHECK(off_ok(l->ractor_threads_set, 4096) && off_ok(l->ractor_running_ec, 4096));
			int16_t th[] = { l->thread_lt_node, l->thread_vm, l->thread_ec, l->thread_self,
					 l->thread_name, l->thread_id, l->thread_tid, l->thread_nt,
					 l->thread_status.off };
			CHECK(distinct(th, (int)(sizeof th / sizeof th[0])));
			for (size_t i = 0; i < sizeof th / sizeof th[0]; i++)
				CHECK(off_ok(th[i], 4096));
			CHECK(aligned8(l->thread_vm) && aligned8(l->thread_self) && aligned8(l->thread_name));
			CHECK(l->thread_tid >= 0 || l->nt_tid >= 0 || l->thread_id >= 0);
			CHECK(l->thread_status.off >= 0 && l->thread_status.mask != 0);
			CHECK(l->thread_status.size == 1 || l->thread_status.size == 2 ||
			      l->thread_status.size == 4 || l->thread_status.size == 8);
			CHECK(l->thread_status.mask >= l->thread_status_killed);
			CHECK(l->thread_status_runnable != l->thread_status_killed);

			/* execution context and frames */
			int16_t ec[] = { l->ec_vm_stack, l->ec_vm_stack_size, l->ec_cfp, l->ec_thread_ptr };
			CHECK(distinct(ec, 4));
			for (int i = 0; i < 4; i++)
				CHECK(ec[i] >= 0 && ec[i] < 256 && ec[i] % 8 == 0);
			CHECK(l->cfp_size % 8 == 0 && in_range(l->cfp_size, 48, 96));
			int16_t cf[] = { l->cfp_pc, l->cfp_sp, l->cfp_iseq, l->cfp_self, l->cfp_ep };
			CHECK(distinct(cf, 5));
			for (int i = 0; i < 5; i++)
				CHECK(cf[i] >= 0 && cf[i] + 8 <= l->cfp_size && cf[i] % 8 == 0);
			CHECK(l->env_me_cref == -2 && l->env_specval == -1 && l->env_flags == 0);
			CHECK_EQ_INT(l->frame_magic_cfunc & l->frame_magic_mask, l->frame_magic_cfunc);
			CHECK(l->frame_magic_cfunc != l->frame_magic_method);

			/* iseq */
			CHECK(l->iseq_body >= 0 && l->iseq_body < 64);
			int16_t body[] = { l->body_type, l->body_iseq_size, l->body_iseq_encoded,
					   l->body_location_pathobj, l->body_location_base_label,
					   l->body_location_label, l->body_location_first_lineno,
					   l->body_insns_info_body, l->body_insns_info_positions,
					   l->body_insns_info_size, l->body_insns_info_succ,
					   l->body_local_iseq, l->body_parent_iseq };
			CHECK(distinct(body, (int)(sizeof body / sizeof body[0])));
			for (size_t i = 0; i < sizeof body / sizeof body[0]; i++)
				CHECK(off_ok(body[i], 1024));
			CHECK(aligned8(l->body_iseq_encoded) && aligned8(l->body_location_label) &&
			      aligned8(l->body_insns_info_body) && aligned8(l->body_local_iseq));
			CHECK(l->insn_info_size >= 4 && l->insn_info_size <= 32);
			CHECK(l->insn_info_line_no >= 0 && l->insn_info_line_no + 4 <= l->insn_info_size);
			CHECK(l->iseq_type_method != l->iseq_type_block);

			/* method entries */
			int16_t me[] = { l->me_flags, l->me_defined_class, l->me_def, l->me_called_id, l->me_owner };
			CHECK(distinct(me, 5));
			for (int i = 0; i < 5; i++)
				CHECK(me[i] >= 0 && me[i] < 64 && me[i] % 8 == 0);
			CHECK(l->def_type.off >= 0 && l->def_type.mask != 0);
			CHECK(l->def_type.mask >= l->method_type_bmethod);
			CHECK(off_ok(l->def_original_id, 128) && l->def_original_id >= 0);
			CHECK(off_ok(l->def_body_iseq_ptr, 128) && l->def_body_iseq_ptr >= 0);
			CHECK(l->method_type_iseq != l->method_type_cfunc);

			/* strings and arrays */
			CHECK(l->str_noembed != 0 && (l->str_noembed & (l->str_noembed - 1)) == 0);
			CHECK(l->str_len >= 0 || l->str_embed_len >= 0 || l->str_embed_len_mask != 0);
			CHECK(l->str_len >= 0 || l->str_heap_len >= 0);
			CHECK(l->str_embed_ary >= 16 && l->str_heap_ptr >= 16 && l->str_heap_ptr < 64);
			CHECK(l->ary_embed_flag != 0 && l->ary_embed_len_mask != 0);
			CHECK_EQ_INT(l->ary_embed_len_mask >> l->ary_embed_len_shift << l->ary_embed_len_shift,
				     l->ary_embed_len_mask);
			CHECK(l->ary_heap_len >= 16 && l->ary_heap_ptr > l->ary_heap_len);

			/* classes */
			CHECK((l->class_ext_ptr >= 0) != (l->class_ext_inline >= 0));
			CHECK(off_ok(l->class_ext_ptr, 64) && off_ok(l->class_ext_inline, 256));
			/* 4.0 keeps class fields in an object (fields_obj), not a table */
			CHECK(l->classext_iv_tbl >= 0 || l->class_iv_ptr >= 0 || l->major >= 4);
			CHECK(off_ok(l->classext_classpath, 512) && off_ok(l->classext_attached, 512));
			CHECK(l->id_attached != 0 || l->classext_attached >= 0);

			/* st_table */
			int16_t st[] = { l->st_num_entries, l->st_entries_start, l->st_entries_bound, l->st_entries };
			CHECK(distinct(st, 4));
			for (int i = 0; i < 4; i++)
				CHECK(st[i] >= 0 && st[i] < 64);
			CHECK(l->st_entry_size == 24 && l->st_entry_key < l->st_entry_record);

			/* symbols */
			CHECK(l->symbols_last_id >= 0 && l->symbols_ids >= 0 &&
			      l->symbols_last_id != l->symbols_ids);
			CHECK(l->id_scope_shift >= 3 && l->id_scope_shift <= 4);
			CHECK(l->last_op_id > 0 && l->last_op_id < 0x1000);
			CHECK(l->id_entry_unit == 512 && l->id_entry_size >= 2 && l->id_entry_str < l->id_entry_size);
			/* 4.1+: chunks are T_DATA (RTypedData.data after flags, klass, fields_obj, type) */
			CHECK(l->id_chunk_data == -1 || (l->id_chunk_data >= 16 && aligned8(l->id_chunk_data) &&
							 l->id_chunk_first >= 8 && l->t_data == 0xc));

			/* the collector (rb_objspace) */
			CHECK(l->vm_objspace > 0 && l->vm_objspace < 4096 && aligned8(l->vm_objspace));
			CHECK(l->gc_mode.off >= 0 && l->gc_mode.off < 128 && l->gc_mode.mask == 3);
			CHECK(l->gc_during_gc.off >= 0 && l->gc_during_gc.off < 128 && l->gc_during_gc.mask == 1);
			CHECK(l->gc_mode.off != l->gc_during_gc.off || l->gc_mode.shift != l->gc_during_gc.shift);
			CHECK(l->gc_mode_none == 0 && l->gc_mode_marking != l->gc_mode_sweeping);
			CHECK(l->gc_mode_marking <= 3 && l->gc_mode_sweeping <= 3);
			CHECK(l->gc_mode_compacting <= 3 || l->gc_mode_compacting == 255);
			CHECK(l->os_pages_sorted > 0 && l->os_pages_sorted < 4096 && aligned8(l->os_pages_sorted));
			/* a page count beside a plain array, or a darray (3.4+) */
			CHECK((l->os_pages_count >= 0) != (l->darray_data >= 0));
			CHECK(l->darray_data == -1 || (l->darray_len >= 0 && l->darray_len < l->darray_data));
			int16_t page[] = { l->page_start, l->page_total_slots, l->page_free_slots, l->page_slot_size };
			CHECK(distinct(page, 4));
			for (int i = 0; i < 4; i++)
				CHECK(off_ok(page[i], 64));
			CHECK(l->page_start >= 0 && aligned8(l->page_start));
			CHECK(l->page_total_slots >= 0 && l->page_free_slots >= 0);
			CHECK(l->page_slot_size >= 0 || l->major < 3 || (l->major == 3 && l->minor < 1));
			/* sizeof(RVALUE) / BASE_SLOT_SIZE; 4.1+ the smallest of its twelve pools */
			CHECK(l->slot_size_base == (l->major > 4 || (l->major == 4 && l->minor >= 1) ? 32 : 40));
			CHECK(l->heap_page_size >= 16 * 1024 - 64 && l->heap_page_size <= 64 * 1024);
		}
	}
	return harness_report();
}
