/*
 * probe.c - print one `struct rbp_layout` initializer (src/ruby/layout.h)
 * for the Ruby version whose *internal* headers it is compiled against.
 *
 * Built and run by tools/layout/gen, never by the top-level Makefile:
 *
 *   cc -I<ruby>/.ext/include/<arch> -I<ruby>/include -I<ruby> \
 *      -DRBP_TAG_VERSION='"3.1.2"' probe.c && ./a.out
 *
 * Every number printed comes from the compiler (offsetof, sizeof, enum and
 * macro values of that Ruby tree).  Bitfields are located by setting the
 * field to all ones in a zeroed struct and looking at which bits changed.
 * The few definitions that are private to a .c file (st_table_entry,
 * symbol.c's ID_ENTRY_* and, before 2.7, its `struct symbols`) are copied
 * verbatim out of that tag's source by tools/layout/gen into
 * rbpeek-private.h in the build tree.
 */
#include "ruby/ruby.h"
#include "ruby/encoding.h"
#include "vm_core.h"
#include "iseq.h"
#include "method.h"
#include "symbol.h"
#include "id.h"
#include "ruby/st.h"
#include "ruby/version.h"
#if RUBY_API_VERSION_MAJOR >= 3
#include "ractor_core.h"
#include "internal/class.h"
#include "internal/imemo.h"
#else
#include "internal.h"
#endif
#include "rbpeek-private.h"
#include "probe.h"
#if V(4, 1)
#include "darray.h"
/* the darray ids' chunks wrap (symbol.c: rb_darray(struct sym_id_entry)) */
struct rbp_sym_id_darray { rb_darray_meta_t meta; struct sym_id_entry data[]; };
#endif

/* Which shape of RClass / classext this version has. */
#if V(3, 3)
/* classext follows RClass inside struct RClass_and_rb_classext_t */
#define RBP_CLASSEXT_INLINE 1
#define RBP_CLASSEXT_INLINE_OFF offsetof(struct RClass_and_rb_classext_t, classext)
#elif V(3, 2)
#define RBP_CLASSEXT_INLINE (SIZE_POOL_COUNT != 1)
#define RBP_CLASSEXT_INLINE_OFF sizeof(struct RClass)
#elif defined(USE_RVARGC) && USE_RVARGC
#define RBP_CLASSEXT_INLINE 1
#define RBP_CLASSEXT_INLINE_OFF sizeof(struct RClass)
#else
#define RBP_CLASSEXT_INLINE 0
#endif
#define RBP_HAVE_CLASSEXT_IV_TBL (!V(3, 2))
/* 4.0 keeps fields in a `fields_obj` object instead of an iv_ptr array */
#define RBP_HAVE_CLASSEXT_IVPTR (V(3, 2) && !V(4, 0))
#define RBP_HAVE_CLASSEXT_CLASSPATH V(3, 3)
#define RBP_HAVE_CLASSEXT_ATTACHED V(3, 3)
/* 3.2: class ivars (the class path too) are an iv_ptr array indexed by the
 * class's object shape */
#define RBP_CLASS_IVAR_SHAPES (V(3, 2) && !V(3, 3))
#if RBP_CLASS_IVAR_SHAPES
#include "shape.h"
_Static_assert(SHAPE_IN_BASIC_FLAGS, "3.2 on LP64 keeps the shape id in RBasic flags");
_Static_assert(sizeof(attr_index_t) == 4 && sizeof(shape_id_t) == 4, "32-bit shape fields");
#endif

int main(void)
{
	printf("\t{ /* Ruby %s (%s) */\n", RBP_TAG_VERSION, RUBY_PLATFORM);
	printf("\t\t.version = \"%s\",\n", RBP_TAG_VERSION);
	printf("\t\t.last = \"%s\",\n", RBP_TAG_VERSION);
	num("major", RUBY_API_VERSION_MAJOR);
	num("minor", RUBY_API_VERSION_MINOR);

	/* ---- special constants and object flags ---- */
	hex("qnil", (unsigned long long)Qnil);
	hex("qtrue", (unsigned long long)Qtrue);
	hex("qfalse", (unsigned long long)Qfalse);
	hex("qundef", (unsigned long long)Qundef);
	hex("t_mask", (unsigned long long)T_MASK);
	hex("t_string", T_STRING);
	hex("t_array", T_ARRAY);
	hex("t_class", T_CLASS);
	hex("t_module", T_MODULE);
	hex("t_iclass", T_ICLASS);
	hex("t_imemo", T_IMEMO);
	hex("t_object", T_OBJECT);
	hex("t_data", T_DATA);
	num("fl_ushift", FL_USHIFT);
	hex("fl_singleton", (unsigned long long)FL_SINGLETON);
	hex("imemo_mask", IMEMO_MASK);
	num("imemo_ment", imemo_ment);
	num("imemo_iseq", imemo_iseq);
	num("imemo_cref", imemo_cref);

	/* ---- rb_vm_t ---- */
#if V(3, 0)
	OFF("vm_main_ractor", rb_vm_t, ractor.main_ractor);
	OFF("vm_main_thread", rb_vm_t, ractor.main_thread);
	ABSENT("vm_living_threads");
	ABSENT("vm_thread_count");
	ABSENT("vm_gvl_owner");
#else
	ABSENT("vm_main_ractor");
	OFF("vm_main_thread", rb_vm_t, main_thread);
	OFF("vm_living_threads", rb_vm_t, living_threads);
	OFF("vm_thread_count", rb_vm_t, living_thread_num);
#if V(2, 6)
	OFF("vm_gvl_owner", rb_vm_t, gvl.owner);
#else
	ABSENT("vm_gvl_owner"); /* 2.5: gvl.acquired is a flag, no owner */
#endif
#endif

	/* ---- rb_ractor_t ---- */
#if V(3, 0)
	OFF("ractor_threads_set", rb_ractor_t, threads.set);
	OFF("ractor_threads_cnt", rb_ractor_t, threads.cnt);
#if V(3, 2)
	OFF("ractor_gvl_owner", rb_ractor_t, threads.sched.running);
#else
	OFF("ractor_gvl_owner", rb_ractor_t, threads.gvl.owner);
#endif
	OFF("ractor_running_ec", rb_ractor_t, threads.running_ec);
#else
	ABSENT("ractor_threads_set");
	ABSENT("ractor_threads_cnt");
	ABSENT("ractor_gvl_owner");
	ABSENT("ractor_running_ec");
#endif

	/* ---- rb_thread_t ---- */
#if V(3, 0)
	OFF("thread_lt_node", rb_thread_t, lt_node);
#else
	OFF("thread_lt_node", rb_thread_t, vmlt_node);
#endif
	OFF("thread_vm", rb_thread_t, vm);
#if V(2, 6)
	OFF("thread_ec", rb_thread_t, ec);
	num("thread_ec_embedded", 0);
#else
	OFF("thread_ec", rb_thread_t, ec);
	num("thread_ec_embedded", 1);
#endif
	OFF("thread_self", rb_thread_t, self);
	OFF("thread_name", rb_thread_t, name);
#if V(3, 2)
	ABSENT("thread_id");
	ABSENT("thread_tid");
	OFF("thread_nt", rb_thread_t, nt);
	OFF("nt_tid", struct rb_native_thread, tid);
#else
	OFF("thread_id", rb_thread_t, thread_id);
#ifdef RB_THREAD_T_HAS_NATIVE_ID
	OFF("thread_tid", rb_thread_t, tid);
#else
	ABSENT("thread_tid");
#endif
	ABSENT("thread_nt");
	ABSENT("nt_tid");
#endif
	{
		static rb_thread_t th;
		memset(&th, 0, sizeof th);
		th.status = (enum rb_thread_status)~0u;
		bitfield("thread_status", (const unsigned char *)&th, sizeof th);
	}
	num("thread_status_runnable", THREAD_RUNNABLE);
	num("thread_status_stopped", THREAD_STOPPED);
	num("thread_status_stopped_forever", THREAD_STOPPED_FOREVER);
	num("thread_status_killed", THREAD_KILLED);

	/* ---- rb_execution_context_t ---- */
	OFF("ec_vm_stack", rb_execution_context_t, vm_stack);
	OFF("ec_vm_stack_size", rb_execution_context_t, vm_stack_size);
	OFF("ec_cfp", rb_execution_context_t, cfp);
	OFF("ec_thread_ptr", rb_execution_context_t, thread_ptr);

	/* ---- rb_control_frame_t ---- */
	num("cfp_size", sizeof(rb_control_frame_t));
	OFF("cfp_pc", rb_control_frame_t, pc);
	OFF("cfp_sp", rb_control_frame_t, sp);
#if V(4, 1)
	OFF("cfp_iseq", rb_control_frame_t, _iseq); /* renamed, read via CFP_ISEQ() */
#else
	OFF("cfp_iseq", rb_control_frame_t, iseq);
#endif
	OFF("cfp_self", rb_control_frame_t, self);
	OFF("cfp_ep", rb_control_frame_t, ep);

	/* ---- environment ---- */
	num("env_me_cref", VM_ENV_DATA_INDEX_ME_CREF);
	num("env_specval", VM_ENV_DATA_INDEX_SPECVAL);
	num("env_flags", VM_ENV_DATA_INDEX_FLAGS);
	hex("env_flag_local", VM_ENV_FLAG_LOCAL);
	hex("frame_magic_mask", VM_FRAME_MAGIC_MASK);
	hex("frame_magic_cfunc", VM_FRAME_MAGIC_CFUNC);
	hex("frame_magic_method", VM_FRAME_MAGIC_METHOD);
	hex("frame_magic_block", VM_FRAME_MAGIC_BLOCK);
	hex("frame_magic_class", VM_FRAME_MAGIC_CLASS);
	hex("frame_magic_top", VM_FRAME_MAGIC_TOP);
	hex("frame_magic_eval", VM_FRAME_MAGIC_EVAL);
	hex("frame_magic_rescue", VM_FRAME_MAGIC_RESCUE);
	hex("frame_magic_dummy", VM_FRAME_MAGIC_DUMMY);
	hex("frame_magic_ifunc", VM_FRAME_MAGIC_IFUNC);

	/* ---- iseq ---- */
	OFF("iseq_body", rb_iseq_t, body);
	OFF("body_type", struct rb_iseq_constant_body, type);
	OFF("body_iseq_size", struct rb_iseq_constant_body, iseq_size);
	OFF("body_iseq_encoded", struct rb_iseq_constant_body, iseq_encoded);
	OFF("body_location_pathobj", struct rb_iseq_constant_body, location.pathobj);
	OFF("body_location_base_label", struct rb_iseq_constant_body, location.base_label);
	OFF("body_location_label", struct rb_iseq_constant_body, location.label);
	OFF("body_location_first_lineno", struct rb_iseq_constant_body, location.first_lineno);
	num("body_location_first_lineno_size",
	    sizeof(((struct rb_iseq_constant_body *)0)->location.first_lineno));
#if V(2, 6)
	OFF("body_insns_info_body", struct rb_iseq_constant_body, insns_info.body);
	OFF("body_insns_info_positions", struct rb_iseq_constant_body, insns_info.positions);
	OFF("body_insns_info_size", struct rb_iseq_constant_body, insns_info.size);
#if VM_INSN_INFO_TABLE_IMPL == 2
	OFF("body_insns_info_succ", struct rb_iseq_constant_body, insns_info.succ_index_table);
#else
	ABSENT("body_insns_info_succ");
#endif
#else
	/* 2.5: a plain array of {position, line_no, events}, no positions/succ table */
	OFF("body_insns_info_body", struct rb_iseq_constant_body, insns_info);
	ABSENT("body_insns_info_positions");
	OFF("body_insns_info_size", struct rb_iseq_constant_body, insns_info_size);
	ABSENT("body_insns_info_succ");
#endif
	OFF("body_local_iseq", struct rb_iseq_constant_body, local_iseq);
	OFF("body_parent_iseq", struct rb_iseq_constant_body, parent_iseq);
	num("insn_info_size", sizeof(struct iseq_insn_info_entry));
	OFF("insn_info_line_no", struct iseq_insn_info_entry, line_no);
	num("iseq_type_top", ISEQ_TYPE_TOP);
	num("iseq_type_method", ISEQ_TYPE_METHOD);
	num("iseq_type_block", ISEQ_TYPE_BLOCK);
	num("iseq_type_class", ISEQ_TYPE_CLASS);
	num("iseq_type_rescue", ISEQ_TYPE_RESCUE);
	num("iseq_type_ensure", ISEQ_TYPE_ENSURE);
	num("iseq_type_eval", ISEQ_TYPE_EVAL);
	num("iseq_type_main", ISEQ_TYPE_MAIN);
#if V(2, 6)
	num("iseq_type_plain", ISEQ_TYPE_PLAIN);
#else
	num("iseq_type_plain", 255); /* 2.5 has no ISEQ_TYPE_PLAIN */
#endif

	/* ---- method entries ---- */
	OFF("me_flags", rb_method_entry_t, flags);
	OFF("me_defined_class", rb_method_entry_t, defined_class);
	OFF("me_def", rb_method_entry_t, def);
	OFF("me_called_id", rb_method_entry_t, called_id);
	OFF("me_owner", rb_method_entry_t, owner);
	{
		static rb_method_definition_t def;
		memset(&def, 0, sizeof def);
		def.type = (rb_method_type_t)~0u;
		bitfield("def_type", (const unsigned char *)&def, sizeof def);
	}
	OFF("def_original_id", rb_method_definition_t, original_id);
	OFF("def_body_iseq_ptr", rb_method_definition_t, body.iseq.iseqptr);
	num("method_type_iseq", VM_METHOD_TYPE_ISEQ);
	num("method_type_cfunc", VM_METHOD_TYPE_CFUNC);
	num("method_type_bmethod", VM_METHOD_TYPE_BMETHOD);

	/* ---- strings ---- */
	hex("str_noembed", (unsigned long long)RSTRING_NOEMBED);
#if V(3, 2)
	hex("str_embed_len_mask", 0);
	num("str_embed_len_shift", 0);
#else
	hex("str_embed_len_mask", (unsigned long long)RSTRING_EMBED_LEN_MASK);
	num("str_embed_len_shift", RSTRING_EMBED_LEN_SHIFT);
#endif
#if V(3, 3)
	OFF("str_len", struct RString, len);
	ABSENT("str_embed_len");
	OFF("str_embed_ary", struct RString, as.embed.ary);
	ABSENT("str_heap_len");
#elif V(3, 2)
	ABSENT("str_len");
	OFF("str_embed_len", struct RString, as.embed.len);
	OFF("str_embed_ary", struct RString, as.embed.ary);
	OFF("str_heap_len", struct RString, as.heap.len);
#elif V(3, 1)
	ABSENT("str_len");
	ABSENT("str_embed_len");
	OFF("str_embed_ary", struct RString, as.embed.ary);
	OFF("str_heap_len", struct RString, as.heap.len);
#else
	ABSENT("str_len");
	ABSENT("str_embed_len");
	OFF("str_embed_ary", struct RString, as.ary);
	OFF("str_heap_len", struct RString, as.heap.len);
#endif
	OFF("str_heap_ptr", struct RString, as.heap.ptr);

	/* ---- arrays ---- */
	hex("ary_embed_flag", (unsigned long long)RARRAY_EMBED_FLAG);
	hex("ary_embed_len_mask", (unsigned long long)RARRAY_EMBED_LEN_MASK);
	num("ary_embed_len_shift", RARRAY_EMBED_LEN_SHIFT);
	OFF("ary_embed_ary", struct RArray, as.ary);
	OFF("ary_heap_len", struct RArray, as.heap.len);
	OFF("ary_heap_ptr", struct RArray, as.heap.ptr);

	/* ---- classes ---- */
#if RBP_CLASSEXT_INLINE
	ABSENT("class_ext_ptr");
	num("class_ext_inline", RBP_CLASSEXT_INLINE_OFF);
#else
	OFF("class_ext_ptr", struct RClass, ptr);
	ABSENT("class_ext_inline");
#endif
#if RBP_HAVE_CLASSEXT_IV_TBL
	OFF("classext_iv_tbl", rb_classext_t, iv_tbl);
#else
	ABSENT("classext_iv_tbl");
#endif
#if RBP_HAVE_CLASSEXT_IVPTR
	OFF("class_iv_ptr", rb_classext_t, iv_ptr);
#else
	ABSENT("class_iv_ptr");
#endif
#if RBP_HAVE_CLASSEXT_CLASSPATH
	OFF("classext_classpath", rb_classext_t, classpath);
#else
	ABSENT("classext_classpath");
#endif
#if RBP_HAVE_CLASSEXT_ATTACHED
	OFF("classext_attached", rb_classext_t, as.singleton_class.attached_object);
#else
	ABSENT("classext_attached");
#endif
#if RBP_HAVE_CLASSEXT_ATTACHED
	hex("id_attached", 0); /* no __attached__ ivar: classext attached_object */
#else
	hex("id_attached", (unsigned long long)id__attached__);
#endif
#if RBP_CLASS_IVAR_SHAPES
	num("class_ivar_shapes", 1);
	num("shape_id_shift", SHAPE_FLAG_SHIFT);
	OFF("vm_shape_list", rb_vm_t, shape_list);
	num("shape_size", sizeof(rb_shape_t));
	OFF("shape_edge_name", rb_shape_t, edge_name);
	OFF("shape_next_iv_index", rb_shape_t, next_iv_index);
	OFF("shape_type", rb_shape_t, type);
	OFF("shape_parent_id", rb_shape_t, parent_id);
	num("shape_type_ivar", SHAPE_IVAR);
	hex("shape_invalid_id", INVALID_SHAPE_ID);
#else
	num("class_ivar_shapes", 0);
#endif

	/* ---- st_table ---- */
	OFF("st_num_entries", st_table, num_entries);
	OFF("st_entries_start", st_table, entries_start);
	OFF("st_entries_bound", st_table, entries_bound);
	OFF("st_entries", st_table, entries);
	num("st_entry_size", sizeof(struct st_table_entry));
	OFF("st_entry_key", struct st_table_entry, key);
	OFF("st_entry_record", struct st_table_entry, record);

	/* ---- symbols ---- */
#if V(4, 0)
	OFF("symbols_last_id", rb_symbols_t, next_id); /* next_id = last_id + 1 */
	OFF("symbols_ids", rb_symbols_t, ids);
#elif V(2, 7)
	OFF("symbols_last_id", rb_symbols_t, last_id);
	OFF("symbols_ids", rb_symbols_t, ids);
#else
	OFF("symbols_last_id", struct symbols, last_id);
	OFF("symbols_ids", struct symbols, ids);
#endif
	num("id_scope_shift", ID_SCOPE_SHIFT);
	hex("last_op_id", tLAST_OP_ID);
	num("id_entry_unit", ID_ENTRY_UNIT);
#if V(4, 1)
	/* ids[serial / ID_ENTRY_UNIT] is a T_DATA wrapping an rb_darray of
	 * struct sym_id_entry (both private to symbol.c: rbpeek-private.h) */
	num("id_entry_size", sizeof(struct sym_id_entry) / sizeof(VALUE));
	num("id_entry_str", offsetof(struct sym_id_entry, str) / sizeof(VALUE));
	OFF("id_chunk_data", struct RTypedData, data);
	num("id_chunk_first", offsetof(struct rbp_sym_id_darray, data));
#else
	num("id_entry_size", ID_ENTRY_SIZE);
	num("id_entry_str", ID_ENTRY_STR);
	num("id_chunk_data", -1);
	num("id_chunk_first", 0);
#endif
	/* the closing "\t}," comes after probe_gc.c's fields (tools/layout/gen) */
	return 0;
}
