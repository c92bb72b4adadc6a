/*
 * child.h - the program `rbpeek record -- COMMAND` starts (one per run).
 *
 * It is started as the invoking user under sudo (cli_spawn), attached to
 * once its Ruby VM is up (it may exec through wrappers first), and ended
 * with rbpeek when rbpeek is told to stop; rbpeek then exits as it did.
 */
#ifndef RBP_CLI_CHILD_H
#define RBP_CLI_CHILD_H

#include <sys/types.h>

struct rbp_subject;
struct rbp_vm_opts;

/* Start cmd (cli_spawn with flags): its pid, or -1 with the error printed. */
pid_t cli_child_spawn(char **cmd, unsigned flags);
/* 1 once the program has exited (reaped; ctx unused: the sampler's child_exited). */
int cli_child_exited(void *ctx);
/*
 * Attach to process pid into s (the layout warning printed), waiting while
 * its VM is not up yet and, for the program we started (waiting), while it
 * may still exec Ruby (rbp_subject_wait_ruby); gives up on a stop signal,
 * or when the program is gone (RBP_ENOPROC).  Returns an RBP_E* code; s is
 * open on success only.
 */
int cli_child_attach(int pid, int waiting, struct rbp_vm_opts *vo, struct rbp_subject *s);
/* The program we started is not Ruby: says so, and where Ruby is; EXIT_NOTRUBY. */
int cli_child_not_ruby(char **cmd, int pid, struct rbp_vm_opts *vo);
/*
 * The program exited before its first sample: says so, with its exit status
 * or signal when it has been reaped; EXIT_NOSAMPLES (rbpeek's code wins: no
 * profile was written).
 */
int cli_child_gone_early(char **cmd);
/* End the program and what it started at once (SIGTERM) and reap it: attaching failed. */
void cli_child_kill(void);
/*
 * The recording is over: unless it has exited, or duration_reached (it
 * runs on), pass the stop signal on and wait for it.  Returns rc, or when
 * rc is 0 the program's exit status (128+N for signal N).
 */
int cli_child_end(int duration_reached, int rc);

#endif
