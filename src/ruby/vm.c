/*
 * vm.c - the life cycle of a struct rbp_vm (attach, inspect, free) and its
 * paused reads (threads held through hold.c while the walker reads them).
 */
#include "ruby/internal.h"

#include <signal.h>
#include <stdlib.h>

int rbp_vm_attach(struct rbp_target *t, struct rbp_vm_opts *opts,
		  struct rbp_vm **out)
{
	struct rbp_vm *vm = calloc(1, sizeof(*vm));
	int err;

	if (!vm)
		return RBP_ENOMEM;
	vm->t = t;
	vm->info.vm_method = vm->info.symbols_method = vm->info.debug_path = "";
	vm->info.layout_source = vm->info.layout_path = vm->info.layout_note = "";
	for (int f = 0; f < RBP_VM_FEATURES; f++)
		vm->info.missing[f] = vm->feat_missing[f];
	vm->info.explain = &vm->explain;
	err = rv_discover(vm, opts);
	if (opts) {
		if (opts->explain)
			*opts->explain = vm->explain;
		memcpy(opts->found_version, vm->version, sizeof(opts->found_version));
		/* static strings (the table, validate.c): they outlive vm */
		opts->layout_used = vm->L ? vm->L->version : NULL;
		opts->layout_assumed = vm->info.layout_assumed;
		opts->layout_problem = vm->info.validation;
	}
	if (err) {
		rbp_vm_free(vm);
		return err;
	}
	*out = vm;
	return RBP_OK;
}

void rbp_vm_free(struct rbp_vm *vm)
{
	if (!vm)
		return;
	rbp_pause_close(vm->pause);
	rbp_elf_close(vm->elf);
	rbp_elf_close(vm->debug_elf);
	rbp_hmap_clear(&vm->thread_tids);
	rbp_hmap_clear(&vm->id_names);
	rbp_hmap_clear(&vm->class_paths);
	rbp_hmap_clear(&vm->iseq_index);
	rbp_hmap_clear(&vm->lines);
	rbp_hmap_clear(&vm->me_labels);
	rbp_hmap_clear(&vm->me_funcs);
	rbp_hmap_clear(&vm->thread_names);
	rbp_hmap_clear(&vm->env_words);
	rbp_strpool_free(&vm->pool);
	free(vm->iseqs);
	free(vm->thr_buf);
	free(vm->reqs);
	free(vm->cfp_buf);
	free(vm->cfp_buf2);
	free(vm->stk_buf);
	free(vm->henv);
	free(vm);
}

const struct rbp_vm_info *rbp_vm_info(const struct rbp_vm *vm)
{
	return &vm->info;
}

const struct rbp_layout *rbp_vm_layout(const struct rbp_vm *vm, const uint8_t **from_table)
{
	if (from_table)
		*from_table = vm->layout_from_table;
	return vm->L;
}

void rbp_vm_stats(const struct rbp_vm *vm, struct rbp_vm_stats *out)
{
	*out = vm->stats;
}

/*
 * Note the thread a read found holding the GVL (tid 0: none), and every
 * thread's rb_thread_t -> tid, to find the next holder from the GVL's
 * owner word alone.
 */
static void note_gvl_holder(struct rbp_vm *vm, const struct rbp_stacks *s)
{
	vm->gvl_tid = 0;
	vm->gvl_th = 0;
	rbp_hmap_reset(&vm->thread_tids);
	for (size_t i = 0; i < s->n_threads; i++)
		if (s->threads[i].addr && s->threads[i].tid > 0 &&
		    rbp_hmap_put(&vm->thread_tids, s->threads[i].addr, (uint64_t)s->threads[i].tid))
			break;   /* out of memory: fewer guesses, nothing worse */
	for (size_t i = 0; i < s->n_threads; i++)
		if (s->threads[i].has_gvl) {
			vm->gvl_tid = s->threads[i].tid;
			vm->gvl_th = s->threads[i].addr;
			return;
		}
}

/*
 * Read while pause holds threads (read_stacks() lets them go once it has
 * copied what can change, or at the bound), and note the GVL's holder.
 */
static int read_held(struct rbp_vm *vm, struct rbp_pause *pause, const sigset_t *old,
		     struct rbp_stacks *out)
{
	vm->holding = pause;
	vm->holding_old = *old;
	int err = rbp_vm_read_stacks(vm, out);

	rv_hold_end(vm);
	if (err)
		vm->gvl_tid = 0;
	else
		note_gvl_holder(vm, out);
	/* what each was doing when it stopped: known, whether let go early or not */
	for (size_t i = 0; !err && i < out->n_threads; i++)
		out->threads[i].running = (int8_t)rbp_pause_running(pause, out->threads[i].tid);
	return err;
}

/*
 * Read with only the GVL holder stopped: Ruby code runs, and a thread's
 * VM stack changes, only under the GVL, so while its holder is stopped
 * no Ruby stack can change.  The holder is guessed from the last read, or
 * when that guess is wrong or missing, from the GVL's owner word read
 * without stopping anything (a thread the last read saw).  Once the guess
 * is stopped, the same word confirms it before the stacks are read; a
 * wrong guess is corrected once the same way.  1 when there is still no
 * confirmed holder (the GVL is free or being handed over, or held by a
 * thread the last read did not see): the caller stops every thread
 * instead -- a free GVL could be taken during the read -- and that read
 * makes the next guess.
 */
static int read_gvl_paused(struct rbp_vm *vm, struct rbp_stacks *out)
{
	struct rbp_pause *pause = NULL;
	pid_t tid = vm->gvl_tid;
	uint64_t th = vm->gvl_th, owner = 0, v;
	sigset_t old;
	int err;

	if (!vm->gvl_word)
		return 1;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (tid <= 0 || !th) {
			/* ask the VM who holds it now: one word, nothing stopped */
			if ((!owner && rv_word(vm, vm->gvl_word, &owner)) || !owner ||
			    !rbp_hmap_get(&vm->thread_tids, owner, &v))
				break;
			tid = (pid_t)v;
			th = owner;
		}
		if ((err = rv_pause(vm, &tid, 1, &pause, &old)))
			return err;
		owner = 0;
		if (rbp_pause_nthreads(pause) && !rv_word(vm, vm->gvl_word, &owner) && owner == th) {
			if ((err = read_held(vm, pause, &old, out)) || vm->gvl_tid == tid)
				return err;
			return 1;
		}
		rv_resume(vm, pause, &old);
		tid = 0;   /* wrong: the owner word just read names the next guess */
		th = 0;
	}
	vm->gvl_tid = 0;
	return 1;
}

void rbp_vm_set_hold_budget(struct rbp_vm *vm, uint64_t ns)
{
	vm->hold_budget_ns = ns;
}

static int read_paused(struct rbp_vm *vm, enum rbp_pause_mode mode, struct rbp_stacks *out)
{
	struct rbp_pause *pause = NULL;
	sigset_t old;
	int err;

	if (mode == RBP_PAUSE_GVL && (err = read_gvl_paused(vm, out)) != 1)
		return err;
	if ((err = rv_pause(vm, vm->only_tids, vm->n_only_tids, &pause, &old)) == RBP_PAUSE_OVER) {
		/* threads took too long to stop: read as --nonblocking does */
		vm->over_budget = 1;
		vm->gvl_tid = 0;
		return rbp_vm_read_stacks(vm, out);
	}
	return err ? err : read_held(vm, pause, &old, out);
}

int rbp_vm_read_stacks_tids(struct rbp_vm *vm, const pid_t *tids, size_t n, struct rbp_stacks *out)
{
	static const pid_t none = 0;
	int err;

	vm->only_tids = tids ? tids : &none;
	vm->n_only_tids = tids ? n : 0;
	if (!vm->pause && !vm->t->is_core && (err = rbp_pause_open(vm->t->pid, &vm->pause)))
		return err;
	if (vm->pause)
		rbp_pause_tids_state(vm->pause, 1);
	err = rbp_vm_read_stacks_paused(vm, RBP_PAUSE_ALL, out);
	if (vm->pause)
		rbp_pause_tids_state(vm->pause, 0);
	vm->only_tids = NULL;
	vm->n_only_tids = 0;
	return err;
}

/* A verified read without stopping anything, made again once when a thread tore. */
static int read_verified(struct rbp_vm *vm, struct rbp_stacks *out)
{
	int err;

	vm->verify = 1;
	err = rbp_vm_read_stacks(vm, out);
	if (!err && vm->torn) {
		out->torn_reads++;
		err = rbp_vm_read_stacks(vm, out);
		out->torn_reads += !err && vm->torn;
	}
	vm->verify = 0;
	if (!err)
		note_gvl_holder(vm, out);   /* the holder to stop, should a read tear twice */
	return err;
}

int rbp_vm_read_stacks_paused(struct rbp_vm *vm, enum rbp_pause_mode mode, struct rbp_stacks *out)
{
	int err;

	out->held_ns = vm->held_ns = 0;
	out->over_budget = 0;
	out->torn_reads = out->stopped = 0;
	if (vm->t->is_core)
		return rbp_vm_read_stacks(vm, out);
	if (mode == RBP_PAUSE_NONE || mode == RBP_PAUSE_VERIFY) {
		err = read_verified(vm, out);
		if (err || mode == RBP_PAUSE_NONE || out->torn_reads < 2)
			return err;
		/* torn twice: stop the one thread that can change its stack */
		out->stopped = 1;
		mode = RBP_PAUSE_GVL;
	}
	vm->over_budget = 0;
	vm->pause_budget_ns = vm->hold_budget_ns;
	err = read_paused(vm, mode, out);
	vm->pause_budget_ns = 0;
	out->held_ns = vm->held_ns;
	out->over_budget = (uint8_t)vm->over_budget;
	return err;
}
