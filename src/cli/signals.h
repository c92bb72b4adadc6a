/*
 * signals.h - how the commands that watch a process (record, top, alloc)
 * take signals, so that none of them loses a recording or leaves the
 * target stopped.
 *
 *   - Stop signals: every signal whose default action would kill rbpeek
 *     (INT, TERM, HUP, QUIT, USR1, USR2, ALRM, XCPU, VTALRM, PROF, ABRT,
 *     IO, PWR, STKFLT, the real-time ones, and SEGV, BUS, FPE, ILL, TRAP,
 *     SYS when sent with kill(2)), possibly while it holds a thread of the
 *     target, and lose the profile.  They are noted (the first one wins)
 *     and end the recording as Ctrl-C does; the profile is written.  A
 *     real fault of rbpeek's own (si_code > 0) still takes its default
 *     action.  Handlers have no SA_RESTART, so a sleep ends at once.
 *   - SIGPIPE and SIGXFSZ are ignored: a closed stderr (`| head -1`) or a
 *     file-size limit turns into a write error (EPIPE, EFBIG) that is
 *     reported, instead of killing rbpeek before the profile is written.
 *   - Job control (TSTP: Ctrl-Z, TTIN, TTOU): their default action stops
 *     rbpeek at once, which could be in the middle of a sample, with
 *     threads of the target held in ptrace-stop: the target would stay
 *     frozen until `fg`.  They are noted instead, and the sampling loop
 *     stops rbpeek for real (cli_suspend_if_pending) between two samples,
 *     when no thread is held; after SIGCONT sampling starts again.
 *
 * SIGSTOP cannot be caught: `kill -STOP` of rbpeek during a sample leaves
 * the held threads stopped until SIGCONT (the docs say so).
 */
#ifndef RBP_CLI_SIGNALS_H
#define RBP_CLI_SIGNALS_H

/* Install the handlers above (idempotent). */
void cli_signals_init(void);
/* The first stop signal received, or 0. */
int cli_stop_signal(void);
/* 1 when a job-control stop (Ctrl-Z) waits to be acted on. */
int cli_suspend_pending(void);
/*
 * If a job-control stop is pending, stop this process now as the signal's
 * default action would, and return 1 once continued (SIGCONT); else
 * return 0 at once.  Call only while no thread of any target is held.
 * before/after (may be NULL) run around the stop: top gives the terminal
 * back and takes it again.
 */
int cli_suspend_if_pending(void (*before)(void), void (*after)(void));
/*
 * The callbacks an engine polls between samples (should_stop and suspend
 * of profile/sampler.h and profile/allocwatch.h), ctx unused: a stop
 * signal received; a pending Ctrl-Z acted on (cli_suspend_if_pending,
 * nothing run around the stop).
 */
int cli_should_stop(void *ctx);
int cli_suspend(void *ctx);
/*
 * In a forked child before exec: every signal this module changed back to
 * its default (an ignored signal stays ignored across exec).
 */
void cli_signals_child_defaults(void);

#endif
