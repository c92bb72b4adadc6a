/*
 * internal.h - state and helpers shared by the files of src/ruby/.  Not for
 * use outside this directory.
 *
 * Reading model: every read goes through rv_read(), which refuses addresses
 * that cannot be user-space pointers before asking the reader.  Values read
 * are untrusted; helpers bound every length and count.
 */
#ifndef RBP_RUBY_INTERNAL_H
#define RBP_RUBY_INTERNAL_H

#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "proc/elf.h"
#include "ruby/layout.h"
#include "ruby/vm.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/strpool.h"

#define RV_MAX_STRING 4096         /* longest label/path/name we read */
#define RV_MAX_THREADS 100000      /* sanity bound on a thread list */
#define RV_MAX_FRAMES 1000000      /* sanity bound on one stack */
#define RV_GC_FLAGS_MAX 128        /* bytes of rb_objspace's head we read for its flags (4.1: at 76) */

/* What we keep about an iseq (keyed by its address). */
struct rv_iseq {
	const char *path;          /* absolute path (realpath when Ruby knows it) */
	const char *label;         /* location.label: "foo", "block in foo", "<main>" */
	const char *base_label;    /* location.base_label: "foo" */
	int32_t first_lineno;
	uint8_t type;              /* enum rb_iseq_type value */
	uint64_t iseq_encoded;     /* start of the bytecode */
	uint32_t iseq_size;        /* in VALUEs */
	uint64_t insns_body;       /* struct iseq_insn_info_entry[] */
	uint64_t insns_positions;  /* unsigned int[] or 0 */
	uint64_t insns_succ;       /* succinct bit vector or 0 */
	uint32_t insns_size;       /* entries */
	uint64_t body;             /* struct rb_iseq_constant_body */
};

struct rbp_vm {
	struct rbp_target *t;           /* not owned */
	const struct rbp_layout *L;
	struct rbp_vm_info info;
	struct rbp_strpool pool;        /* every string handed out */
	struct rbp_elf *elf;            /* the file Ruby lives in */
	struct rbp_elf *debug_elf;      /* its split debug info, when installed */
	const char *ruby_file;          /* that file as opened here (through the target's root) */
	struct rbp_layout layout;       /* L points here: read from DWARF, or a copy of
					 * a table entry, with its shape set */
	char layout_note[640];          /* info.layout_note */
	char feat_missing[RBP_VM_FEATURES][128]; /* info.missing */
	struct rbp_layout_explain explain; /* info.explain */
	uint8_t layout_from_table[256]; /* DWARF layout: fields taken from a table */
	char version[32];

	unsigned discovery;             /* RBP_DISCOVER_* methods allowed */
	uint64_t vm_addr;               /* rb_vm_t */
	int vm_ptr_null;                /* discovery read a null VM pointer (not set up) */
	uint64_t symbols_addr;          /* global symbol table (rb_symbols_t) */
	uint64_t objspace_addr;         /* rb_objspace, 0 until first read (gc.c) */
	uint8_t gc_flags[RV_GC_FLAGS_MAX]; /* its flags, read with a sample's threads: */
	int gc_flags_read;              /* 1 read, 2 the read failed, 0 not read (gc.c) */
	struct rbp_pause *pause;        /* reused by every rv_pause(), NULL until the first */
	uint64_t held_ns;               /* longest hold of the current read (rv_resume) */
	uint64_t hold_budget_ns;        /* rbp_vm_set_hold_budget(); 0: no bound */
	uint64_t pause_budget_ns;       /* the bound rv_pause() sets: hold_budget_ns while
					 * rbp_vm_read_stacks_paused() runs, else 0 */
	struct rbp_pause *holding;      /* threads held while read_stacks() copies, else NULL */
	sigset_t holding_old;           /* ... and the signal mask to restore at release */
	int over_budget;                /* the current read let threads go at the bound */
	const pid_t *only_tids;         /* rbp_vm_read_stacks_tids(): hold these alone */
	size_t n_only_tids;
	pid_t gvl_tid;                  /* the GVL's holder at the last paused read; 0: none */
	uint64_t gvl_th;                /* ... its rb_thread_t */
	uint64_t gvl_word;              /* where the VM names the GVL's owner (walk.c) */
	struct rbp_hmap thread_tids;    /* rb_thread_t -> OS tid, from the last paused read */

	/* caches keyed by remote address; see the .c files for value encodings */
	struct rbp_hmap id_names;       /* ID -> const char * */
	struct rbp_hmap class_paths;    /* class -> const char * ("" anonymous) */
	struct rbp_hmap iseq_index;     /* iseq -> index+1 into iseqs[] */
	struct rbp_hmap lines;          /* mix(iseq, pc) -> line */
	struct rbp_hmap me_labels;      /* mix(kind, me) -> const char * qualified name */
	struct rbp_hmap me_funcs;       /* C method's me -> its C function (cfunc.func) */
	struct rbp_hmap thread_names;   /* Thread#name String VALUE -> const char * */
	struct rv_iseq *iseqs;
	size_t n_iseqs, cap_iseqs;
	uint64_t id_classpath;          /* ID of "__classpath__", 0 until seen */
	int32_t pthread_tid_off;        /* offset of tid in the C library's struct pthread,
					 * for Rubies that keep only pthread_t; 0 unknown */

	/* scratch buffers reused across samples (see walk.c) */
	uint8_t *thr_buf;               /* copies of every rb_thread_t */
	size_t thr_cap;
	struct rbp_read_req *reqs;      /* one batch of reads */
	size_t reqs_cap;
	uint8_t *cfp_buf;               /* every thread's control frames */
	size_t cfp_cap;
	uint8_t *cfp_buf2;              /* verified reads: the same frames copied again */
	size_t cfp_cap2;
	int verify;                     /* read_stacks(): check each unheld copy (walk.c) */
	uint32_t torn;                  /* threads of the last read_stacks() found torn */
	uint8_t *stk_buf;               /* copies of the used parts of the VM stacks */
	size_t stk_cap;
	const uint8_t *stk_cur;         /* the copy of the thread being walked ... */
	uint64_t stk_lo, stk_hi;        /* ... and its address range, [lo, hi) */
	struct rbp_hmap env_words;      /* environment words read with the frames: of those
					 * decoded (rbp_vm_decode_frames), or of environments
					 * off the VM stack (walk.c): address -> word */
	uint64_t *henv;                 /* a sample's off-stack environments: ep, 3 words each */
	size_t henv_n, henv_cap;

	struct rbp_vm_stats stats;
};

/* ---- memory -------------------------------------------------------- */
int rv_read(struct rbp_vm *vm, uint64_t addr, void *buf, size_t len);
/* Many ranges in one go (each req's err set); see rbp_readv(). */
void rv_readv(struct rbp_vm *vm, struct rbp_read_req *v, size_t n);
int rv_word(struct rbp_vm *vm, uint64_t addr, uint64_t *out);
/* A word of the VM stack: from the bulk copy when inside it, else read. */
int rv_stack_word(struct rbp_vm *vm, uint64_t addr, uint64_t *out);

static inline uint64_t rv_u64(const uint8_t *buf, int16_t off)
{
	uint64_t v;
	memcpy(&v, buf + off, 8);
	return v;
}
static inline uint32_t rv_u32(const uint8_t *buf, int16_t off)
{
	uint32_t v;
	memcpy(&v, buf + off, 4);
	return v;
}
uint64_t rv_bitfield(const uint8_t *buf, const struct rbp_bitfield *bf);

/* ---- values -------------------------------------------------------- */
/* 1 when v can be a pointer to a heap object (not a special constant). */
int rv_is_heap(const struct rbp_vm *vm, uint64_t v);
/* The T_xxx type of a heap object, reading its flags (also returned). */
int rv_type(struct rbp_vm *vm, uint64_t v, uint64_t *flags);
/* Bytes of a String into buf (at most cap-1, NUL-terminated); *len set. */
int rv_string(struct rbp_vm *vm, uint64_t str, char *buf, size_t cap, size_t *len);
/* A String interned in the pool. */
int rv_string_intern(struct rbp_vm *vm, uint64_t str, const char **out);
/* Length and element i of an Array. */
int rv_array_len(struct rbp_vm *vm, uint64_t ary, uint64_t *len);
int rv_array_get(struct rbp_vm *vm, uint64_t ary, uint64_t i, uint64_t *out);
/* The name of an ID ("each", "Foo"), interned; RBP_ENOSYM if unknown. */
int rv_id_name(struct rbp_vm *vm, uint64_t id, const char **out);
/* The full path of a class or module ("Foo::Bar"); "" when anonymous. */
int rv_class_path(struct rbp_vm *vm, uint64_t klass, const char **out);
/* The classext of a class: where it points, or inline after struct RClass. */
int rv_class_ext(struct rbp_vm *vm, uint64_t klass, uint64_t *ext);
/* "Foo#" or "Foo." prefix for methods owned by klass; "" when unknown. */
int rv_method_prefix(struct rbp_vm *vm, uint64_t owner, char *buf, size_t cap);

/* ---- iseqs --------------------------------------------------------- */
int rv_iseq(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq **out);
/*
 * rv_iseq() for a frame at pc (0: none): the cached entry is reloaded when
 * pc is not in its bytecode (the address was reused by another iseq);
 * RBP_ETORN when pc is not in the reloaded one either (the frame was
 * copied from a different iseq than the one read now).
 */
int rv_iseq_at(struct rbp_vm *vm, uint64_t iseq, uint64_t pc, const struct rv_iseq **out);
int rv_iseq_line(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq *info,
		 uint64_t pc, int32_t *line);

/* ---- the collector (gc.c) ------------------------------------------ */
/*
 * Set rbp_thread.gc on the thread running the collector, if it runs: from
 * the flags read with the threads when rv_gc_flags_req() gave a request
 * (vm->gc_flags_read says how it went), else by a read of its own.
 */
void rv_gc_mark_threads(struct rbp_vm *vm, struct rbp_stacks *s);
/* A read of the collector's flags to batch with others: 1 when *req is set. */
int rv_gc_flags_req(struct rbp_vm *vm, struct rbp_read_req *req);

/* ---- pausing (hold.c) --------------------------------------------- */
/*
 * Stop every thread of the target (rbp_pause), or only the n threads tids
 * when tids is not NULL, with SIGINT, SIGTERM, SIGHUP
 * and every other asynchronous signal held, so that Ctrl-C or Ctrl-Z cannot
 * leave it stopped; rv_resume() lets it run, delivers what was held, and
 * keeps the longest hold of the current read in vm->held_ns.  Not for core
 * files.
 */
int rv_pause(struct rbp_vm *vm, const pid_t *tids, size_t n, struct rbp_pause **pause,
	     sigset_t *old);
void rv_resume(struct rbp_vm *vm, struct rbp_pause *pause, const sigset_t *old);
/*
 * While read_stacks() copies what it needs from a held target
 * (vm->holding): rv_hold_check() lets the threads go when the hold has
 * lasted over the bound (the read goes on without them held:
 * vm->over_budget), rv_hold_end() once everything is copied -- labels and
 * lines are decoded after that, with the target running.  No-ops when
 * nothing is held.
 */
void rv_hold_check(struct rbp_vm *vm);
void rv_hold_end(struct rbp_vm *vm);

/* ---- native frames (merge.c) ------------------------------------- */
struct rbp_native_sym;
/*
 * The merge of one thread (rules in merge.c): for each native frame k
 * (syms[k], innermost first) the index of the Ruby frame in r (innermost
 * first) it goes above, or -1 when it is left out.  ruby_path names the
 * file Ruby lives in, as the native symbols name modules.
 */
int rv_merge_owners(const char *ruby_path, const struct rbp_frame *r, size_t n_r,
		    const struct rbp_native_sym *const *syms, size_t n_n, long *owner);

/* ---- discovery (discover.c) ---------------------------------------- */
int rv_discover(struct rbp_vm *vm, const struct rbp_vm_opts *opts);
/* The Ruby file's split debug info by build-id (layout_source.c); RBP_ENOSYM. */
int rv_build_id_file(struct rbp_vm *vm, char *path, size_t cap);
/*
 * Choose vm->L (layout_source.c): from the Ruby file's DWARF or a table,
 * as opts->layout says; sets info.layout_*.  RBP_EVERSION when neither
 * fits, RBP_ENODWARF when DWARF was demanded and is missing or incomplete.
 */
int rv_pick_layout(struct rbp_vm *vm, const struct rbp_vm_opts *opts);
/*
 * A plausible rb_objspace at os (gc.c): its page array and first page
 * read as the layout says.  RBP_ECORRUPT when not (a table whose objspace
 * fields moved in this build); RBP_OK when the layout has no heap pages.
 */
int rv_objspace_check(struct rbp_vm *vm, uint64_t os);
/* Bounds on what the heap's page array may claim (gc.c, heap.c). */
#define RV_HEAP_MAX_PAGES (1u << 24)   /* 16M pages: 1 TiB of 64 KiB pages */
#define RV_HEAP_PAGE_HEAD 64           /* bytes of struct heap_page read */
/*
 * At attach, once the stacks validated (gc.c): when what the layout names
 * as the collector's objspace does not read as one (a table whose objspace
 * moved in this build), the gc and heap features are unavailable, named in
 * vm->info like a DWARF layout's missing fields.
 */
void rv_check_objspace(struct rbp_vm *vm);
/* Note a layout source tried (vm->explain); the last one's result is
 * rv_explain_result()'s to change.  Returns the entry, NULL when full. */
struct rbp_layout_attempt *rv_explain(struct rbp_vm *vm, const char *source, const char *where,
				      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void rv_explain_result(struct rbp_vm *vm, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- validation (validate.c) ---------------------------------------- */
/*
 * Check the layout against the process (the main thread's control frames
 * and labels; see validate.c).  need_evidence: fail unless at least one
 * Ruby frame was checked (for an assumed layout).  RBP_ELAYOUT with
 * vm->info.validation saying why when it does not fit.
 */
int rv_validate(struct rbp_vm *vm, int need_evidence);

#endif
