/*
 * signals.c - stop signals, ignored signals and job control for the
 * commands that watch a process (see signals.h).
 */
#include "cli/signals.h"

#include <signal.h>
#include <stddef.h>

/*
 * Every signal whose default action ends the process, except the faults
 * below and SIGKILL; the real-time ones (SIGRTMIN..SIGRTMAX, which glibc
 * numbers at run time) are added in set_stop.
 */
static const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
				 SIGALRM, SIGXCPU, SIGVTALRM, SIGPROF, SIGABRT, SIGIO,
#ifdef SIGPWR
				 SIGPWR,
#endif
#ifdef SIGSTKFLT
				 SIGSTKFLT,
#endif
			       };
/*
 * Signals the kernel sends for a fault of rbpeek's own (a bad address, a
 * trap, a forbidden system call): sent by kill(2) they stop the recording
 * as the others do; a real fault takes its default action (a core dump),
 * since returning from the handler would only fault again.
 */
static const int fault_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
static const int ignored_sigs[] = { SIGPIPE, SIGXFSZ };
static const int job_sigs[] = { SIGTSTP, SIGTTIN, SIGTTOU };

#define N(a) (sizeof(a) / sizeof((a)[0]))

static volatile sig_atomic_t stop_sig;      /* first stop signal, or 0 */
static volatile sig_atomic_t suspend_sig;   /* pending job-control signal, or 0 */
static int installed;

static void on_stop(int sig)
{
	if (!stop_sig)
		stop_sig = sig;
}

/* What the fault signals did before (a sanitizer's report, or the default). */
static struct sigaction fault_before[sizeof(fault_sigs) / sizeof(fault_sigs[0])];

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	if (si && si->si_code <= 0) {   /* SI_USER, SI_QUEUE, SI_TKILL: sent, not a fault */
		on_stop(sig);
		return;
	}
	for (size_t i = 0; i < N(fault_sigs); i++) {
		const struct sigaction *b = &fault_before[i];
		if (fault_sigs[i] != sig)
			continue;
		if ((b->sa_flags & SA_SIGINFO) && b->sa_sigaction) {
			b->sa_sigaction(sig, si, uc);   /* ASan's report, under make asan */
			break;
		}
		if (b->sa_handler != SIG_DFL && b->sa_handler != SIG_IGN) {
			b->sa_handler(sig);
			break;
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);   /* blocked in here: delivered, with its default action, on return */
}

static void on_job(int sig)
{
	suspend_sig = sig;
}

static void set_all(const int *sigs, size_t n, void (*handler)(int))
{
	struct sigaction sa = { 0 };

	sa.sa_handler = handler;   /* no SA_RESTART: sleeps and waits end at once */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++)
		sigaction(sigs[i], &sa, NULL);
}

/* The stop and fault signals, real-time ones included, to handler (or their default). */
static void set_stop(int deflt)
{
	struct sigaction sa = { 0 };

	set_all(stop_sigs, N(stop_sigs), deflt ? SIG_DFL : on_stop);
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		set_all(&sig, 1, deflt ? SIG_DFL : on_stop);
	if (deflt) {
		set_all(fault_sigs, N(fault_sigs), SIG_DFL);
		return;
	}
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N(fault_sigs); i++)
		sigaction(fault_sigs[i], &sa, &fault_before[i]);
}

void cli_signals_init(void)
{
	if (installed)
		return;
	installed = 1;
	set_stop(0);
	set_all(ignored_sigs, N(ignored_sigs), SIG_IGN);
	set_all(job_sigs, N(job_sigs), on_job);
}

int cli_stop_signal(void)
{
	return stop_sig;
}

int cli_suspend_pending(void)
{
	return suspend_sig != 0;
}

int cli_suspend_if_pending(void (*before)(void), void (*after)(void))
{
	int sig = suspend_sig;
	sigset_t set, old;

	if (!sig)
		return 0;
	suspend_sig = 0;
	if (before)
		before();
	/* take the default action (stop) of the signal that asked for it */
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, &old);
	raise(sig);   /* stopped here until SIGCONT */
	sigprocmask(SIG_SETMASK, &old, NULL);
	set_all(&sig, 1, on_job);
	if (after)
		after();
	return 1;
}

void cli_signals_child_defaults(void)
{
	set_stop(1);
	set_all(ignored_sigs, N(ignored_sigs), SIG_DFL);
	set_all(job_sigs, N(job_sigs), SIG_DFL);
}

int cli_should_stop(void *ctx)
{
	(void)ctx;
	return cli_stop_signal() != 0;
}

int cli_suspend(void *ctx)
{
	(void)ctx;
	return cli_suspend_if_pending(NULL, NULL);
}
