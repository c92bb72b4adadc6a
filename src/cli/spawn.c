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
 * states) need CAP_PERFMON, which would let any program started this way
 * sample every process of the machine, root's included (issue 23).  So
 * under sudo rbpeek opens those perf events itself, as root, for the child
 * only, while the child waits at a gate between the change of user and
 * exec (cli_spawn_gated), and serves the tracer the decoded events of its
 * own threads over a socket (ext/rbpeek/ktrace.h, remote handles): the
 * child holds no perf event and no capability.
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
	return cli_spawn_gated(cmd, flags, NULL);
}

/* In the child, with a gate: keep g->keep_fd across exec, name it in
 * g->keep_env as "FD:PID", and wait until the parent opens the gate. */
static int pass_gate(const struct cli_spawn_gate *g, int gate)
{
	char val[48], c;

	if (g->keep_fd >= 0) {
		snprintf(val, sizeof(val), "%d:%d", g->keep_fd, (int)getpid());
		if (setenv(g->keep_env, val, 1) || fcntl(g->keep_fd, F_SETFD, 0))
			return -1;
	}
	while (read(gate, &c, 1) < 0)
		if (errno != EINTR)
			return -1;
	close(gate);
	return 0;
}

int cli_spawn_gated(char **cmd, unsigned flags, const struct cli_spawn_gate *g)
{
	int fds[2], gate[2] = { -1, -1 }, e = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	if (g && pipe2(gate, O_CLOEXEC)) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		if (g) {
			close(gate[0]);
			close(gate[1]);
		}
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		if (g)
			close(gate[1]);
		cli_signals_child_defaults();
		if (become_invoker(flags)) {
			e = errno;
			fprintf(stderr, "rbpeek: error: cannot run '%s' as uid %s: %s\n", cmd[0],
				getenv("SUDO_UID"), strerror(e));
			_exit(126);
		}
		if (g && pass_gate(g, gate[0])) {
			fprintf(stderr, "rbpeek: error: cannot start '%s': %s\n", cmd[0], strerror(errno));
			_exit(126);
		}
		execvp(cmd[0], cmd);
		e = errno;
		if (write(fds[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(fds[1]);
	if (g) {
		close(gate[0]);
		if (g->before_exec)
			g->before_exec(pid, g->arg);
		close(gate[1]);   /* the child goes on to exec */
	}
	ssize_t n = read(fds[0], &e, sizeof(e));
	close(fds[0]);
	if (n == sizeof(e)) {
		waitpid(pid, NULL, 0);
		fprintf(stderr, "rbpeek: error: cannot run '%s': %s\n", cmd[0], strerror(e));
		return -1;
	}
	return pid;
}
