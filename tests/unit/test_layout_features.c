/*
 * test_layout_features.c - ruby/layout_dwarf.c filling a layout feature by
 * feature, against this very binary's DWARF (unit tests are built with -g).
 *
 * The structs below carry the names and members of Ruby's (a minimal
 * subset of what rbpeek reads, with other members left out), shaped like a
 * development tree newer than every table: rb_vm_t has no objspace (each
 * Ractor owns its own, as Ruby's development line does) and rb_ractor_t
 * names the GVL's holder in a way rbpeek does not know.  What must hold:
 * the stacks' fields come out exactly where the compiler put them, and
 * only the features whose fields are missing (gvl, gc, heap) are
 * unavailable, each naming the field, with their offsets absent so the
 * layout's shape reads nothing for them.  Ruby's own DWARF (the Debian
 * source builds, their mutation variants) is tested end to end in
 * tests/e2e/81-dwarf-layout.rb and 82-layout-validation.rb.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proc/dwarf.h"
#include "ruby/layout.h"
#include "ruby/layout_dwarf.h"
#include "util/err.h"

typedef unsigned long VALUE;

typedef struct rb_vm_struct {
	VALUE self;
	struct {
		void *set[2];
		unsigned int cnt;
		unsigned int blocking_cnt;
		void *dev_inserted;   /* a field the development line added */
		struct rb_ractor_struct *main_ractor;
		struct rb_thread_struct *main_thread;
	} ractor;
	struct {
		void *global_objspace;   /* not what rbpeek reads as the VM's objspace */
	} gc;
} rb_vm_t;

typedef struct rb_ractor_struct {
	VALUE pub[3];
	struct {
		void *set[2];
		unsigned int cnt;
		struct {
			void *owner_renamed;   /* neither sched.running nor gvl.owner */
		} sched;
		void *running_ec;
	} threads;
} rb_ractor_t;

struct rb_native_thread {
	int serial;
	int tid;
};

typedef struct rb_thread_struct {
	void *lt_node[2];
	VALUE self;
	rb_ractor_t *ractor;
	rb_vm_t *vm;
	struct rb_native_thread *nt;
	void *ec;
	VALUE name;
	unsigned int status : 2;
} rb_thread_t;

typedef struct rb_execution_context_struct {
	VALUE *vm_stack;
	size_t vm_stack_size;
	void *cfp;
	void *tag;
	rb_thread_t *thread_ptr;
} rb_execution_context_t;

typedef struct rb_control_frame_struct {
	const VALUE *pc;
	VALUE *sp;
	void *iseq;
	VALUE self;
	const VALUE *ep;
	const void *block_code;
	void *jit_return;
} rb_control_frame_t;

struct rb_iseq_constant_body {
	int type;
	unsigned int iseq_size;
	VALUE *iseq_encoded;
	struct {
		VALUE pathobj, base_label, label;
		int first_lineno;
	} location;
	struct {
		void *body;
		unsigned int *positions;
		unsigned int size;
		void *succ_index_table;
	} insns_info;
	void *local_iseq;
	void *parent_iseq;
};
typedef struct rb_iseq_struct {
	VALUE flags, wrapper;
	struct rb_iseq_constant_body *body;
} rb_iseq_t;
struct iseq_insn_info_entry {
	int line_no;
	int node_id;
	unsigned int events;
};

typedef struct rb_method_entry_struct {
	VALUE flags, defined_class;
	void *def;
	VALUE called_id, owner;
} rb_method_entry_t;
typedef struct rb_method_definition_struct {
	unsigned int type : 4;
	int reference_count;
	union {
		struct {
			void *iseqptr;
		} iseq;
	} body;
	VALUE original_id;
} rb_method_definition_t;

struct RString {
	VALUE flags, klass;
	long len;
	union {
		struct {
			char *ptr;
		} heap;
		struct {
			char ary[1];
		} embed;
	} as;
};
struct RArray {
	VALUE flags, klass;
	union {
		struct {
			long len;
			VALUE *ptr;
		} heap;
		VALUE ary[1];
	} as;
};
struct RClass {
	VALUE flags, klass, super;
	void *ptr;
};
typedef struct rb_classext_struct {
	void *iv_tbl;
	VALUE classpath;
} rb_classext_t;
typedef struct st_table {
	unsigned char entry_power;
	VALUE num_entries;
	VALUE entries_start, entries_bound;
	void *entries;
} st_table;
struct st_table_entry {
	VALUE hash, key, record;
};
typedef struct {
	VALUE last_id;
	VALUE ids;
} rb_symbols_t;

typedef struct rb_objspace {
	struct {
		unsigned int mode : 2;
		unsigned int during_gc : 1;
	} flags;
	struct {
		struct heap_page **sorted;
		size_t allocated_pages;
	} heap_pages;
} rb_objspace_t;
struct heap_page {
	short total_slots, free_slots;
	VALUE start;
	short slot_size;
};

/* Used, so that the compiler keeps every type in the DWARF. */
rb_vm_t fx_vm;
rb_ractor_t fx_ractor;
rb_thread_t fx_thread;
struct rb_native_thread fx_nt;
rb_execution_context_t fx_ec;
rb_control_frame_t fx_cfp;
rb_iseq_t fx_iseq;
struct rb_iseq_constant_body fx_body;
struct iseq_insn_info_entry fx_entry;
rb_method_entry_t fx_me;
rb_method_definition_t fx_def;
struct RString fx_str;
struct RArray fx_ary;
struct RClass fx_class;
rb_classext_t fx_ext;
st_table fx_st;
struct st_table_entry fx_st_entry;
rb_symbols_t fx_symbols;
rb_objspace_t fx_objspace;
struct heap_page fx_page;

int main(void)
{
	struct rbp_dwarf *d = NULL;
	struct rbp_layout L;
	struct rbp_layout_dwarf_report rep;

	TEST("features: open this binary's DWARF") {
		CHECK_EQ_INT(rbp_dwarf_open("/proc/self/exe", &d), RBP_OK);
	}
	if (!d)
		return harness_report();

	TEST("features: stacks from a tree whose VM lost its objspace") {
		CHECK_EQ_INT(rbp_layout_from_dwarf(d, "3.3.8", &rbp_layouts[0], &L, &rep), RBP_OK);
		CHECK_EQ_STR(rep.missing, "");
		CHECK_EQ_INT(L.vm.main_ractor, offsetof(rb_vm_t, ractor.main_ractor));
		CHECK_EQ_INT(L.vm.main_thread, offsetof(rb_vm_t, ractor.main_thread));
		CHECK_EQ_INT(L.thread.vm, offsetof(rb_thread_t, vm));
		CHECK_EQ_INT(L.thread.ec, offsetof(rb_thread_t, ec));
		CHECK_EQ_INT(L.thread.nt, offsetof(rb_thread_t, nt));
		CHECK_EQ_INT(L.native_thread.tid, offsetof(struct rb_native_thread, tid));
		CHECK_EQ_INT(L.ec.cfp, offsetof(rb_execution_context_t, cfp));
		CHECK_EQ_INT(L.ec.thread_ptr, offsetof(rb_execution_context_t, thread_ptr));
		CHECK_EQ_INT(L.cfp.size, sizeof(rb_control_frame_t));
		CHECK_EQ_INT(L.cfp.ep, offsetof(rb_control_frame_t, ep));
		CHECK_EQ_INT(L.iseq_body.location_first_lineno,
			     offsetof(struct rb_iseq_constant_body, location.first_lineno));
		CHECK_EQ_INT(L.iseq_body.insns_info_succ,
			     offsetof(struct rb_iseq_constant_body, insns_info.succ_index_table));
		CHECK_EQ_INT(L.method_def.original_id, offsetof(rb_method_definition_t, original_id));
		CHECK_EQ_INT(L.rstring.len, offsetof(struct RString, len));
		CHECK_EQ_INT(L.shape.threads, RBP_THREADS_IN_RACTOR);
		CHECK_EQ_INT(L.shape.thread_id, RBP_TID_IN_NATIVE_THREAD);
		CHECK_EQ_INT(L.shape.first_lineno, RBP_FIRST_LINENO_INT);
		CHECK_EQ_INT(L.shape.str_len, RBP_STR_LEN_TOP);
	}

	TEST("features: only those whose fields are missing are unavailable, named") {
		CHECK(!(rep.unavailable & (1u << RBP_FEAT_STACKS)));
		CHECK(rep.unavailable & (1u << RBP_FEAT_THREAD_STATE));
		CHECK(rep.unavailable & (1u << RBP_FEAT_GC));
		CHECK(rep.unavailable & (1u << RBP_FEAT_HEAP));
		CHECK_EQ_STR(rep.feat_missing[RBP_FEAT_STACKS], "");
		CHECK_EQ_STR(rep.feat_missing[RBP_FEAT_THREAD_STATE], "rb_ractor_t.threads.gvl.owner");
		CHECK_EQ_STR(rep.feat_missing[RBP_FEAT_GC], "rb_vm_t.objspace");
		/* the heap needs the collector's objspace: the same field */
		CHECK_EQ_STR(rep.feat_missing[RBP_FEAT_HEAP], "rb_vm_t.objspace");
		CHECK_EQ_STR(rbp_feature_name(RBP_FEAT_HEAP), "heap");
	}

	TEST("features: an unavailable feature reads nothing (absent offsets, shape none)") {
		CHECK_EQ_INT(L.vm.objspace, -1);
		CHECK_EQ_INT(L.objspace.pages_sorted, -1);
		CHECK_EQ_INT(L.heap_page.start, -1);
		CHECK_EQ_INT(L.ractor.gvl_owner, -1);
		CHECK_EQ_INT(L.shape.objspace, RBP_OBJSPACE_NONE);
		CHECK_EQ_INT(L.shape.gc_flags, RBP_GC_FLAGS_NONE);
		CHECK_EQ_INT(L.shape.heap_pages, RBP_HEAP_PAGES_NONE);
		CHECK_EQ_INT(L.shape.gvl, RBP_GVL_NONE);
		/* and no field of theirs is reported as taken from the table */
		CHECK(strstr(rep.from_table, "objspace.pages_sorted") == NULL);
	}

	TEST("features: a 3.4+ tree names gc.objspace as what is missing") {
		CHECK_EQ_INT(rbp_layout_from_dwarf(d, "4.1.0", &rbp_layouts[0], &L, &rep), RBP_OK);
		CHECK_EQ_STR(rep.feat_missing[RBP_FEAT_GC], "rb_vm_t.gc.objspace");
		CHECK_EQ_INT(L.shape.heap_pages, RBP_HEAP_PAGES_NONE);
		CHECK_EQ_INT(L.cfp.size, sizeof(rb_control_frame_t));
	}
	rbp_dwarf_close(d);
	return harness_report();
}
