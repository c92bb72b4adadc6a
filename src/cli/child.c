/*
 * child.c - `rbpeek record -- COMMAND`: the program rbpeek starts, attaching
 * to it while it execs its way into Ruby, saying so when it runs none, and
 * its end (see child.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/child.h"
#include "cli/cli.h"
#include "cli/signals.h"
#include "profile/subject.h"
#include "util/err.h"

static pid_t child_pid;
static int child_status = -1;   /* wait status once reaped */

int cli_child_exited(void *ctx)
{
	int st;
	if (child_status >= 0)
		return 1;
	if (waitpid(child_pid, &st, WNOHANG) == child_pid) {
		child_status = st;
		return 1;
	}
	return 0;
}

/* Gone: the program we started has exited. */
static int child_gone(void *ctx)
{
	return child_pid && cli_child_exited(ctx);
}

int cli_child_attach(int pid, int waiting, struct rbp_vm_opts *vo, struct rbp_subject *s)
{
	int err = waiting ? rbp_subject_wait_ruby(s, pid, 1, vo, cli_should_stop, child_gone, NULL) :
		  cli_attach_pid(pid, vo, s);

	if (!err) {
		cli_layout_warning(s->vm);
		cli_feature_warning(s->vm);
	}
	return err;
}

/* A program we started is not Ruby: say so at once, and where Ruby is. */
int cli_child_not_ruby(char **cmd, int pid, struct rbp_vm_opts *vo)
{
	char exe[4096], name[4096];
	int child;

	rbp_process_exe(pid, exe, sizeof(exe));
	fprintf(stderr, "rbpeek: error: '%s' is not a Ruby process (it runs %s)\n", cmd[0],
		*exe ? exe : "a program without libruby");
	if ((child = rbp_ruby_descendant(pid, vo, name, sizeof(name))))
		fprintf(stderr, "hint: it started Ruby as a child (process %d, %s): "
			"--subprocesses records it and every Ruby it starts\n", child, name);
	else
		fprintf(stderr, "hint: run Ruby itself (rbpeek record -- ruby app.rb), or add "
			"--subprocesses to record the Ruby processes it starts\n");
	return EXIT_NOTRUBY;
}

/* Gone before its first sample: say how it ended (a failing program's status is news). */
int cli_child_gone_early(char **cmd)
{
	cli_child_exited(NULL);
	if (child_status >= 0 && WIFSIGNALED(child_status))
		fprintf(stderr, "rbpeek: error: '%s' was ended by signal %d (%s) before its first sample\n",
			cmd[0], WTERMSIG(child_status), strsignal(WTERMSIG(child_status)));
	else if (child_status >= 0)
		fprintf(stderr, "rbpeek: error: '%s' exited with status %d before its first sample\n",
			cmd[0], WEXITSTATUS(child_status));
	else
		fprintf(stderr, "rbpeek: error: '%s' exited before its first sample\n", cmd[0]);
	return EXIT_NOSAMPLES;
}

pid_t cli_child_spawn(char **cmd, unsigned flags)
{
	return child_pid = cli_spawn(cmd, flags);
}

void cli_child_kill(void)
{
	int kids[256];
	/* listed first: once the program is gone they are no longer its descendants */
	size_t n = rbp_descendants(child_pid, kids, sizeof(kids) / sizeof(kids[0]));

	kill(child_pid, SIGTERM);
	for (size_t i = 0; i < n; i++)   /* sh -c 'ruby app.rb': the Ruby would run on, orphaned */
		kill(kids[i], SIGTERM);
	waitpid(child_pid, NULL, 0);
}

int cli_child_end(int duration_reached, int rc)
{
	/*
	 * A program we started ends with us when we were told to stop (the
	 * signal is passed on: Ctrl-C in a terminal reaches it anyway); after
	 * --duration it runs on.
	 */
	if (!cli_child_exited(NULL) && !duration_reached) {
		int sig = cli_stop_signal();
		if (sig)   /* INT, TERM, HUP as they came; the others as a polite TERM */
			kill(child_pid, sig == SIGINT || sig == SIGHUP ? sig : SIGTERM);
		while (waitpid(child_pid, &child_status, 0) < 0 && errno == EINTR)
			;
	}
	/* the profile written, rbpeek exits as the program did (as trace does) */
	if (!rc && child_status >= 0)
		rc = WIFSIGNALED(child_status) ? 128 + WTERMSIG(child_status) : WEXITSTATUS(child_status);
	return rc;
}
