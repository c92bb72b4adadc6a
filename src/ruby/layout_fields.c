/*
 * layout_fields.c - every numeric field of struct rbp_layout by name, so
 * that two layouts can be compared field by field (a table against the
 * same build's DWARF) and a layout can say which of its fields came from
 * where.  Keep in step with layout.h: tests/unit/test_layout.c checks that
 * the fields tile the struct.
 */
#include "ruby/layout.h"

#include <stdio.h>
#include <string.h>

#define F(name, kind) { #name, offsetof(struct rbp_layout, name), kind }

const struct rbp_layout_field rbp_layout_fields[] = {
	F(major, RBP_LF_U8),
	F(minor, RBP_LF_U8),
	F(qnil, RBP_LF_U64),
	F(qtrue, RBP_LF_U64),
	F(qfalse, RBP_LF_U64),
	F(qundef, RBP_LF_U64),
	F(t_mask, RBP_LF_U32),
	F(t_string, RBP_LF_U8),
	F(t_array, RBP_LF_U8),
	F(t_class, RBP_LF_U8),
	F(t_module, RBP_LF_U8),
	F(t_iclass, RBP_LF_U8),
	F(t_imemo, RBP_LF_U8),
	F(t_object, RBP_LF_U8),
	F(t_data, RBP_LF_U8),
	F(fl_ushift, RBP_LF_U8),
	F(fl_singleton, RBP_LF_U64),
	F(imemo_mask, RBP_LF_U8),
	F(imemo_ment, RBP_LF_U8),
	F(imemo_iseq, RBP_LF_U8),
	F(imemo_cref, RBP_LF_U8),
	F(vm_main_ractor, RBP_LF_I16),
	F(vm_main_thread, RBP_LF_I16),
	F(vm_living_threads, RBP_LF_I16),
	F(vm_thread_count, RBP_LF_I16),
	F(vm_gvl_owner, RBP_LF_I16),
	F(ractor_threads_set, RBP_LF_I16),
	F(ractor_threads_cnt, RBP_LF_I16),
	F(ractor_gvl_owner, RBP_LF_I16),
	F(ractor_running_ec, RBP_LF_I16),
	F(thread_lt_node, RBP_LF_I16),
	F(thread_vm, RBP_LF_I16),
	F(thread_ec, RBP_LF_I16),
	F(thread_ec_embedded, RBP_LF_U8),
	F(thread_self, RBP_LF_I16),
	F(thread_name, RBP_LF_I16),
	F(thread_id, RBP_LF_I16),
	F(thread_tid, RBP_LF_I16),
	F(thread_nt, RBP_LF_I16),
	F(nt_tid, RBP_LF_I16),
	F(thread_status, RBP_LF_BITFIELD),
	F(thread_status_runnable, RBP_LF_U8),
	F(thread_status_stopped, RBP_LF_U8),
	F(thread_status_stopped_forever, RBP_LF_U8),
	F(thread_status_killed, RBP_LF_U8),
	F(ec_vm_stack, RBP_LF_I16),
	F(ec_vm_stack_size, RBP_LF_I16),
	F(ec_cfp, RBP_LF_I16),
	F(ec_thread_ptr, RBP_LF_I16),
	F(cfp_size, RBP_LF_U16),
	F(cfp_pc, RBP_LF_I16),
	F(cfp_sp, RBP_LF_I16),
	F(cfp_iseq, RBP_LF_I16),
	F(cfp_self, RBP_LF_I16),
	F(cfp_ep, RBP_LF_I16),
	F(env_me_cref, RBP_LF_I8),
	F(env_specval, RBP_LF_I8),
	F(env_flags, RBP_LF_I8),
	F(env_flag_local, RBP_LF_U32),
	F(frame_magic_mask, RBP_LF_U32),
	F(frame_magic_cfunc, RBP_LF_U32),
	F(frame_magic_method, RBP_LF_U32),
	F(frame_magic_block, RBP_LF_U32),
	F(frame_magic_class, RBP_LF_U32),
	F(frame_magic_top, RBP_LF_U32),
	F(frame_magic_eval, RBP_LF_U32),
	F(frame_magic_rescue, RBP_LF_U32),
	F(frame_magic_dummy, RBP_LF_U32),
	F(frame_magic_ifunc, RBP_LF_U32),
	F(iseq_body, RBP_LF_I16),
	F(body_type, RBP_LF_I16),
	F(body_iseq_size, RBP_LF_I16),
	F(body_iseq_encoded, RBP_LF_I16),
	F(body_location_pathobj, RBP_LF_I16),
	F(body_location_base_label, RBP_LF_I16),
	F(body_location_label, RBP_LF_I16),
	F(body_location_first_lineno, RBP_LF_I16),
	F(body_location_first_lineno_size, RBP_LF_U8),
	F(body_insns_info_body, RBP_LF_I16),
	F(body_insns_info_positions, RBP_LF_I16),
	F(body_insns_info_size, RBP_LF_I16),
	F(body_insns_info_succ, RBP_LF_I16),
	F(body_local_iseq, RBP_LF_I16),
	F(body_parent_iseq, RBP_LF_I16),
	F(insn_info_size, RBP_LF_U16),
	F(insn_info_line_no, RBP_LF_I16),
	F(iseq_type_top, RBP_LF_U8),
	F(iseq_type_method, RBP_LF_U8),
	F(iseq_type_block, RBP_LF_U8),
	F(iseq_type_class, RBP_LF_U8),
	F(iseq_type_rescue, RBP_LF_U8),
	F(iseq_type_ensure, RBP_LF_U8),
	F(iseq_type_eval, RBP_LF_U8),
	F(iseq_type_main, RBP_LF_U8),
	F(iseq_type_plain, RBP_LF_U8),
	F(me_flags, RBP_LF_I16),
	F(me_defined_class, RBP_LF_I16),
	F(me_def, RBP_LF_I16),
	F(me_called_id, RBP_LF_I16),
	F(me_owner, RBP_LF_I16),
	F(def_type, RBP_LF_BITFIELD),
	F(def_original_id, RBP_LF_I16),
	F(def_body_iseq_ptr, RBP_LF_I16),
	F(method_type_iseq, RBP_LF_U8),
	F(method_type_cfunc, RBP_LF_U8),
	F(method_type_bmethod, RBP_LF_U8),
	F(str_noembed, RBP_LF_U64),
	F(str_embed_len_mask, RBP_LF_U64),
	F(str_embed_len_shift, RBP_LF_U8),
	F(str_len, RBP_LF_I16),
	F(str_embed_len, RBP_LF_I16),
	F(str_embed_ary, RBP_LF_I16),
	F(str_heap_len, RBP_LF_I16),
	F(str_heap_ptr, RBP_LF_I16),
	F(ary_embed_flag, RBP_LF_U64),
	F(ary_embed_len_mask, RBP_LF_U64),
	F(ary_embed_len_shift, RBP_LF_U8),
	F(ary_embed_ary, RBP_LF_I16),
	F(ary_heap_len, RBP_LF_I16),
	F(ary_heap_ptr, RBP_LF_I16),
	F(class_ext_ptr, RBP_LF_I16),
	F(class_ext_inline, RBP_LF_I16),
	F(classext_iv_tbl, RBP_LF_I16),
	F(class_iv_ptr, RBP_LF_I16),
	F(classext_classpath, RBP_LF_I16),
	F(classext_attached, RBP_LF_I16),
	F(id_attached, RBP_LF_U64),
	F(class_ivar_shapes, RBP_LF_U8),
	F(shape_id_shift, RBP_LF_U8),
	F(vm_shape_list, RBP_LF_I16),
	F(shape_size, RBP_LF_U16),
	F(shape_edge_name, RBP_LF_I16),
	F(shape_next_iv_index, RBP_LF_I16),
	F(shape_type, RBP_LF_I16),
	F(shape_parent_id, RBP_LF_I16),
	F(shape_type_ivar, RBP_LF_U8),
	F(shape_invalid_id, RBP_LF_U32),
	F(st_num_entries, RBP_LF_I16),
	F(st_entries_start, RBP_LF_I16),
	F(st_entries_bound, RBP_LF_I16),
	F(st_entries, RBP_LF_I16),
	F(st_entry_size, RBP_LF_U16),
	F(st_entry_key, RBP_LF_I16),
	F(st_entry_record, RBP_LF_I16),
	F(symbols_last_id, RBP_LF_I16),
	F(symbols_ids, RBP_LF_I16),
	F(id_scope_shift, RBP_LF_U8),
	F(last_op_id, RBP_LF_U32),
	F(id_entry_unit, RBP_LF_U16),
	F(id_entry_size, RBP_LF_U8),
	F(id_entry_str, RBP_LF_U8),
	F(id_chunk_data, RBP_LF_I16),
	F(id_chunk_first, RBP_LF_U8),
	F(vm_objspace, RBP_LF_I16),
	F(gc_mode, RBP_LF_BITFIELD),
	F(gc_during_gc, RBP_LF_BITFIELD),
	F(gc_mode_none, RBP_LF_U8),
	F(gc_mode_marking, RBP_LF_U8),
	F(gc_mode_sweeping, RBP_LF_U8),
	F(gc_mode_compacting, RBP_LF_U8),
	F(os_pages_sorted, RBP_LF_I16),
	F(os_pages_count, RBP_LF_I16),
	F(darray_len, RBP_LF_I16),
	F(darray_data, RBP_LF_I16),
	F(page_start, RBP_LF_I16),
	F(page_total_slots, RBP_LF_I16),
	F(page_free_slots, RBP_LF_I16),
	F(page_slot_size, RBP_LF_I16),
	F(slot_size_base, RBP_LF_U16),
	F(heap_page_size, RBP_LF_U32),
};
const size_t rbp_layout_n_fields = sizeof(rbp_layout_fields) / sizeof(rbp_layout_fields[0]);

int64_t rbp_layout_field_get(const struct rbp_layout *L, const struct rbp_layout_field *f)
{
	const char *p = (const char *)L + f->off;
	uint8_t u8;
	int8_t i8;
	int16_t i16;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f->kind) {
	case RBP_LF_U8: memcpy(&u8, p, 1); return u8;
	case RBP_LF_I8: memcpy(&i8, p, 1); return i8;
	case RBP_LF_I16: memcpy(&i16, p, 2); return i16;
	case RBP_LF_U16: memcpy(&u16, p, 2); return u16;
	case RBP_LF_U32: memcpy(&u32, p, 4); return u32;
	case RBP_LF_U64: memcpy(&u64, p, 8); return (int64_t)u64;
	}
	return 0;
}

int rbp_layout_field_eq(const struct rbp_layout *a, const struct rbp_layout *b,
			const struct rbp_layout_field *f)
{
	if (f->kind == RBP_LF_BITFIELD) {
		const struct rbp_bitfield *x = (const void *)((const char *)a + f->off);
		const struct rbp_bitfield *y = (const void *)((const char *)b + f->off);
		return x->off == y->off && x->size == y->size && x->shift == y->shift &&
		       x->mask == y->mask;
	}
	return rbp_layout_field_get(a, f) == rbp_layout_field_get(b, f);
}

void rbp_layout_field_str(const struct rbp_layout *L, const struct rbp_layout_field *f,
			  char *buf, size_t cap)
{
	if (f->kind == RBP_LF_BITFIELD) {
		const struct rbp_bitfield *x = (const void *)((const char *)L + f->off);
		snprintf(buf, cap, "{off %d, size %u, shift %u, mask 0x%x}", x->off,
			 (unsigned)x->size, (unsigned)x->shift, (unsigned)x->mask);
		return;
	}
	int64_t v = rbp_layout_field_get(L, f);
	if (f->kind == RBP_LF_U64 || f->kind == RBP_LF_U32)
		snprintf(buf, cap, "0x%llx", (unsigned long long)v);
	else
		snprintf(buf, cap, "%lld", (long long)v);
}
