/*
 * probe.c - print one `struct rbp_layout` initializer (src/ruby/layout.h)
 * for the Ruby version whose *internal* headers it is compiled against.
 *
 * Built and run by tools/layout/gen, never by the top-level Makefile:
 *
 *   cc -I<ruby>/.ext/include/<arch> -I<ruby>/include -I<ruby> \
 *      -DRBP_TAG_VERSION='"3.1.2"' probe.c && ./a.out
 *
 * The initializer is grouped as struct rbp_layout is, one nested struct a
 * C struct (`.cfp = { .size = 56, ... },`), in the order of layout.h;
 * probe_gc.c prints the collector's groups after these (the order matters
 * only for comparing a regenerated table with the committed one).
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

	group("value");   /* special constants and object flags */
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
	end_group();

	group("imemo");
	hex("mask", IMEMO_MASK);
	num("ment", imemo_ment);
	num("iseq", imemo_iseq);
	num("cref", imemo_cref);
	end_group();

	group("vm");   /* rb_vm_t */
#if V(3, 0)
	OFF("main_ractor", rb_vm_t, ractor.main_ractor);
	OFF("main_thread", rb_vm_t, ractor.main_thread);
	ABSENT("living_threads");
	ABSENT("thread_count");
	ABSENT("gvl_owner");
#else
	ABSENT("main_ractor");
	OFF("main_thread", rb_vm_t, main_thread);
	OFF("living_threads", rb_vm_t, living_threads);
	OFF("thread_count", rb_vm_t, living_thread_num);
#if V(2, 6)
	OFF("gvl_owner", rb_vm_t, gvl.owner);
#else
	ABSENT("gvl_owner"); /* 2.5: gvl.acquired is a flag, no owner */
#endif
#endif
#if V(3, 4)
	OFF("objspace", rb_vm_t, gc.objspace);
#else
	OFF("objspace", rb_vm_t, objspace);
#endif
#if RBP_CLASS_IVAR_SHAPES
	OFF("shape_list", rb_vm_t, shape_list);
#endif
	end_group();

	group("ractor");   /* rb_ractor_t */
#if V(3, 0)
	OFF("threads_set", rb_ractor_t, threads.set);
	OFF("threads_cnt", rb_ractor_t, threads.cnt);
#if V(3, 2)
	OFF("gvl_owner", rb_ractor_t, threads.sched.running);
#else
	OFF("gvl_owner", rb_ractor_t, threads.gvl.owner);
#endif
	OFF("running_ec", rb_ractor_t, threads.running_ec);
#else
	ABSENT("threads_set");
	ABSENT("threads_cnt");
	ABSENT("gvl_owner");
	ABSENT("running_ec");
#endif
	end_group();

	group("thread");   /* rb_thread_t */
#if V(3, 0)
	OFF("lt_node", rb_thread_t, lt_node);
#else
	OFF("lt_node", rb_thread_t, vmlt_node);
#endif
	OFF("vm", rb_thread_t, vm);
	OFF("ec", rb_thread_t, ec);
#if V(2, 6)
	num("ec_embedded", 0);
#else
	num("ec_embedded", 1);
#endif
	OFF("self", rb_thread_t, self);
	OFF("name", rb_thread_t, name);
#if V(3, 2)
	ABSENT("id");
	ABSENT("tid");
	OFF("nt", rb_thread_t, nt);
#else
	OFF("id", rb_thread_t, thread_id);
#ifdef RB_THREAD_T_HAS_NATIVE_ID
	OFF("tid", rb_thread_t, tid);
#else
	ABSENT("tid");
#endif
	ABSENT("nt");
#endif
	{
		static rb_thread_t th;
		memset(&th, 0, sizeof th);
		th.status = (enum rb_thread_status)~0u;
		bitfield("status", (const unsigned char *)&th, sizeof th);
	}
	num("status_runnable", THREAD_RUNNABLE);
	num("status_stopped", THREAD_STOPPED);
	num("status_stopped_forever", THREAD_STOPPED_FOREVER);
	num("status_killed", THREAD_KILLED);
	end_group();

	group("native_thread");   /* struct rb_native_thread */
#if V(3, 2)
	OFF("tid", struct rb_native_thread, tid);
#else
	ABSENT("tid");
#endif
	end_group();

	group("ec");   /* rb_execution_context_t */
	OFF("vm_stack", rb_execution_context_t, vm_stack);
	OFF("vm_stack_size", rb_execution_context_t, vm_stack_size);
	OFF("cfp", rb_execution_context_t, cfp);
	OFF("thread_ptr", rb_execution_context_t, thread_ptr);
	end_group();

	group("cfp");   /* rb_control_frame_t */
	num("size", sizeof(rb_control_frame_t));
	OFF("pc", rb_control_frame_t, pc);
	OFF("sp", rb_control_frame_t, sp);
#if V(4, 1)
	OFF("iseq", rb_control_frame_t, _iseq); /* renamed, read via CFP_ISEQ() */
#else
	OFF("iseq", rb_control_frame_t, iseq);
#endif
	OFF("self", rb_control_frame_t, self);
	OFF("ep", rb_control_frame_t, ep);
	end_group();

	group("env");
	num("me_cref", VM_ENV_DATA_INDEX_ME_CREF);
	num("specval", VM_ENV_DATA_INDEX_SPECVAL);
	num("flags", VM_ENV_DATA_INDEX_FLAGS);
	hex("flag_local", VM_ENV_FLAG_LOCAL);
	end_group();

	group("frame_magic");
	hex("mask", VM_FRAME_MAGIC_MASK);
	hex("cfunc", VM_FRAME_MAGIC_CFUNC);
	hex("method", VM_FRAME_MAGIC_METHOD);
	hex("block", VM_FRAME_MAGIC_BLOCK);
	hex("class", VM_FRAME_MAGIC_CLASS);
	hex("top", VM_FRAME_MAGIC_TOP);
	hex("eval", VM_FRAME_MAGIC_EVAL);
	hex("rescue", VM_FRAME_MAGIC_RESCUE);
	hex("dummy", VM_FRAME_MAGIC_DUMMY);
	hex("ifunc", VM_FRAME_MAGIC_IFUNC);
	end_group();

	group("iseq");   /* rb_iseq_t */
	OFF("body", rb_iseq_t, body);
	end_group();

	group("iseq_body");   /* struct rb_iseq_constant_body */
	OFF("type", struct rb_iseq_constant_body, type);
	OFF("iseq_size", struct rb_iseq_constant_body, iseq_size);
	OFF("iseq_encoded", struct rb_iseq_constant_body, iseq_encoded);
	OFF("location_pathobj", struct rb_iseq_constant_body, location.pathobj);
	OFF("location_base_label", struct rb_iseq_constant_body, location.base_label);
	OFF("location_label", struct rb_iseq_constant_body, location.label);
	OFF("location_first_lineno", struct rb_iseq_constant_body, location.first_lineno);
	num("location_first_lineno_size",
	    sizeof(((struct rb_iseq_constant_body *)0)->location.first_lineno));
#if V(2, 6)
	OFF("insns_info_body", struct rb_iseq_constant_body, insns_info.body);
	OFF("insns_info_positions", struct rb_iseq_constant_body, insns_info.positions);
	OFF("insns_info_size", struct rb_iseq_constant_body, insns_info.size);
#if VM_INSN_INFO_TABLE_IMPL == 2
	OFF("insns_info_succ", struct rb_iseq_constant_body, insns_info.succ_index_table);
#else
	ABSENT("insns_info_succ");
#endif
#else
	/* 2.5: a plain array of {position, line_no, events}, no positions/succ table */
	OFF("insns_info_body", struct rb_iseq_constant_body, insns_info);
	ABSENT("insns_info_positions");
	OFF("insns_info_size", struct rb_iseq_constant_body, insns_info_size);
	ABSENT("insns_info_succ");
#endif
	OFF("local_iseq", struct rb_iseq_constant_body, local_iseq);
	OFF("parent_iseq", struct rb_iseq_constant_body, parent_iseq);
	end_group();

	group("insn_info");   /* struct iseq_insn_info_entry */
	num("size", sizeof(struct iseq_insn_info_entry));
	OFF("line_no", struct iseq_insn_info_entry, line_no);
	end_group();

	group("iseq_type");
	num("top", ISEQ_TYPE_TOP);
	num("method", ISEQ_TYPE_METHOD);
	num("block", ISEQ_TYPE_BLOCK);
	num("class", ISEQ_TYPE_CLASS);
	num("rescue", ISEQ_TYPE_RESCUE);
	num("ensure", ISEQ_TYPE_ENSURE);
	num("eval", ISEQ_TYPE_EVAL);
	num("main", ISEQ_TYPE_MAIN);
#if V(2, 6)
	num("plain", ISEQ_TYPE_PLAIN);
#else
	num("plain", 255); /* 2.5 has no ISEQ_TYPE_PLAIN */
#endif
	end_group();

	group("me");   /* rb_method_entry_t */
	OFF("flags", rb_method_entry_t, flags);
	OFF("defined_class", rb_method_entry_t, defined_class);
	OFF("def", rb_method_entry_t, def);
	OFF("called_id", rb_method_entry_t, called_id);
	OFF("owner", rb_method_entry_t, owner);
	end_group();

	group("method_def");   /* rb_method_definition_t */
	{
		static rb_method_definition_t def;
		memset(&def, 0, sizeof def);
		def.type = (rb_method_type_t)~0u;
		bitfield("type", (const unsigned char *)&def, sizeof def);
	}
	OFF("original_id", rb_method_definition_t, original_id);
	OFF("body_iseq_ptr", rb_method_definition_t, body.iseq.iseqptr);
	end_group();

	group("method_type");
	num("iseq", VM_METHOD_TYPE_ISEQ);
	num("cfunc", VM_METHOD_TYPE_CFUNC);
	num("bmethod", VM_METHOD_TYPE_BMETHOD);
	end_group();

	group("rstring");   /* struct RString */
	hex("noembed", (unsigned long long)RSTRING_NOEMBED);
#if V(3, 2)
	hex("embed_len_mask", 0);
	num("embed_len_shift", 0);
#else
	hex("embed_len_mask", (unsigned long long)RSTRING_EMBED_LEN_MASK);
	num("embed_len_shift", RSTRING_EMBED_LEN_SHIFT);
#endif
#if V(3, 3)
	OFF("len", struct RString, len);
	ABSENT("embed_len");
	OFF("embed_ary", struct RString, as.embed.ary);
	ABSENT("heap_len");
#elif V(3, 2)
	ABSENT("len");
	OFF("embed_len", struct RString, as.embed.len);
	OFF("embed_ary", struct RString, as.embed.ary);
	OFF("heap_len", struct RString, as.heap.len);
#elif V(3, 1)
	ABSENT("len");
	ABSENT("embed_len");
	OFF("embed_ary", struct RString, as.embed.ary);
	OFF("heap_len", struct RString, as.heap.len);
#else
	ABSENT("len");
	ABSENT("embed_len");
	OFF("embed_ary", struct RString, as.ary);
	OFF("heap_len", struct RString, as.heap.len);
#endif
	OFF("heap_ptr", struct RString, as.heap.ptr);
	end_group();

	group("rarray");   /* struct RArray */
	hex("embed_flag", (unsigned long long)RARRAY_EMBED_FLAG);
	hex("embed_len_mask", (unsigned long long)RARRAY_EMBED_LEN_MASK);
	num("embed_len_shift", RARRAY_EMBED_LEN_SHIFT);
	OFF("embed_ary", struct RArray, as.ary);
	OFF("heap_len", struct RArray, as.heap.len);
	OFF("heap_ptr", struct RArray, as.heap.ptr);
	end_group();

	group("rclass");   /* struct RClass */
#if RBP_CLASSEXT_INLINE
	ABSENT("ext_ptr");
	num("ext_inline", RBP_CLASSEXT_INLINE_OFF);
#else
	OFF("ext_ptr", struct RClass, ptr);
	ABSENT("ext_inline");
#endif
	end_group();

	group("classext");   /* rb_classext_t */
#if RBP_HAVE_CLASSEXT_IV_TBL
	OFF("iv_tbl", rb_classext_t, iv_tbl);
#else
	ABSENT("iv_tbl");
#endif
#if RBP_HAVE_CLASSEXT_IVPTR
	OFF("iv_ptr", rb_classext_t, iv_ptr);
#else
	ABSENT("iv_ptr");
#endif
#if RBP_HAVE_CLASSEXT_CLASSPATH
	OFF("classpath", rb_classext_t, classpath);
#else
	ABSENT("classpath");
#endif
#if RBP_HAVE_CLASSEXT_ATTACHED
	OFF("attached", rb_classext_t, as.singleton_class.attached_object);
	hex("id_attached", 0); /* no __attached__ ivar: classext attached_object */
#else
	ABSENT("attached");
	hex("id_attached", (unsigned long long)id__attached__);
#endif
	end_group();

#if RBP_CLASS_IVAR_SHAPES
	group("rb_shape");   /* rb_shape_t, 3.2 only (with vm.shape_list) */
	num("id_shift", SHAPE_FLAG_SHIFT);
	num("size", sizeof(rb_shape_t));
	OFF("edge_name", rb_shape_t, edge_name);
	OFF("next_iv_index", rb_shape_t, next_iv_index);
	OFF("type", rb_shape_t, type);
	OFF("parent_id", rb_shape_t, parent_id);
	num("type_ivar", SHAPE_IVAR);
	hex("invalid_id", INVALID_SHAPE_ID);
	end_group();
#endif

	group("st");   /* st_table */
	OFF("num_entries", st_table, num_entries);
	OFF("entries_start", st_table, entries_start);
	OFF("entries_bound", st_table, entries_bound);
	OFF("entries", st_table, entries);
	end_group();

	group("st_entry");   /* struct st_table_entry */
	num("size", sizeof(struct st_table_entry));
	OFF("key", struct st_table_entry, key);
	OFF("record", struct st_table_entry, record);
	end_group();

	group("symbols");   /* rb_symbols_t, struct symbols before 2.7 */
#if V(4, 0)
	OFF("last_id", rb_symbols_t, next_id); /* next_id = last_id + 1 */
	OFF("ids", rb_symbols_t, ids);
#elif V(2, 7)
	OFF("last_id", rb_symbols_t, last_id);
	OFF("ids", rb_symbols_t, ids);
#else
	OFF("last_id", struct symbols, last_id);
	OFF("ids", struct symbols, ids);
#endif
	end_group();

	group("id");
	num("scope_shift", ID_SCOPE_SHIFT);
	hex("last_op_id", tLAST_OP_ID);
	num("entry_unit", ID_ENTRY_UNIT);
#if V(4, 1)
	/* ids[serial / ID_ENTRY_UNIT] is a T_DATA wrapping an rb_darray of
	 * struct sym_id_entry (both private to symbol.c: rbpeek-private.h) */
	num("entry_size", sizeof(struct sym_id_entry) / sizeof(VALUE));
	num("entry_str", offsetof(struct sym_id_entry, str) / sizeof(VALUE));
	OFF("chunk_data", struct RTypedData, data);
	num("chunk_first", offsetof(struct rbp_sym_id_darray, data));
#else
	num("entry_size", ID_ENTRY_SIZE);
	num("entry_str", ID_ENTRY_STR);
	num("chunk_data", -1);
	num("chunk_first", 0);
#endif
	end_group();
	/* then probe_gc.c's groups, and the closing "\t}," (tools/layout/gen) */
	return 0;
}
