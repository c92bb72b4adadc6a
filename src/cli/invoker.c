/*
 * invoker.c - the user behind sudo, and acting with that user's rights
 * (see invoker.h).
 */
#include "cli/invoker.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_invoker(struct cli_invoker *inv)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID");
	char *end;
	unsigned long uid, gid;

	if (geteuid() != 0 || !u || !g || !*u || !*g)
		return 0;
	uid = strtoul(u, &end, 10);
	if (*end || !uid || uid > 0x7fffffffUL)
		return 0;
	gid = strtoul(g, &end, 10);
	if (*end || gid > 0x7fffffffUL)
		return 0;
	inv->uid = (uid_t)uid;
	inv->gid = (gid_t)gid;
	inv->user = getenv("SUDO_USER");
	return 1;
}

int cli_become_invoker(const struct cli_invoker *inv, int keep_caps)
{
	struct passwd *pw = getpwuid(inv->uid);

	if (keep_caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0))
		return -1;
	/* initgroups needs the group database; without it, the primary group alone */
	if ((!inv->user || initgroups(inv->user, inv->gid)) && setgroups(1, &inv->gid))
		return -1;
	if (setgid(inv->gid) || setuid(inv->uid))
		return -1;
	if (setuid(0) == 0) {   /* must be impossible now */
		errno = EPERM;
		return -1;
	}
	if (pw && pw->pw_uid == inv->uid) {
		setenv("HOME", pw->pw_dir, 1);
		setenv("USER", pw->pw_name, 1);
		setenv("LOGNAME", pw->pw_name, 1);
	}
	return 0;
}

int cli_as_invoker(int (*fn)(void *arg), void *arg)
{
	struct cli_invoker inv;
	int status, rc;
	pid_t pid;

	if (!cli_invoker(&inv))
		return fn(arg);
	fflush(NULL);
	if ((pid = fork()) < 0) {
		fprintf(stderr, "rbpeek: error: cannot fork to act as uid %lu: %s\n",
			(unsigned long)inv.uid, strerror(errno));
		return EXIT_INTERNAL;
	}
	if (pid == 0) {
		if (cli_become_invoker(&inv, 0)) {
			fprintf(stderr, "rbpeek: error: cannot act as uid %lu: %s\n",
				(unsigned long)inv.uid, strerror(errno));
			rc = EXIT_INTERNAL;
		} else {
			rc = fn(arg);
		}
		fflush(NULL);
		/* -errno travels as 128 + errno (errno values are small) */
		_exit(rc < 0 ? (-rc < 127 ? 128 + -rc : 128 + EIO) : rc & 0x7f);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_INTERNAL;
	if (!WIFEXITED(status)) {
		fprintf(stderr, "rbpeek: error: writing as uid %lu: killed by signal %d\n",
			(unsigned long)inv.uid, WTERMSIG(status));
		return EXIT_INTERNAL;
	}
	rc = WEXITSTATUS(status);
	return rc >= 128 ? -(rc - 128) : rc;
}

int cli_drop_to_invoker(const char *cmd)
{
	struct cli_invoker inv;

	if (!cli_invoker(&inv))
		return 0;
	fflush(NULL);
	if (cli_become_invoker(&inv, 0)) {
		fprintf(stderr, "rbpeek: error: %s: cannot act as uid %lu: %s\n", cmd,
			(unsigned long)inv.uid, strerror(errno));
		return EXIT_INTERNAL;
	}
	return 0;
}

int cli_check_no_drop_root(const char *cmd, const char *program)
{
	struct cli_invoker inv;

	if (!cli_invoker(&inv))
		return 0;
	fprintf(stderr, "rbpeek: error: --no-drop-root is refused under sudo: it would run '%s' as "
		"root for anyone allowed to run rbpeek with sudo\n"
		"hint: start the program as root yourself and attach to it with "
		"'sudo rbpeek %s --pid PID'%s; in a root shell, 'env -u SUDO_UID rbpeek ...' "
		"is not under sudo\n", program, cmd, strcmp(cmd, "record") ? " (record)" : "");
	return EXIT_USAGE;
}
