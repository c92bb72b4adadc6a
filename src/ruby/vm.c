/*
 * vm.c - the life cycle of a struct rbp_vm: attach, inspect, free.
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
	err = rv_discover(vm, opts);
	if (opts) {
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
	free(vm->stk_buf);
	free(vm->henv);
	free(vm);
}

const struct rbp_vm_info *rbp_vm_info(const struct rbp_vm *vm)
{
	return &vm->info;
}

void rbp_vm_stats(const struct rbp_vm *vm, struct rbp_vm_stats *out)
{
	*out = vm->stats;
}

void rbp_stacks_free(struct rbp_stacks *s)
{
	free(s->threads);
	free(s->frames);
	free(s->pcs);
	free(s->n_pcs);
	free(s->merged);
	memset(s, 0, sizeof(*s));
}

int rv_pause(struct rbp_vm *vm, const pid_t *tids, size_t n, struct rbp_pause **pause,
	     sigset_t *old)
{
	sigset_t hold;
	int err;

	sigemptyset(&hold);
	sigaddset(&hold, SIGINT);
	sigaddset(&hold, SIGTERM);
	sigaddset(&hold, SIGHUP);
	sigaddset(&hold, SIGQUIT);
	sigprocmask(SIG_BLOCK, &hold, old);
	*pause = NULL;
	if (!vm->pause && (err = rbp_pause_open(vm->t->pid, &vm->pause)))
		goto out;
	if (!(err = tids ? rbp_pause_hold_tids(vm->pause, tids, n) : rbp_pause_hold(vm->pause)))
		*pause = vm->pause;
out:
	if (err)
		sigprocmask(SIG_SETMASK, old, NULL);
	return err;
}

void rv_resume(struct rbp_pause *pause, const sigset_t *old)
{
	rbp_pause_release(pause);
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* Note the thread a read found holding the GVL (tid 0: none). */
static void note_gvl_holder(struct rbp_vm *vm, const struct rbp_stacks *s)
{
	vm->gvl_tid = 0;
	vm->gvl_th = 0;
	for (size_t i = 0; i < s->n_threads; i++)
		if (s->threads[i].has_gvl) {
			vm->gvl_tid = s->threads[i].tid;
			vm->gvl_th = s->threads[i].addr;
			return;
		}
}

/* Read while pause holds threads, note the GVL's holder, and let them go. */
static int read_held(struct rbp_vm *vm, struct rbp_pause *pause, const sigset_t *old,
		     struct rbp_stacks *out)
{
	int err = rbp_vm_read_stacks(vm, out);

	if (err)
		vm->gvl_tid = 0;
	else
		note_gvl_holder(vm, out);
	for (size_t i = 0; !err && i < out->n_threads; i++)
		out->threads[i].running = (int8_t)rbp_pause_running(pause, out->threads[i].tid);
	rv_resume(pause, old);
	return err;
}

/*
 * Read with only the GVL holder stopped: Ruby code runs, and a thread's
 * VM stack changes, only under the GVL, so while its holder is stopped
 * no Ruby stack can change.  The holder is guessed from the last read:
 * once it is stopped, one word (the GVL's owner, vm->gvl_word) confirms
 * the guess before the stacks are read.  1 when there is no guess (no
 * thread held the GVL last time) or it was wrong: the caller stops every
 * thread instead -- a free GVL could be taken during the read -- and that
 * read makes the next guess.
 */
static int read_gvl_paused(struct rbp_vm *vm, struct rbp_stacks *out)
{
	struct rbp_pause *pause = NULL;
	pid_t tid = vm->gvl_tid;
	uint64_t owner;
	sigset_t old;
	int err;

	if (tid <= 0 || !vm->gvl_word || !vm->gvl_th)
		return 1;
	if ((err = rv_pause(vm, &tid, 1, &pause, &old)))
		return err;
	if (!rbp_pause_nthreads(pause) || rv_word(vm, vm->gvl_word, &owner) || owner != vm->gvl_th) {
		rv_resume(pause, &old);
		vm->gvl_tid = 0;
		return 1;
	}
	if ((err = read_held(vm, pause, &old, out)) || vm->gvl_tid == tid)
		return err;
	return 1;
}

int rbp_vm_read_stacks_paused(struct rbp_vm *vm, enum rbp_pause_mode mode, struct rbp_stacks *out)
{
	struct rbp_pause *pause = NULL;
	sigset_t old;
	int err;

	if (mode == RBP_PAUSE_NONE || vm->t->is_core)
		return rbp_vm_read_stacks(vm, out);
	if (mode == RBP_PAUSE_GVL && (err = read_gvl_paused(vm, out)) != 1)
		return err;
	if ((err = rv_pause(vm, NULL, 0, &pause, &old)))
		return err;
	return read_held(vm, pause, &old, out);
}
