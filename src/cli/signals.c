/*
 * signals.c - stop signals, ignored signals and job control for the
 * commands that watch a process (see signals.h).
 */
#include "cli/signals.h"

#include <signal.h>
#include <stddef.h>

static const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
				 SIGALRM, SIGXCPU, SIGVTALRM, SIGPROF };
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

void cli_signals_init(void)
{
	if (installed)
		return;
	installed = 1;
	set_all(stop_sigs, N(stop_sigs), on_stop);
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
	set_all(stop_sigs, N(stop_sigs), SIG_DFL);
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
