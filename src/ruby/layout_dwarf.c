/*
 * layout_dwarf.c - struct rbp_layout from a Ruby build's DWARF (see
 * layout_dwarf.h).  Each field is computed as tools/layout/probe.c and
 * probe_gc.c compute it; where they choose by version, the comment names
 * the version and the test made here names what the DWARF shows instead.
 */
#include "ruby/layout_dwarf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/*
 * Every type the fields below read, as rbp_dwarf names them: first those
 * every version has, then those of some versions only (looked for in the
 * hinted compile units only, where they are when they exist).
 */
static const char *const want_types[] = {
	"rb_vm_t", "rb_thread_t", "rb_execution_context_t", "rb_control_frame_t",
	"rb_iseq_t", "struct rb_iseq_constant_body", "struct iseq_insn_info_entry",
	"rb_method_entry_t", "rb_method_definition_t", "struct RString", "struct RArray",
	"struct RClass", "rb_classext_t", "st_table", "struct st_table_entry",
	"rb_objspace_t", "struct heap_page",
#define N_REQUIRED_TYPES 17
	"rb_ractor_t",                      /* 3.0+, ractor.c */
	"struct rb_native_thread",          /* 3.2+, thread.c */
	"struct RClass_and_rb_classext_t",  /* 3.3+, class.c */
	"rb_symbols_t", "struct symbols",   /* 2.7+ / before, symbol.c */
	"rb_darray_meta_t", "RVALUE",       /* 3.4+ / before, gc.c */
	"struct sym_id_entry", "struct RTypedData", /* 4.1+, symbol.c */
};

/* Every constant; several exist only in some versions (absent is an answer). */
static const char *const want_consts[] = {
	"RUBY_Qnil", "RUBY_Qtrue", "RUBY_Qfalse", "RUBY_Qundef", "RUBY_T_MASK",
	"RUBY_T_STRING", "RUBY_T_ARRAY", "RUBY_T_CLASS", "RUBY_T_MODULE", "RUBY_T_ICLASS",
	"RUBY_T_IMEMO", "RUBY_T_OBJECT", "RUBY_T_DATA", "RUBY_FL_USHIFT", "RUBY_FL_USER0", "RUBY_FL_SINGLETON",
	"RUBY_IMEMO_MASK", "imemo_ment", "imemo_iseq", "imemo_cref",
	"THREAD_RUNNABLE", "THREAD_STOPPED", "THREAD_STOPPED_FOREVER", "THREAD_KILLED",
	"VM_ENV_DATA_INDEX_ME_CREF", "VM_ENV_DATA_INDEX_SPECVAL", "VM_ENV_DATA_INDEX_FLAGS",
	"VM_ENV_FLAG_LOCAL", "VM_FRAME_MAGIC_MASK", "VM_FRAME_MAGIC_CFUNC",
	"VM_FRAME_MAGIC_METHOD", "VM_FRAME_MAGIC_BLOCK", "VM_FRAME_MAGIC_CLASS",
	"VM_FRAME_MAGIC_TOP", "VM_FRAME_MAGIC_EVAL", "VM_FRAME_MAGIC_RESCUE",
	"VM_FRAME_MAGIC_DUMMY", "VM_FRAME_MAGIC_IFUNC",
	"ISEQ_TYPE_TOP", "ISEQ_TYPE_METHOD", "ISEQ_TYPE_BLOCK", "ISEQ_TYPE_CLASS",
	"ISEQ_TYPE_RESCUE", "ISEQ_TYPE_ENSURE", "ISEQ_TYPE_EVAL", "ISEQ_TYPE_MAIN",
	"ISEQ_TYPE_PLAIN", "VM_METHOD_TYPE_ISEQ", "VM_METHOD_TYPE_CFUNC",
	"VM_METHOD_TYPE_BMETHOD", "RSTRING_NOEMBED", "RSTRING_EMBED_LEN_MASK",
	"RSTRING_EMBED_LEN_SHIFT", "RARRAY_EMBED_FLAG", "RARRAY_EMBED_LEN_MASK",
	"RARRAY_EMBED_LEN_SHIFT", "RUBY_ID_SCOPE_SHIFT", "tLAST_OP_ID", "ID_ENTRY_UNIT",
	"ID_ENTRY_SIZE", "ID_ENTRY_STR", "id__attached__", "gc_mode_none",
	"gc_mode_marking", "gc_mode_sweeping", "gc_mode_compacting", "HEAP_PAGE_SIZE",
	"BASE_SLOT_SIZE",
};

/*
 * The compile units where the types and constants live, most useful
 * first: debug.c declares a union of Ruby's public enums for debuggers.
 */
static const char *const hint_cus[] = {
	"debug.c", "vm.c", "gc.c", "gc/default/default.c", "gc/default.c", "symbol.c",
	"st.c", "class.c", "iseq.c", "thread.c", "ractor.c",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct ctx {
	struct rbp_dwarf *d;
	struct rbp_layout *out;
	uint8_t *set;                 /* per rbp_layout_fields[] index: filled from DWARF */
	struct rbp_layout_dwarf_report *rep;
	enum rbp_feature feat;        /* the feature the fields being filled serve */
};

static void mark(struct ctx *c, size_t off)
{
	for (size_t i = 0; i < rbp_layout_n_fields; i++)
		if (rbp_layout_fields[i].off == off)
			c->set[i] = 1;
}

/* What the DWARF lacks makes the feature being filled unavailable, only it. */
static void fail(struct ctx *c, const char *type, const char *path)
{
	char *m = c->rep->feat_missing[c->feat];

	c->rep->unavailable |= 1u << c->feat;
	if (*m)
		return;
	snprintf(m, sizeof(c->rep->feat_missing[0]), "%s%s%s", type, path ? "." : "",
		 path ? path : "");
}

#define SET(field, v) do { c->out->field = (v); \
	mark(c, offsetof(struct rbp_layout, field)); } while (0)

static int has(struct ctx *c, const char *type, const char *path)
{
	struct rbp_dwarf_member m;

	return !rbp_dwarf_member(c->d, type, path, &m);
}

/* Offset of a member that must exist; 0 after recording the failure. */
static int64_t off(struct ctx *c, const char *type, const char *path)
{
	struct rbp_dwarf_member m;

	if (rbp_dwarf_member(c->d, type, path, &m)) {
		fail(c, type, path);
		return 0;
	}
	return m.offset;
}

static int64_t off_opt(struct ctx *c, const char *type, const char *path)
{
	struct rbp_dwarf_member m;

	return rbp_dwarf_member(c->d, type, path, &m) ? -1 : m.offset;
}

static uint64_t size_of(struct ctx *c, const char *type)
{
	uint64_t s;

	if (rbp_dwarf_sizeof(c->d, type, &s)) {
		fail(c, type, NULL);
		return 0;
	}
	return s;
}

/* Where a member lives as probe.h's bitfield() finds it after setting it to ~0. */
static struct rbp_bitfield bits(struct ctx *c, const char *type, const char *path)
{
	struct rbp_dwarf_member m;
	struct rbp_bitfield b = { -1, 0, 0, 0 };

	if (rbp_dwarf_member(c->d, type, path, &m)) {
		fail(c, type, path);
		return b;
	}
	uint32_t start = m.bit_size ? m.bit_offset : (uint32_t)m.offset * 8;
	uint32_t n = m.bit_size ? m.bit_size : (uint32_t)m.size * 8;
	uint32_t first = start / 8, last = (start + n - 1) / 8, size = 1;
	while (first + size <= last)
		size *= 2;
	b.off = (int16_t)first;
	b.size = (uint8_t)size;
	b.shift = (uint8_t)(start - first * 8);
	b.mask = n >= 32 ? 0xffffffffu : (1u << n) - 1;
	return b;
}

/* A constant when DWARF has it; left to the table otherwise. */
#define CONST(field, name) do { int64_t v_; \
	if (!rbp_dwarf_const(c->d, name, &v_)) SET(field, v_); } while (0)
/* A constant some versions lack: dflt then (as probe.c prints). */
#define CONST_OR(field, name, dflt) do { int64_t v_; \
	SET(field, rbp_dwarf_const(c->d, name, &v_) ? (dflt) : v_); } while (0)

static void fill_objects(struct ctx *c)
{
	int64_t v;

	CONST(value.qnil, "RUBY_Qnil");
	CONST(value.qtrue, "RUBY_Qtrue");
	CONST(value.qfalse, "RUBY_Qfalse");
	CONST(value.qundef, "RUBY_Qundef");
	CONST(value.t_mask, "RUBY_T_MASK");
	CONST(value.t_string, "RUBY_T_STRING");
	CONST(value.t_array, "RUBY_T_ARRAY");
	CONST(value.t_class, "RUBY_T_CLASS");
	CONST(value.t_module, "RUBY_T_MODULE");
	CONST(value.t_iclass, "RUBY_T_ICLASS");
	CONST(value.t_imemo, "RUBY_T_IMEMO");
	CONST(value.t_object, "RUBY_T_OBJECT");
	CONST(value.t_data, "RUBY_T_DATA");
	if (!rbp_dwarf_const(c->d, "RUBY_FL_USHIFT", &v)) {
		SET(value.fl_ushift, v);
	} else if (!rbp_dwarf_const(c->d, "RUBY_FL_USER0", &v) && v > 0) {
		/* 2.x: FL_USHIFT is a macro, FL_USER0 = 1 << FL_USHIFT an enumerator */
		int s = 0;
		while (s < 63 && !((v >> s) & 1))
			s++;
		SET(value.fl_ushift, s);
	}
	CONST(value.fl_singleton, "RUBY_FL_SINGLETON");
	CONST(imemo.mask, "RUBY_IMEMO_MASK");
	CONST(imemo.ment, "imemo_ment");
	CONST(imemo.iseq, "imemo_iseq");
	CONST(imemo.cref, "imemo_cref");
}

static void fill_threads(struct ctx *c)
{
	/* 3.0+: the VM keeps its threads in ractors */
	if (has(c, "rb_vm_t", "ractor.main_ractor")) {
		SET(vm.main_ractor, off(c, "rb_vm_t", "ractor.main_ractor"));
		SET(vm.main_thread, off(c, "rb_vm_t", "ractor.main_thread"));
		SET(vm.living_threads, -1);
		SET(vm.thread_count, -1);
		SET(vm.gvl_owner, -1);
		SET(ractor.threads_set, off(c, "rb_ractor_t", "threads.set"));
		SET(ractor.threads_cnt, off(c, "rb_ractor_t", "threads.cnt"));
		c->feat = RBP_FEAT_THREAD_STATE;
		/* 3.2+ threads.sched.running, 3.0-3.1 threads.gvl.owner */
		if (has(c, "rb_ractor_t", "threads.sched.running"))
			SET(ractor.gvl_owner, off(c, "rb_ractor_t", "threads.sched.running"));
		else
			SET(ractor.gvl_owner, off(c, "rb_ractor_t", "threads.gvl.owner"));
		SET(ractor.running_ec, off(c, "rb_ractor_t", "threads.running_ec"));
		c->feat = RBP_FEAT_STACKS;
		SET(thread.lt_node, off(c, "rb_thread_t", "lt_node"));
	} else {
		SET(vm.main_ractor, -1);
		SET(vm.main_thread, off(c, "rb_vm_t", "main_thread"));
		SET(vm.living_threads, off(c, "rb_vm_t", "living_threads"));
		SET(vm.thread_count, off(c, "rb_vm_t", "living_thread_num"));
		SET(vm.gvl_owner, off_opt(c, "rb_vm_t", "gvl.owner")); /* 2.5: none */
		SET(ractor.threads_set, -1);
		SET(ractor.threads_cnt, -1);
		SET(ractor.gvl_owner, -1);
		SET(ractor.running_ec, -1);
		SET(thread.lt_node, off(c, "rb_thread_t", "vmlt_node"));
	}
	SET(thread.vm, off(c, "rb_thread_t", "vm"));
	SET(thread.ec, off(c, "rb_thread_t", "ec"));
	struct rbp_dwarf_member ec;
	/* 2.5 embeds the ec in the thread; 2.6+ points at it */
	SET(thread.ec_embedded, !rbp_dwarf_member(c->d, "rb_thread_t", "ec", &ec) &&
				!ec.is_pointer);
	SET(thread.self, off(c, "rb_thread_t", "self"));
	SET(thread.name, off(c, "rb_thread_t", "name"));
	if (has(c, "rb_thread_t", "nt")) {   /* 3.2+: native thread data */
		SET(thread.id, -1);
		SET(thread.tid, -1);
		SET(thread.nt, off(c, "rb_thread_t", "nt"));
		SET(native_thread.tid, off(c, "struct rb_native_thread", "tid"));
	} else {
		SET(thread.id, off(c, "rb_thread_t", "thread_id"));
		SET(thread.tid, off_opt(c, "rb_thread_t", "tid"));  /* 3.1 */
		SET(thread.nt, -1);
		SET(native_thread.tid, -1);
	}
	c->feat = RBP_FEAT_THREAD_STATE;
	SET(thread.status, bits(c, "rb_thread_t", "status"));
	CONST(thread.status_runnable, "THREAD_RUNNABLE");
	CONST(thread.status_stopped, "THREAD_STOPPED");
	CONST(thread.status_stopped_forever, "THREAD_STOPPED_FOREVER");
	CONST(thread.status_killed, "THREAD_KILLED");
	c->feat = RBP_FEAT_STACKS;

	SET(ec.vm_stack, off(c, "rb_execution_context_t", "vm_stack"));
	SET(ec.vm_stack_size, off(c, "rb_execution_context_t", "vm_stack_size"));
	SET(ec.cfp, off(c, "rb_execution_context_t", "cfp"));
	SET(ec.thread_ptr, off(c, "rb_execution_context_t", "thread_ptr"));
}

static void fill_frames(struct ctx *c)
{
	SET(cfp.size, size_of(c, "rb_control_frame_t"));
	SET(cfp.pc, off(c, "rb_control_frame_t", "pc"));
	SET(cfp.sp, off(c, "rb_control_frame_t", "sp"));
	/* 4.1 renamed it _iseq (read through CFP_ISEQ()), same place */
	SET(cfp.iseq, off(c, "rb_control_frame_t",
			  has(c, "rb_control_frame_t", "_iseq") ? "_iseq" : "iseq"));
	SET(cfp.self, off(c, "rb_control_frame_t", "self"));
	SET(cfp.ep, off(c, "rb_control_frame_t", "ep"));
	CONST(env.me_cref, "VM_ENV_DATA_INDEX_ME_CREF");
	CONST(env.specval, "VM_ENV_DATA_INDEX_SPECVAL");
	CONST(env.flags, "VM_ENV_DATA_INDEX_FLAGS");
	CONST(env.flag_local, "VM_ENV_FLAG_LOCAL");
	CONST(frame_magic.mask, "VM_FRAME_MAGIC_MASK");
	CONST(frame_magic.cfunc, "VM_FRAME_MAGIC_CFUNC");
	CONST(frame_magic.method, "VM_FRAME_MAGIC_METHOD");
	CONST(frame_magic.block, "VM_FRAME_MAGIC_BLOCK");
	CONST(frame_magic.class, "VM_FRAME_MAGIC_CLASS");
	CONST(frame_magic.top, "VM_FRAME_MAGIC_TOP");
	CONST(frame_magic.eval, "VM_FRAME_MAGIC_EVAL");
	CONST(frame_magic.rescue, "VM_FRAME_MAGIC_RESCUE");
	CONST(frame_magic.dummy, "VM_FRAME_MAGIC_DUMMY");
	CONST(frame_magic.ifunc, "VM_FRAME_MAGIC_IFUNC");
}

static void fill_iseqs(struct ctx *c)
{
	static const char B[] = "struct rb_iseq_constant_body";
	struct rbp_dwarf_member m;

	SET(iseq.body, off(c, "rb_iseq_t", "body"));
	SET(iseq_body.type, off(c, B, "type"));
	SET(iseq_body.iseq_size, off(c, B, "iseq_size"));
	SET(iseq_body.iseq_encoded, off(c, B, "iseq_encoded"));
	SET(iseq_body.location_pathobj, off(c, B, "location.pathobj"));
	SET(iseq_body.location_base_label, off(c, B, "location.base_label"));
	SET(iseq_body.location_label, off(c, B, "location.label"));
	SET(iseq_body.location_first_lineno, off(c, B, "location.first_lineno"));
	if (rbp_dwarf_member(c->d, B, "location.first_lineno", &m))
		fail(c, B, "location.first_lineno");
	else
		SET(iseq_body.location_first_lineno_size, m.size);
	if (has(c, B, "insns_info.body")) {   /* 2.6+ */
		SET(iseq_body.insns_info_body, off(c, B, "insns_info.body"));
		SET(iseq_body.insns_info_positions, off(c, B, "insns_info.positions"));
		SET(iseq_body.insns_info_size, off(c, B, "insns_info.size"));
		/* VM_INSN_INFO_TABLE_IMPL == 2 */
		SET(iseq_body.insns_info_succ, off_opt(c, B, "insns_info.succ_index_table"));
	} else {   /* 2.5: a plain array */
		SET(iseq_body.insns_info_body, off(c, B, "insns_info"));
		SET(iseq_body.insns_info_positions, -1);
		SET(iseq_body.insns_info_size, off(c, B, "insns_info_size"));
		SET(iseq_body.insns_info_succ, -1);
	}
	/* where a JIT (YJIT, ZJIT, MJIT) keeps the iseq's compiled entry */
	int64_t jit = off_opt(c, B, "jit_entry");
	if (jit < 0)
		jit = off_opt(c, B, "jit_func");
	c->out->jit.entry = jit > 0 && jit < INT16_MAX ? (int16_t)jit : 0;
	SET(iseq_body.local_iseq, off(c, B, "local_iseq"));
	SET(iseq_body.parent_iseq, off(c, B, "parent_iseq"));
	SET(insn_info.size, size_of(c, "struct iseq_insn_info_entry"));
	SET(insn_info.line_no, off(c, "struct iseq_insn_info_entry", "line_no"));
	CONST(iseq_type.top, "ISEQ_TYPE_TOP");
	CONST(iseq_type.method, "ISEQ_TYPE_METHOD");
	CONST(iseq_type.block, "ISEQ_TYPE_BLOCK");
	CONST(iseq_type.class, "ISEQ_TYPE_CLASS");
	CONST(iseq_type.rescue, "ISEQ_TYPE_RESCUE");
	CONST(iseq_type.ensure, "ISEQ_TYPE_ENSURE");
	CONST(iseq_type.eval, "ISEQ_TYPE_EVAL");
	CONST(iseq_type.main, "ISEQ_TYPE_MAIN");
	CONST_OR(iseq_type.plain, "ISEQ_TYPE_PLAIN", 255);   /* 2.5 has none */

	SET(me.flags, off(c, "rb_method_entry_t", "flags"));
	SET(me.defined_class, off(c, "rb_method_entry_t", "defined_class"));
	SET(me.def, off(c, "rb_method_entry_t", "def"));
	SET(me.called_id, off(c, "rb_method_entry_t", "called_id"));
	SET(me.owner, off(c, "rb_method_entry_t", "owner"));
	SET(method_def.type, bits(c, "rb_method_definition_t", "type"));
	SET(method_def.original_id, off(c, "rb_method_definition_t", "original_id"));
	SET(method_def.body_iseq_ptr, off(c, "rb_method_definition_t", "body.iseq.iseqptr"));
	CONST(method_type.iseq, "VM_METHOD_TYPE_ISEQ");
	CONST(method_type.cfunc, "VM_METHOD_TYPE_CFUNC");
	CONST(method_type.bmethod, "VM_METHOD_TYPE_BMETHOD");
}

static void fill_strings(struct ctx *c)
{
	static const char S[] = "struct RString", A[] = "struct RArray";

	CONST(rstring.noembed, "RSTRING_NOEMBED");
	if (has(c, S, "len") || has(c, S, "as.embed.len")) {
		/* 3.2+: the embedded length is a field, not in the flags */
		SET(rstring.embed_len_mask, 0);
		SET(rstring.embed_len_shift, 0);
	} else {
		CONST(rstring.embed_len_mask, "RSTRING_EMBED_LEN_MASK");
		CONST(rstring.embed_len_shift, "RSTRING_EMBED_LEN_SHIFT");
	}
	if (has(c, S, "len")) {   /* 3.3+ */
		SET(rstring.len, off(c, S, "len"));
		SET(rstring.embed_len, -1);
		SET(rstring.embed_ary, off(c, S, "as.embed.ary"));
		SET(rstring.heap_len, -1);
	} else {
		SET(rstring.len, -1);
		SET(rstring.embed_len, off_opt(c, S, "as.embed.len"));   /* 3.2 */
		/* 3.1+ as.embed.ary; before, as.ary */
		SET(rstring.embed_ary, has(c, S, "as.embed.ary") ? off(c, S, "as.embed.ary") :
			off(c, S, "as.ary"));
		SET(rstring.heap_len, off(c, S, "as.heap.len"));
	}
	SET(rstring.heap_ptr, off(c, S, "as.heap.ptr"));

	CONST(rarray.embed_flag, "RARRAY_EMBED_FLAG");
	CONST(rarray.embed_len_mask, "RARRAY_EMBED_LEN_MASK");
	CONST(rarray.embed_len_shift, "RARRAY_EMBED_LEN_SHIFT");
	SET(rarray.embed_ary, off(c, A, "as.ary"));
	SET(rarray.heap_len, off(c, A, "as.heap.len"));
	SET(rarray.heap_ptr, off(c, A, "as.heap.ptr"));
}

static void fill_classes(struct ctx *c)
{
	static const char X[] = "rb_classext_t";
	uint64_t size;

	if (has(c, "struct RClass_and_rb_classext_t", "classext")) {   /* 3.3+ */
		SET(rclass.ext_ptr, -1);
		SET(rclass.ext_inline, off(c, "struct RClass_and_rb_classext_t", "classext"));
	} else if (has(c, "struct RClass", "ptr")) {
		SET(rclass.ext_ptr, off(c, "struct RClass", "ptr"));
		SET(rclass.ext_inline, -1);
	} else if (!rbp_dwarf_sizeof(c->d, "struct RClass", &size)) {
		/* 3.1 with variable-width allocation, 3.2 with several size pools */
		SET(rclass.ext_ptr, -1);
		SET(rclass.ext_inline, size);
	} else {
		fail(c, "struct RClass", NULL);
	}
	SET(classext.iv_tbl, off_opt(c, X, "iv_tbl"));      /* before 3.2 */
	SET(classext.iv_ptr, off_opt(c, X, "iv_ptr"));         /* 3.2-3.4 */
	SET(classext.classpath, off_opt(c, X, "classpath"));   /* 3.3+ */
	SET(classext.attached, off_opt(c, X, "as.singleton_class.attached_object"));
	if (has(c, X, "as.singleton_class.attached_object"))
		SET(classext.id_attached, 0);   /* no __attached__ ivar */
	else
		CONST(classext.id_attached, "id__attached__");

	SET(st.num_entries, off(c, "st_table", "num_entries"));
	SET(st.entries_start, off(c, "st_table", "entries_start"));
	SET(st.entries_bound, off(c, "st_table", "entries_bound"));
	SET(st.entries, off(c, "st_table", "entries"));
	SET(st_entry.size, size_of(c, "struct st_table_entry"));
	SET(st_entry.key, off(c, "struct st_table_entry", "key"));
	SET(st_entry.record, off(c, "struct st_table_entry", "record"));
}

static void fill_symbols(struct ctx *c)
{
	if (has(c, "rb_symbols_t", "next_id")) {   /* 4.0: next_id = last_id + 1 */
		SET(symbols.last_id, off(c, "rb_symbols_t", "next_id"));
		SET(symbols.ids, off(c, "rb_symbols_t", "ids"));
	} else if (has(c, "rb_symbols_t", "last_id")) {   /* 2.7+ */
		SET(symbols.last_id, off(c, "rb_symbols_t", "last_id"));
		SET(symbols.ids, off(c, "rb_symbols_t", "ids"));
	} else {
		SET(symbols.last_id, off(c, "struct symbols", "last_id"));
		SET(symbols.ids, off(c, "struct symbols", "ids"));
	}
	CONST(id.scope_shift, "RUBY_ID_SCOPE_SHIFT");
	CONST(id.last_op_id, "tLAST_OP_ID");
	CONST(id.entry_unit, "ID_ENTRY_UNIT");
	if (has(c, "struct sym_id_entry", "str")) {
		/* 4.1+: each chunk of ids is a T_DATA whose data is an
		 * rb_darray(struct sym_id_entry): a meta header, then entries */
		SET(id.entry_size, size_of(c, "struct sym_id_entry") / 8);
		SET(id.entry_str, off(c, "struct sym_id_entry", "str") / 8);
		SET(id.chunk_data, off(c, "struct RTypedData", "data"));
		SET(id.chunk_first, size_of(c, "rb_darray_meta_t"));
	} else {
		CONST(id.entry_size, "ID_ENTRY_SIZE");
		CONST(id.entry_str, "ID_ENTRY_STR");
		SET(id.chunk_data, -1);
		SET(id.chunk_first, 0);
	}
}

static void fill_gc(struct ctx *c)
{
	static const char O[] = "rb_objspace_t", P[] = "struct heap_page";
	int64_t v;
	uint64_t size;

	c->feat = RBP_FEAT_GC;
	/* 3.4+ gc.objspace, before objspace; a development tree where each
	 * Ractor owns its objspace has neither (named as what is missing) */
	if (has(c, "rb_vm_t", "gc.objspace"))
		SET(vm.objspace, off(c, "rb_vm_t", "gc.objspace"));
	else if (has(c, "rb_vm_t", "objspace") || c->out->major * 100 + c->out->minor < 304)
		SET(vm.objspace, off(c, "rb_vm_t", "objspace"));
	else
		fail(c, "rb_vm_t", "gc.objspace");
	SET(objspace.mode, bits(c, O, "flags.mode"));
	SET(objspace.during_gc, bits(c, O, "flags.during_gc"));
	CONST(objspace.mode_none, "gc_mode_none");
	CONST(objspace.mode_marking, "gc_mode_marking");
	CONST(objspace.mode_sweeping, "gc_mode_sweeping");
	CONST_OR(objspace.mode_compacting, "gc_mode_compacting", 255);   /* 3.2+ */
	c->feat = RBP_FEAT_HEAP;
	SET(objspace.pages_sorted, off(c, O, "heap_pages.sorted"));
	/*
	 * 3.4+: heap_pages.sorted points at an rb_darray (a struct with the
	 * elements in `data`), before at the array itself (struct heap_page **).
	 * 4.0 has allocated_pages too, but the probe reads the darray's length.
	 */
	if (!rbp_dwarf_pointee_member(c->d, O, "heap_pages.sorted", "data", &v)) {
		SET(objspace.pages_count, -1);
		SET(darray.len, off(c, "rb_darray_meta_t", "size"));
		SET(darray.data, v);
	} else {
		SET(objspace.pages_count, off(c, O, "heap_pages.allocated_pages"));
		SET(darray.len, -1);
		SET(darray.data, -1);
	}
	SET(heap_page.start, off(c, P, "start"));
	SET(heap_page.total_slots, off(c, P, "total_slots"));
	SET(heap_page.free_slots, off(c, P, "free_slots"));
	SET(heap_page.slot_size, off_opt(c, P, "slot_size"));   /* 3.1+ */
	/* < 3.4: sizeof(RVALUE); 3.4+ BASE_SLOT_SIZE (a macro, in the DWARF
	 * only when its body is a literal); 4.1+ the smallest of the listed
	 * pool sizes (pool_slot_sizes[0], an array).  When the DWARF has
	 * neither, the table's value stays (the layout note names it): rbpeek
	 * uses it only as the lower bound of a page's slot size */
	if (!rbp_dwarf_sizeof(c->d, "RVALUE", &size))
		SET(heap_page.slot_size_base, size);
	else
		CONST(heap_page.slot_size_base, "BASE_SLOT_SIZE");
	CONST(heap_page.page_size, "HEAP_PAGE_SIZE");
}

/*
 * A feature whose fields the DWARF lacks reads nothing: its offsets are
 * set absent, so that the layout's shape says "none" for it and no reader
 * uses a field taken from elsewhere.  The heap needs the collector's
 * objspace too.
 */
static void unavailable(struct ctx *c)
{
	struct rbp_layout_dwarf_report *r = c->rep;
	const struct rbp_bitfield none = { -1, 0, 0, 0 };

	if ((r->unavailable & (1u << RBP_FEAT_GC)) && !(r->unavailable & (1u << RBP_FEAT_HEAP))) {
		r->unavailable |= 1u << RBP_FEAT_HEAP;
		memcpy(r->feat_missing[RBP_FEAT_HEAP], r->feat_missing[RBP_FEAT_GC],
		       sizeof(r->feat_missing[0]));
	}
	if (r->unavailable & (1u << RBP_FEAT_THREAD_STATE)) {
		SET(vm.gvl_owner, -1);
		SET(ractor.gvl_owner, -1);
		SET(ractor.running_ec, -1);
		SET(thread.status, none);
	}
	if (r->unavailable & (1u << RBP_FEAT_GC)) {
		SET(vm.objspace, -1);
		SET(objspace.mode, none);
		SET(objspace.during_gc, none);
	}
	if (r->unavailable & (1u << RBP_FEAT_HEAP)) {
		SET(objspace.pages_sorted, -1);
		SET(objspace.pages_count, -1);
		SET(darray.len, -1);
		SET(darray.data, -1);
		SET(heap_page.start, -1);
		SET(heap_page.total_slots, -1);
		SET(heap_page.free_slots, -1);
		SET(heap_page.slot_size, -1);
	}
}

static int parse_minor(const char *v, uint8_t *major, uint8_t *minor)
{
	unsigned a, b;

	if (sscanf(v, "%u.%u", &a, &b) != 2 || a > 255 || b > 255)
		return -1;
	*major = (uint8_t)a;
	*minor = (uint8_t)b;
	return 0;
}

int rbp_layout_from_dwarf(struct rbp_dwarf *d, const char *version,
			  const struct rbp_layout *consts, struct rbp_layout *out,
			  struct rbp_layout_dwarf_report *rep)
{
	struct ctx c = { .d = d, .out = out, .rep = rep, .feat = RBP_FEAT_STACKS };
	int err;

	memset(rep, 0, sizeof(*rep));
	if (rbp_layout_n_fields > RBP_LAYOUT_MAX_FIELDS)
		return RBP_EINVAL;
	*out = *consts;
	out->version = out->last = version;
	if (parse_minor(version, &out->major, &out->minor))
		return RBP_EINVAL;
	if (!(c.set = calloc(rbp_layout_n_fields, 1)))
		return RBP_ENOMEM;
	err = rbp_dwarf_index(d, want_types, N(want_types), N_REQUIRED_TYPES, want_consts,
			      N(want_consts),
			      hint_cus, N(hint_cus), &rep->units_read);
	if (!err) {
		fill_objects(&c);
		fill_threads(&c);
		fill_frames(&c);
		fill_iseqs(&c);
		fill_strings(&c);
		fill_classes(&c);
		fill_symbols(&c);
		fill_gc(&c);
		unavailable(&c);
		err = rep->unavailable & (1u << RBP_FEAT_STACKS) ? RBP_ENOSYM : RBP_OK;
		if (err)
			memcpy(rep->missing, rep->feat_missing[RBP_FEAT_STACKS], sizeof(rep->missing));
	}
	/* what the DWARF did not give stays as the table has it: say which */
	size_t n = 0;
	for (size_t i = 0; i < rbp_layout_n_fields; i++) {
		const char *name = rbp_layout_fields[i].name;
		if (c.set[i] || !strcmp(name, "major") || !strcmp(name, "minor"))
			continue;
		rep->n_from_table++;
		rep->from_table_map[i] = 1;
		int w = snprintf(rep->from_table + n, sizeof(rep->from_table) - n, "%s%s",
				 n ? ", " : "", name);
		if (w > 0 && (size_t)w < sizeof(rep->from_table) - n)
			n += (size_t)w;
	}
	free(c.set);
	rbp_layout_set_shape(out);
	return err;
}
