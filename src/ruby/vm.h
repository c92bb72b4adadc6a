/*
 * vm.h - the Ruby VM inside a target: find it, then read every thread's
 * stack as labelled frames.
 *
 *   rbp_vm_attach(target, &opts, &vm)    locate libruby / the ruby binary,
 *                                        read its version, pick the layout,
 *                                        find and validate the VM and the
 *                                        global symbol table
 *   rbp_vm_read_stacks(vm, &stacks)      one consistent-as-possible read of
 *                                        all threads (pause the target
 *                                        around it for full consistency)
 *
 * Everything read from the target is untrusted: every pointer is checked
 * before use, every count bounded; garbage gives an error value, never a
 * crash.  Strings in results (labels, paths, names) are interned in the
 * vm's pool: valid until rbp_vm_free(), equal strings are equal pointers.
 */
#ifndef RBP_RUBY_VM_H
#define RBP_RUBY_VM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/framecap.h"
#include "proc/target.h"
#include "ruby/stacks.h"

struct rbp_vm;

/* Ways of finding the VM, for rbp_vm_opts.discovery (0: all, in this order). */
#define RBP_DISCOVER_SYMBOL 1   /* the exported ruby_current_vm_ptr */
#define RBP_DISCOVER_CODE 2     /* decode the load in ruby_vm_at_exit() */
#define RBP_DISCOVER_SCAN 4     /* scan Ruby's writable segments */

/* Where the layout comes from, for rbp_vm_opts.layout. */
enum rbp_layout_mode {
	RBP_LAYOUT_AUTO = 0,   /* the Ruby file's DWARF when it has it, else the table */
	RBP_LAYOUT_TABLE,      /* the compiled table only (debugging) */
	RBP_LAYOUT_DWARF,      /* DWARF only: fail (RBP_ENODWARF) without it */
};

/*
 * Why a layout was or was not used, one entry per source tried, in order
 * (for `inspect`, and for bug reports: it survives a failed attach).
 * Features are enum rbp_feature (ruby/layout.h): RBP_VM_FEATURES of them.
 */
#define RBP_VM_FEATURES 4
struct rbp_layout_attempt {
	char source[24];          /* "dwarf", "table", "nearest older table" */
	char where[512];          /* the file looked at, or the table's version */
	char result[320];         /* "used", "no such file", "lacks rb_thread_t.ec",
				   * "does not fit (why)", ... */
	unsigned unavailable;     /* used, from DWARF: 1 << feature for each feature
				   * whose fields it lacks */
	char missing[RBP_VM_FEATURES][128]; /* per feature: the first field missing */
};
#define RBP_LAYOUT_MAX_ATTEMPTS 12
struct rbp_layout_explain {
	struct rbp_layout_attempt v[RBP_LAYOUT_MAX_ATTEMPTS];
	size_t n;
};

struct rbp_vm_opts {
	const char *force_version;  /* "X.Y.Z": use this layout whatever the binary says
				     * (a table; implies RBP_LAYOUT_TABLE under AUTO) */
	enum rbp_layout_mode layout;
	int test_no_table;          /* tests only: act as if no table matched the
				     * version (a Ruby newer than rbpeek); constants the
				     * DWARF lacks then come from another X.Y's table */
	struct rbp_layout_cache *layout_cache; /* DWARF layouts by build-id, shared by
				     * attaches to processes running the same
				     * Ruby; NULL for none; not owned */
	unsigned discovery;         /* RBP_DISCOVER_* allowed; 0 means all */
	char found_version[32];     /* out: the version the binary reports, once read
				     * (set even when attach fails with RBP_EVERSION) */
	const char *layout_used;    /* out: the layout entry tried ("4.1.0"), NULL none */
	int layout_assumed;         /* out: 1 when it was the nearest older table */
	const char *layout_problem; /* out: with RBP_ELAYOUT, what did not fit */
	struct rbp_layout_explain *explain; /* out, when not NULL: every layout source
				     * tried and why it was or was not used, on
				     * success or failure; not owned */
};

/*
 * A cache of layouts read from DWARF, keyed by the Ruby file's build-id
 * and version: attaching to many processes of one Ruby (--subprocesses,
 * a young process retried until its VM is up) reads its DWARF once.
 * Failures are cached too.  Not thread-safe.  rbp_layout_cache_new: NULL
 * when out of memory.
 */
struct rbp_layout_cache;
struct rbp_layout_cache *rbp_layout_cache_new(void);
void rbp_layout_cache_free(struct rbp_layout_cache *c);

/* How the VM and the symbol table were found: for `inspect` and bug reports. */
struct rbp_vm_info {
	const char *version;        /* "3.1.2" as the binary reports it */
	const char *layout_version; /* the layout table entry in use; with a DWARF layout,
				     * the version the binary reports */
	const char *layout_source;  /* "dwarf" or "table" */
	const char *layout_path;    /* "dwarf": the file whose DWARF gave it, as the
				     * target sees it (like ruby_path); else "" */
	const char *layout_note;    /* why not DWARF, or which constants came from a
				     * table; "" when nothing to say */
	double layout_ms;           /* time spent reading the DWARF (0 when not read, or
				     * when the layout came from rbp_vm_opts.layout_cache) */
	size_t layout_units;        /* compile units it visited */
	int layout_assumed;         /* 1: no table for this version; the nearest older
				     * one (layout_version) is used because it passed
				     * validation (say so: labels rest on that assumption) */
	const char *validation;     /* "" passed; else what failed (with RBP_ELAYOUT) */
	unsigned unavailable;       /* 1 << enum rbp_feature: features this Ruby's layout
				     * cannot read (a DWARF lacking their fields) */
	const char *missing[RBP_VM_FEATURES]; /* per feature: the field missing, "" */
	const struct rbp_layout_explain *explain; /* the layout sources tried */
	const char *ruby_path;      /* file Ruby lives in, as mapped ("/usr/lib/.../libruby-3.1.so.3.1") */
	uint64_t ruby_bias;         /* its load bias */
	const char *debug_path;     /* split debug info used for symbols, "" none */
	uint64_t vm_addr;           /* rb_vm_t */
	const char *vm_method;      /* "symbol ruby_current_vm_ptr", ... */
	uint64_t symbols_addr;      /* global symbol table */
	const char *symbols_method; /* "decoded rb_sym_immortal_count", ... */
};

int rbp_vm_attach(struct rbp_target *t, struct rbp_vm_opts *opts,
		  struct rbp_vm **out);
/*
 * The struct layout in use (ruby/layout.h).  *from_table, when not NULL,
 * gets per rbp_layout_fields[] index 1 for a field a DWARF layout took from
 * a table (a constant the DWARF lacks); all 0 for a table layout.
 */
struct rbp_layout;
const struct rbp_layout *rbp_vm_layout(const struct rbp_vm *vm, const uint8_t **from_table);
void rbp_vm_free(struct rbp_vm *vm);
const struct rbp_vm_info *rbp_vm_info(const struct rbp_vm *vm);

/*
 * Read every thread.  Returns RBP_OK when the thread list was read; a
 * thread whose own stack failed has its err set and no frames.  Fails only
 * when the VM itself cannot be read (process gone: RBP_ENOPROC; ...).
 */
int rbp_vm_read_stacks(struct rbp_vm *vm, struct rbp_stacks *out);
/*
 * rbp_vm_read_stacks() for one thread only (by OS thread id): out gets that
 * thread alone, or no thread when no Ruby thread has that id.
 */
int rbp_vm_read_thread_stack(struct rbp_vm *vm, pid_t tid, struct rbp_stacks *out);

/*
 * The thread list alone (addresses, tids, names; no frames): n_frames 0.
 */
int rbp_vm_read_threads(struct rbp_vm *vm, struct rbp_stacks *out);

/*
 * Frames copied elsewhere at one moment - by the kernel at a probe hit
 * (proc/framecap.h) - decoded like a stack read: the same walker, reading
 * the frames and their environment words from the copy instead of the
 * live stack (iseqs, method entries and strings are read live: they do
 * not move).  out gets one thread (tid, no name) with its frames.
 */
int rbp_vm_decode_frames(struct rbp_vm *vm, const struct rbp_frame_copy *c, struct rbp_stacks *out);
/* Where the copy finds things in this Ruby (for rbp_framecap_open). */
void rbp_vm_framecap_layout(const struct rbp_vm *vm, struct rbp_framecap_layout *out);

/*
 * rbp_vm_read_stacks() with the target paused around the read (ptrace
 * SEIZE + INTERRUPT, see proc/target.h), unless the target is a core
 * file.  SIGINT, SIGTERM, SIGHUP and SIGQUIT are held while the target is
 * paused and delivered after it runs again, so Ctrl-C can never leave it
 * stopped.  rbp_thread.running is known (not -1) for the threads stopped.
 */
enum rbp_pause_mode {
	/*
	 * Read while the target runs (--nonblocking), verified: each thread's
	 * control frames are copied twice around the copy of the VM stack
	 * they point into, and a thread whose copies disagree is torn
	 * (rbp_thread.err RBP_ETORN, no frames; see walk.c); the read is
	 * made once more when one tore, and what tears again is left torn.
	 */
	RBP_PAUSE_NONE,
	RBP_PAUSE_ALL,    /* stop every thread */
	/*
	 * Stop only the thread holding the GVL -- no Ruby stack can change
	 * while it is stopped -- and every thread when none holds it (one
	 * could take it during the read).  Stacks are as consistent as with
	 * RBP_PAUSE_ALL; threads without the GVL are not interrupted.
	 */
	RBP_PAUSE_GVL,
	/*
	 * The default: RBP_PAUSE_NONE's verified read, and only when it tore
	 * twice, an RBP_PAUSE_GVL read (the GVL's holder stopped: the only
	 * thread whose stack can change).  Most reads stop nothing.
	 */
	RBP_PAUSE_VERIFY,
};
int rbp_vm_read_stacks_paused(struct rbp_vm *vm, enum rbp_pause_mode mode, struct rbp_stacks *out);
/*
 * Bound how long rbp_vm_read_stacks_paused() keeps any thread stopped, in
 * nanoseconds (0: no bound, the default).  Only what can change is copied
 * while threads are held (thread list, control frames, the used part of
 * each VM stack); labels and lines are decoded after the release.  The
 * bound is checked while waiting for the threads to stop and between
 * those copies: once it is reached, the threads are let go and the read
 * finishes without them (out->over_budget).  A thread is thus held at
 * most the bound plus one read of its memory, unless the kernel does not
 * run rbpeek meanwhile.  Not for rbp_vm_read_stacks_native().
 */
void rbp_vm_set_hold_budget(struct rbp_vm *vm, uint64_t ns);
/*
 * rbp_vm_read_stacks_paused(RBP_PAUSE_ALL) holding only the n threads tids
 * (what each was doing is read at its stop; the others' running is -1):
 * --on-cpu holds the threads /proc shows runnable, and never interrupts a
 * sleeping one -- stopping it would wake it, and it would then show as
 * runnable at the next tick while it goes back to sleep.
 */
int rbp_vm_read_stacks_tids(struct rbp_vm *vm, const pid_t *tids, size_t n, struct rbp_stacks *out);

/*
 * rbp_vm_read_stacks_paused() plus each thread's native stack, unwound
 * with nat while the target is paused, symbolized and merged into the
 * thread's frames after it runs again (see ruby/merge.c): native frames
 * (RBP_FRAME_NATIVE) of the C functions a C method calls appear above
 * that method's frame; the interpreter's own frames are left out.  A
 * thread whose native stack cannot be read keeps its Ruby frames.  Never
 * nonblocking: a running thread's stack cannot be unwound.
 */
struct rbp_native;
int rbp_vm_read_stacks_native(struct rbp_vm *vm, struct rbp_native *nat,
			      struct rbp_stacks *out);

/* Read statistics since attach: reads issued, bytes, cache hits. */
struct rbp_vm_stats {
	uint64_t reads, bytes;
	uint64_t line_cache_hits, line_cache_misses;
	/* verified reads (RBP_PAUSE_VERIFY, RBP_PAUSE_NONE): threads whose two
	 * copies disagreed (torn, not shown) */
	uint64_t torn;
	/* labels and lines decoded after the copy, checked against it: a
	 * cached iseq whose address now holds another (reloaded), and frames
	 * dropped because what was decoded did not fit the copy (an iseq the
	 * frame's pc is not in, a method entry that is not the frame's method) */
	uint64_t iseq_reloads, labels_unverified;
};
void rbp_vm_stats(const struct rbp_vm *vm, struct rbp_vm_stats *out);

#endif
