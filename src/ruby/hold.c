/*
 * hold.c - holding a live target's threads stopped for a read: every read
 * that pauses (vm.c's paused reads, validation, the heap count, merging
 * native stacks) takes them through rv_pause()/rv_resume(), and the walker
 * lets them go early through rv_hold_check()/rv_hold_end() once what can
 * change is copied, or when the hold passes its bound.  Asynchronous
 * signals are held meanwhile, so none can stop or kill rbpeek with the
 * target frozen.
 */
#include <signal.h>

#include "ruby/internal.h"

int rv_pause(struct rbp_vm *vm, const pid_t *tids, size_t n, struct rbp_pause **pause,
	     sigset_t *old)
{
	sigset_t hold;
	int err;

	/*
	 * Hold every asynchronous signal while threads are held, so that none
	 * can stop rbpeek (Ctrl-Z: SIGTSTP, SIGTTIN, SIGTTOU) or kill it (INT,
	 * TERM, PIPE, XFSZ, ...) with the target frozen: whatever arrives takes
	 * effect after the release.  SIGKILL and SIGSTOP cannot be held (the
	 * kernel releases a dead tracer's tracees); faults must not be.
	 */
	sigfillset(&hold);
	sigdelset(&hold, SIGSEGV);
	sigdelset(&hold, SIGBUS);
	sigdelset(&hold, SIGFPE);
	sigdelset(&hold, SIGILL);
	sigdelset(&hold, SIGTRAP);
	sigdelset(&hold, SIGSYS);
	sigdelset(&hold, SIGABRT);
	sigprocmask(SIG_BLOCK, &hold, old);
	*pause = NULL;
	if (!vm->pause && (err = rbp_pause_open(vm->t->pid, &vm->pause)))
		goto out;
	rbp_pause_set_budget(vm->pause, (long long)vm->pause_budget_ns);
	if (!(err = tids ? rbp_pause_hold_tids(vm->pause, tids, n) : rbp_pause_hold(vm->pause)))
		*pause = vm->pause;
	if (err == RBP_PAUSE_OVER && (uint64_t)rbp_pause_held_ns(vm->pause) > vm->held_ns)
		vm->held_ns = (uint64_t)rbp_pause_held_ns(vm->pause);
out:
	if (err)
		sigprocmask(SIG_SETMASK, old, NULL);
	return err;
}

void rv_resume(struct rbp_vm *vm, struct rbp_pause *pause, const sigset_t *old)
{
	rbp_pause_release(pause);
	if ((uint64_t)rbp_pause_held_ns(pause) > vm->held_ns)
		vm->held_ns = (uint64_t)rbp_pause_held_ns(pause);
	sigprocmask(SIG_SETMASK, old, NULL);
}

void rv_hold_check(struct rbp_vm *vm)
{
	if (vm->holding && vm->pause_budget_ns &&
	    (uint64_t)rbp_pause_holding_ns(vm->holding) > vm->pause_budget_ns) {
		vm->over_budget = 1;
		rv_hold_end(vm);
	}
}

void rv_hold_end(struct rbp_vm *vm)
{
	if (!vm->holding)
		return;
	rv_resume(vm, vm->holding, &vm->holding_old);
	vm->holding = NULL;
}
