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
	F(value.qnil, RBP_LF_U64),
	F(value.qtrue, RBP_LF_U64),
	F(value.qfalse, RBP_LF_U64),
	F(value.qundef, RBP_LF_U64),
	F(value.t_mask, RBP_LF_U32),
	F(value.t_string, RBP_LF_U8),
	F(value.t_array, RBP_LF_U8),
	F(value.t_class, RBP_LF_U8),
	F(value.t_module, RBP_LF_U8),
	F(value.t_iclass, RBP_LF_U8),
	F(value.t_imemo, RBP_LF_U8),
	F(value.t_object, RBP_LF_U8),
	F(value.t_data, RBP_LF_U8),
	F(value.fl_ushift, RBP_LF_U8),
	F(value.fl_singleton, RBP_LF_U64),
	F(imemo.mask, RBP_LF_U8),
	F(imemo.ment, RBP_LF_U8),
	F(imemo.iseq, RBP_LF_U8),
	F(imemo.cref, RBP_LF_U8),
	F(vm.main_ractor, RBP_LF_I16),
	F(vm.main_thread, RBP_LF_I16),
	F(vm.living_threads, RBP_LF_I16),
	F(vm.thread_count, RBP_LF_I16),
	F(vm.gvl_owner, RBP_LF_I16),
	F(vm.objspace, RBP_LF_I16),
	F(vm.shape_list, RBP_LF_I16),
	F(ractor.threads_set, RBP_LF_I16),
	F(ractor.threads_cnt, RBP_LF_I16),
	F(ractor.gvl_owner, RBP_LF_I16),
	F(ractor.running_ec, RBP_LF_I16),
	F(thread.lt_node, RBP_LF_I16),
	F(thread.vm, RBP_LF_I16),
	F(thread.ec, RBP_LF_I16),
	F(thread.ec_embedded, RBP_LF_U8),
	F(thread.self, RBP_LF_I16),
	F(thread.name, RBP_LF_I16),
	F(thread.id, RBP_LF_I16),
	F(thread.tid, RBP_LF_I16),
	F(thread.nt, RBP_LF_I16),
	F(thread.status, RBP_LF_BITFIELD),
	F(thread.status_runnable, RBP_LF_U8),
	F(thread.status_stopped, RBP_LF_U8),
	F(thread.status_stopped_forever, RBP_LF_U8),
	F(thread.status_killed, RBP_LF_U8),
	F(native_thread.tid, RBP_LF_I16),
	F(ec.vm_stack, RBP_LF_I16),
	F(ec.vm_stack_size, RBP_LF_I16),
	F(ec.cfp, RBP_LF_I16),
	F(ec.thread_ptr, RBP_LF_I16),
	F(cfp.size, RBP_LF_U16),
	F(cfp.pc, RBP_LF_I16),
	F(cfp.sp, RBP_LF_I16),
	F(cfp.iseq, RBP_LF_I16),
	F(cfp.self, RBP_LF_I16),
	F(cfp.ep, RBP_LF_I16),
	F(env.me_cref, RBP_LF_I8),
	F(env.specval, RBP_LF_I8),
	F(env.flags, RBP_LF_I8),
	F(env.flag_local, RBP_LF_U32),
	F(frame_magic.mask, RBP_LF_U32),
	F(frame_magic.cfunc, RBP_LF_U32),
	F(frame_magic.method, RBP_LF_U32),
	F(frame_magic.block, RBP_LF_U32),
	F(frame_magic.class, RBP_LF_U32),
	F(frame_magic.top, RBP_LF_U32),
	F(frame_magic.eval, RBP_LF_U32),
	F(frame_magic.rescue, RBP_LF_U32),
	F(frame_magic.dummy, RBP_LF_U32),
	F(frame_magic.ifunc, RBP_LF_U32),
	F(iseq.body, RBP_LF_I16),
	F(iseq_body.type, RBP_LF_I16),
	F(iseq_body.iseq_size, RBP_LF_I16),
	F(iseq_body.iseq_encoded, RBP_LF_I16),
	F(iseq_body.location_pathobj, RBP_LF_I16),
	F(iseq_body.location_base_label, RBP_LF_I16),
	F(iseq_body.location_label, RBP_LF_I16),
	F(iseq_body.location_first_lineno, RBP_LF_I16),
	F(iseq_body.location_first_lineno_size, RBP_LF_U8),
	F(iseq_body.insns_info_body, RBP_LF_I16),
	F(iseq_body.insns_info_positions, RBP_LF_I16),
	F(iseq_body.insns_info_size, RBP_LF_I16),
	F(iseq_body.insns_info_succ, RBP_LF_I16),
	F(iseq_body.local_iseq, RBP_LF_I16),
	F(iseq_body.parent_iseq, RBP_LF_I16),
	F(insn_info.size, RBP_LF_U16),
	F(insn_info.line_no, RBP_LF_I16),
	F(iseq_type.top, RBP_LF_U8),
	F(iseq_type.method, RBP_LF_U8),
	F(iseq_type.block, RBP_LF_U8),
	F(iseq_type.class, RBP_LF_U8),
	F(iseq_type.rescue, RBP_LF_U8),
	F(iseq_type.ensure, RBP_LF_U8),
	F(iseq_type.eval, RBP_LF_U8),
	F(iseq_type.main, RBP_LF_U8),
	F(iseq_type.plain, RBP_LF_U8),
	F(me.flags, RBP_LF_I16),
	F(me.defined_class, RBP_LF_I16),
	F(me.def, RBP_LF_I16),
	F(me.called_id, RBP_LF_I16),
	F(me.owner, RBP_LF_I16),
	F(method_def.type, RBP_LF_BITFIELD),
	F(method_def.original_id, RBP_LF_I16),
	F(method_def.body_iseq_ptr, RBP_LF_I16),
	F(method_type.iseq, RBP_LF_U8),
	F(method_type.cfunc, RBP_LF_U8),
	F(method_type.bmethod, RBP_LF_U8),
	F(rstring.noembed, RBP_LF_U64),
	F(rstring.embed_len_mask, RBP_LF_U64),
	F(rstring.embed_len_shift, RBP_LF_U8),
	F(rstring.len, RBP_LF_I16),
	F(rstring.embed_len, RBP_LF_I16),
	F(rstring.embed_ary, RBP_LF_I16),
	F(rstring.heap_len, RBP_LF_I16),
	F(rstring.heap_ptr, RBP_LF_I16),
	F(rarray.embed_flag, RBP_LF_U64),
	F(rarray.embed_len_mask, RBP_LF_U64),
	F(rarray.embed_len_shift, RBP_LF_U8),
	F(rarray.embed_ary, RBP_LF_I16),
	F(rarray.heap_len, RBP_LF_I16),
	F(rarray.heap_ptr, RBP_LF_I16),
	F(rclass.ext_ptr, RBP_LF_I16),
	F(rclass.ext_inline, RBP_LF_I16),
	F(classext.iv_tbl, RBP_LF_I16),
	F(classext.iv_ptr, RBP_LF_I16),
	F(classext.classpath, RBP_LF_I16),
	F(classext.attached, RBP_LF_I16),
	F(classext.id_attached, RBP_LF_U64),
	F(rb_shape.id_shift, RBP_LF_U8),
	F(rb_shape.size, RBP_LF_U16),
	F(rb_shape.edge_name, RBP_LF_I16),
	F(rb_shape.next_iv_index, RBP_LF_I16),
	F(rb_shape.type, RBP_LF_I16),
	F(rb_shape.parent_id, RBP_LF_I16),
	F(rb_shape.type_ivar, RBP_LF_U8),
	F(rb_shape.invalid_id, RBP_LF_U32),
	F(st.num_entries, RBP_LF_I16),
	F(st.entries_start, RBP_LF_I16),
	F(st.entries_bound, RBP_LF_I16),
	F(st.entries, RBP_LF_I16),
	F(st_entry.size, RBP_LF_U16),
	F(st_entry.key, RBP_LF_I16),
	F(st_entry.record, RBP_LF_I16),
	F(symbols.last_id, RBP_LF_I16),
	F(symbols.ids, RBP_LF_I16),
	F(id.scope_shift, RBP_LF_U8),
	F(id.last_op_id, RBP_LF_U32),
	F(id.entry_unit, RBP_LF_U16),
	F(id.entry_size, RBP_LF_U8),
	F(id.entry_str, RBP_LF_U8),
	F(id.chunk_data, RBP_LF_I16),
	F(id.chunk_first, RBP_LF_U8),
	F(objspace.mode, RBP_LF_BITFIELD),
	F(objspace.during_gc, RBP_LF_BITFIELD),
	F(objspace.mode_none, RBP_LF_U8),
	F(objspace.mode_marking, RBP_LF_U8),
	F(objspace.mode_sweeping, RBP_LF_U8),
	F(objspace.mode_compacting, RBP_LF_U8),
	F(objspace.pages_sorted, RBP_LF_I16),
	F(objspace.pages_count, RBP_LF_I16),
	F(darray.len, RBP_LF_I16),
	F(darray.data, RBP_LF_I16),
	F(heap_page.start, RBP_LF_I16),
	F(heap_page.total_slots, RBP_LF_I16),
	F(heap_page.free_slots, RBP_LF_I16),
	F(heap_page.slot_size, RBP_LF_I16),
	F(heap_page.slot_size_base, RBP_LF_U16),
	F(heap_page.page_size, RBP_LF_U32),
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
