/*
 * spawn.c - starting the program of `record -- CMD` and `trace -- CMD`.
 *
 * Under sudo (running as root with SUDO_UID and SUDO_GID set) the program
 * runs as the user who invoked sudo, with that user's groups and no
 * capability at all (inheritable and ambient sets cleared too): it should
 * create its files as that user and never be more privileged than that
 * user because a profiler was put in front of it.  `record` reads the
 * program from outside and needs nothing of it.  `trace` runs its tracer
 * inside the program; the tracer's kernel streams (syscalls, scheduler
 * states) need CAP_PERFMON, which would let any program opened this way
 * sample every process of the machine, root's included (issue 23), so
 * under sudo they work only when the user may use them without rbpeek
 * (kernel.perf_event_paranoid=-1).  For that case the tracepoint
 * descriptions, which only root may read in tracefs, are copied
 * (profile/tracefs.h) into a root-owned directory the user may read,
 * named to the tracer by $RBPEEK_TRACEFS.
 *
 * Whether exec worked is told by a close-on-exec pipe: the child writes its
 * errno to it only when exec (or the change of user) fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "cli/signals.h"
#include "profile/tracefs.h"

/* No capability left, in any set (setuid cleared the others already). */
static int drop_all_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d))
		return -1;
	/* kernels before 4.3 have no ambient set: nothing to clear there */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return -1;
	if (syscall(SYS_capget, &h, d))
		return -1;
	for (int i = 0; i < 2; i++) {
		if (d[i].effective || d[i].permitted || d[i].inheritable) {
			errno = EPERM;
			return -1;
		}
	}
	return 0;
}

/* In the child: become the invoking user, with no capability. */
static int become_invoker(unsigned flags)
{
	struct cli_invoker inv;

	if (!(flags & CLI_SPAWN_AS_INVOKER) || !cli_invoker(&inv))
		return 0;
	if (cli_become_invoker(&inv, 0))
		return -1;
	return drop_all_caps();
}

int cli_spawn(char **cmd, unsigned flags)
{
	int fds[2], e = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(NULL);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		close(fds[0]);
		cli_signals_child_defaults();
		if (become_invoker(flags)) {
			e = errno;
			fprintf(stderr, "rbpeek: error: cannot run '%s' as uid %s: %s\n", cmd[0],
				getenv("SUDO_UID"), strerror(e));
			_exit(126);
		}
		execvp(cmd[0], cmd);
		e = errno;
		if (write(fds[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], &e, sizeof(e));
	close(fds[0]);
	if (n == sizeof(e)) {
		waitpid(pid, NULL, 0);
		fprintf(stderr, "rbpeek: error: cannot run '%s': %s\n", cmd[0], strerror(e));
		return -1;
	}
	return pid;
}

/* The copy itself is the engine's (profile/tracefs.c); here: when. */
char *cli_tracefs_copy(void)
{
	struct cli_invoker inv;
	char *dir;

	if (!cli_invoker(&inv) || rbp_tracefs_copy(&dir))
		return NULL;
	return dir;
}

void cli_tracefs_remove(char *dir)
{
	rbp_tracefs_remove(dir);
}
