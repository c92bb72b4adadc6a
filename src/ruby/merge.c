/*
 * merge.c - a thread's native stack merged into its Ruby stack (--native).
 *
 * What we have, per thread, read while the target is paused:
 *   R  the Ruby frames (walk.c), innermost first; each C-method frame
 *      carries its C function F (the method entry's body.cfunc.func);
 *   N  the native frames (proc/native.c), innermost first, each with its
 *      function's start address, name, and the file it is in.
 *
 * How the two stacks interleave.  The interpreter runs a Ruby method
 * without any native frame of its own (vm_exec_core loops over the Ruby
 * frames); calling a C method it pushes a Ruby C frame and calls F, so F's
 * native frame is live exactly while that Ruby C frame is.  What F calls
 * (an extension's helpers, libc, OpenSSL) sits above F's frame until F
 * either returns or calls back into Ruby (rb_yield, rb_funcall, ...), which
 * re-enters the interpreter (rb_vm_exec -> vm_exec_core) and runs the next
 * Ruby frames; those may call the next C method, whose F' is above again.
 * Read from the outermost end, the native stack is thus:
 *
 *   main/thread start, interpreter ... F1 callees ... [re-entry] interpreter
 *   ... F2 callees ... [re-entry] interpreter ... F3 callees (innermost)
 *
 * The merge walks N from its outermost frame and keeps an owner, the Ruby
 * C frame whose call the walk is in (none at first):
 *   1. a frame whose function start equals the F of a Ruby C frame not yet
 *      matched (the nearest such frame inwards from the last match: C
 *      methods nest in the same order on both stacks) becomes the owner,
 *      and is kept: it is that method's C function (rb_ary_each,
 *      ossl_digest_update, ext_outer) -- unless it is an unnamed function
 *      of a stripped libruby, which would only repeat the Ruby frame.
 *      Function starts come from the symbol, else from .eh_frame_hdr, so
 *      matching works on stripped files too;
 *   2. with no owner, a frame is dropped (process start-up, the
 *      interpreter between C calls);
 *   3. a frame in Ruby's own file (libruby, or the ruby executable) that
 *      is one of Ruby's entry points into Ruby code (rb_vm_exec, vm_exec*,
 *      rb_yield*, rb_funcall*, rb_block_call, ...: exported, so named even
 *      in a stripped libruby) is a re-entry: dropped, and the owner becomes
 *      none until the next match;
 *   4. another frame in Ruby's own file is kept when that file names its
 *      static functions (.symtab or debug info: rb_ary_sort_bang,
 *      st_foreach, ...) unless it is interpreter plumbing (vm_*, rb_vm_*,
 *      rb_protect, rb_ensure, rb_thread_*, ...), and dropped (folded) when
 *      the file has only .dynsym: an unnamed frame there cannot be told
 *      apart from the interpreter's.  Folding keeps the owner: an
 *      extension can only enter Ruby code through an exported function
 *      (rule 3).  libruby's own C methods may enter it through inlined
 *      static code; then, on a stripped libruby without an exported
 *      rb_vm_exec (3.3), a non-libruby frame the interpreter itself calls
 *      later (memset under the allocator) could be placed above that
 *      outer C method: a rare misplacement, never a lost frame;
 *   5. any other frame (an extension, libc, libcrypto) is kept for the
 *      owner, named by its symbol or "file+0xoffset".
 * Kept frames are placed above their owner's Ruby frame.  A C method whose
 * F has no native frame (F tail-called another function, or the unwind
 * stopped short of it) gets no native frames.  Frames above the innermost
 * Ruby frame when that frame is Ruby code (the VM itself, or the garbage
 * collector) have no owner and are left out: issue 9's GC frames show
 * the collector.
 */
#include "proc/native.h"
#include "ruby/internal.h"
#include "util/vec.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/*
 * Ruby's entry points that run Ruby code (prefixes of names).  Exported,
 * so named even in a stripped libruby (rb_vm_exec is exported by 2.7, 3.1
 * and 3.4 but not 3.3, hence the API functions that lead to it).
 */
static const char *const enter_prefixes[] = {
	"rb_vm_exec", "vm_exec", "rb_yield", "rb_funcall", "rb_call_super", "rb_block_call",
	"rb_iterate", "rb_apply", "rb_eval_string", "rb_proc_call", "rb_method_call",
	"rb_obj_call_init", "rb_class_new_instance", "rb_check_funcall", "rb_lambda_call",
	"rb_fiber_resume", "rb_fiber_transfer", "rb_fiber_yield", "rb_load", "rb_require",
	"rb_vm_invoke", "rb_f_send", "rb_obj_instance_eval", "rb_mod_module_eval",
};

/* The interpreter's other plumbing, folded away (prefixes of names). */
static const char *const plumbing_prefixes[] = {
	"vm_", "rb_vm_", "rb_call", "invoke_", "rb_ec_", "rb_protect", "rb_rescue", "rb_ensure",
	"rb_catch", "rb_exec_recursive", "call_cfunc", "iterate_method", "thread_do_start",
	"thread_start_func", "ruby_run_node", "ruby_exec", "rb_threadptr_", "rb_thread_",
};

static int has_prefix(const char *name, const char *const *prefixes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

#define HAS_PREFIX(name, list) has_prefix(name, list, sizeof(list) / sizeof(list[0]))

/* Index of the nearest C frame inwards from *next (outermost = n-1) whose F is start. */
static long find_cfunc(const struct rbp_frame *r, long next, uint64_t start)
{
	for (long i = next; start && i >= 0; i--)
		if (r[i].kind == RBP_FRAME_CFUNC && r[i].cfunc == start)
			return i;
	return -1;
}

int rv_merge_owners(const char *ruby_path, const struct rbp_frame *r, size_t n_r,
		    const struct rbp_native_sym *const *syms, size_t n_n, long *owner)
{
	long cur = -1, next = (long)n_r - 1;

	for (size_t k = n_n; k-- > 0;) {
		const struct rbp_native_sym *s = syms[k];
		long m = find_cfunc(r, next, s->start);
		int in_ruby = s->module[0] && !strcmp(s->module, ruby_path);
		owner[k] = -1;
		if (m >= 0) {
			cur = m;
			next = m - 1;
			if (s->named || !in_ruby)
				owner[k] = cur;
			continue;
		}
		if (cur < 0)
			continue;
		if (in_ruby) {
			if (s->named && HAS_PREFIX(s->name, enter_prefixes))
				cur = -1;
			else if (s->named && s->full_symbols && !HAS_PREFIX(s->name, plumbing_prefixes))
				owner[k] = cur;
			continue;
		}
		owner[k] = cur;
	}
	return RBP_OK;
}

/* The symbols of a thread's native frames, then their owners. */
static int assign_owners(struct rbp_native *nat, const char *ruby_path,
			 const struct rbp_frame *r, size_t n_r, const uint64_t *pcs, size_t n_n,
			 long *owner)
{
	const struct rbp_native_sym *syms[RBP_NATIVE_MAX_FRAMES];
	int err;

	for (size_t k = 0; k < n_n; k++)
		if ((err = rbp_native_symbol(nat, pcs[k], &syms[k])))
			return err;
	return rv_merge_owners(ruby_path, r, n_r, syms, n_n, owner);
}

/* Append thread th's merged frames to merged[*n]. */
static int merge_thread(struct rbp_vm *vm, struct rbp_native *nat, struct rbp_stacks *s,
			size_t ti, size_t *n)
{
	const struct rbp_thread *th = &s->threads[ti];
	const struct rbp_frame *r = s->frames + th->first_frame;
	const uint64_t *pcs = s->pcs + ti * RBP_NATIVE_MAX_FRAMES;
	size_t n_n = s->n_pcs[ti], k = 0;
	long owner[RBP_NATIVE_MAX_FRAMES];
	int err;

	if ((err = assign_owners(nat, vm->info.ruby_path, r, th->n_frames, pcs, n_n, owner)) ||
	    (err = rbp_grow(&s->merged, &s->cap_merged, *n + th->n_frames + n_n,
			    sizeof(*s->merged))))
		return err;
	for (size_t i = 0; i < th->n_frames; i++) {
		for (; k < n_n && owner[k] <= (long)i; k++) {
			const struct rbp_native_sym *sym;
			if (owner[k] < 0 || rbp_native_symbol(nat, pcs[k], &sym))
				continue;
			s->merged[(*n)++] = (struct rbp_frame){
				.label = sym->name, .path = sym->file, .line = sym->line,
				.kind = RBP_FRAME_NATIVE,
			};
		}
		s->merged[(*n)++] = r[i];
	}
	return RBP_OK;
}

/* While the target is paused: every Ruby thread's native stack. */
static int unwind_all(struct rbp_native *nat, struct rbp_stacks *s)
{
	int err;

	if ((err = rbp_grow(&s->pcs, &s->cap_pcs, s->n_threads * RBP_NATIVE_MAX_FRAMES,
			    sizeof(*s->pcs))) ||
	    (err = rbp_grow(&s->n_pcs, &s->cap_n_pcs, s->n_threads, sizeof(*s->n_pcs))))
		return err;
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct rbp_thread *th = &s->threads[i];
		s->n_pcs[i] = 0;
		if (!th->err && th->tid && th->n_frames)
			rbp_native_unwind(nat, th->tid, s->pcs + i * RBP_NATIVE_MAX_FRAMES,
					  RBP_NATIVE_MAX_FRAMES, &s->n_pcs[i]);
	}
	return RBP_OK;
}

/* Pause, read the Ruby stacks and unwind the native ones, resume. */
static int read_paused(struct rbp_vm *vm, struct rbp_native *nat, struct rbp_stacks *out)
{
	struct rbp_pause *pause = NULL;
	sigset_t old;
	int err;

	if ((err = rv_pause(vm, NULL, 0, &pause, &old)))
		return err;
	err = rbp_vm_read_stacks(vm, out);
	for (size_t i = 0; !err && i < out->n_threads; i++)
		out->threads[i].running = (int8_t)rbp_pause_running(pause, out->threads[i].tid);
	if (!err)
		err = unwind_all(nat, out);
	rv_resume(pause, &old);
	return err;
}

int rbp_vm_read_stacks_native(struct rbp_vm *vm, struct rbp_native *nat, struct rbp_stacks *out)
{
	size_t n = 0;
	int err;

	if (vm->t->is_core)
		return RBP_EINVAL;
	if ((err = read_paused(vm, nat, out)))
		return err;
	rbp_native_refresh(nat);   /* file I/O only now, the target running */
	for (size_t i = 0; i < out->n_threads; i++) {
		struct rbp_thread *th = &out->threads[i];
		size_t first = n;
		if ((err = merge_thread(vm, nat, out, i, &n)))
			return err;
		th->first_frame = first;
		th->n_frames = n - first;
	}
	/* the merged frames become the frames; the old buffer is the next scratch */
	struct rbp_frame *tmp = out->frames;
	size_t tcap = out->cap_frames;
	out->frames = out->merged;
	out->cap_frames = out->cap_merged;
	out->n_frames = n;
	out->merged = tmp;
	out->cap_merged = tcap;
	return RBP_OK;
}
