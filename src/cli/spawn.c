/*
 * spawn.c - starting the program of `record -- CMD` and `trace -- CMD`.
 *
 * Under sudo (running as root with SUDO_UID and SUDO_GID set) the program
 * runs as the user who invoked sudo, with that user's groups: it should
 * create its files as that user and never run as root because a profiler
 * was put in front of it.  `record` reads the program from outside and
 * needs nothing of it.  `trace` runs its tracer inside the program, and the
 * tracer's kernel streams need CAP_PERFMON: that one capability (and no
 * other) is kept as an ambient capability across the change of user and
 * the exec.  The tracer also reads tracepoint descriptions from tracefs,
 * which only root may read; cli_tracefs_copy() copies the two event
 * systems it uses into a private directory the user may read, named to the
 * tracer by $RBPEEK_TRACEFS.
 *
 * Whether exec worked is told by a close-on-exec pipe: the child writes its
 * errno to it only when exec (or the change of user) fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "cli/signals.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

/* Keep CAP_PERFMON, and only it, through setuid and exec (ambient). */
static int keep_perfmon(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	uint32_t bit = 1u << (CAP_PERFMON % 32);

	memset(d, 0, sizeof(d));
	d[CAP_PERFMON / 32].effective = d[CAP_PERFMON / 32].permitted = bit;
	d[CAP_PERFMON / 32].inheritable = bit;
	if (syscall(SYS_capset, &h, d))
		return -1;
	return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_PERFMON, 0, 0);
}

/* In the child: become the invoking user (with CAP_PERFMON when asked). */
static int become_invoker(unsigned flags)
{
	struct cli_invoker inv;

	if (!(flags & CLI_SPAWN_AS_INVOKER) || !cli_invoker(&inv))
		return 0;
	if (cli_become_invoker(&inv, (flags & CLI_SPAWN_KEEP_PERFMON) != 0))
		return -1;
	/* an older kernel without CAP_PERFMON: the tracer says what it misses */
	if (flags & CLI_SPAWN_KEEP_PERFMON)
		keep_perfmon();
	return 0;
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

/* Copy events/SYS/EVENT/{id,format} from tracefs dir src into dst. */
static int copy_system(const char *src, const char *dst, const char *sys, uid_t uid, gid_t gid)
{
	char from[512], to[512], buf[16384];
	struct dirent *de;
	DIR *d;

	snprintf(from, sizeof(from), "%s/events/%s", src, sys);
	if (!(d = opendir(from)))
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		snprintf(to, sizeof(to), "%s/events/%s/%s", dst, sys, de->d_name);
		if (mkdir(to, 0755) || chown(to, uid, gid))
			continue;
		for (int i = 0; i < 2; i++) {
			const char *file = i ? "format" : "id";
			snprintf(from, sizeof(from), "%s/events/%s/%s/%s", src, sys, de->d_name, file);
			snprintf(to, sizeof(to), "%s/events/%s/%s/%s", dst, sys, de->d_name, file);
			int in = open(from, O_RDONLY | O_CLOEXEC);
			int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			ssize_t n = out < 0 ? -1 : read(in, buf, sizeof(buf));
			if (n > 0 && write(out, buf, (size_t)n) != n)
				n = -1;
			if (out >= 0 && fchown(out, uid, gid))
				n = -1;
			if (in >= 0)
				close(in);
			if (out >= 0)
				close(out);
		}
	}
	closedir(d);
	return 0;
}

/* mkdir -p of dir/events/SYS for each system, owned by uid:gid. */
static int make_dirs(const char *dir, uid_t uid, gid_t gid)
{
	static const char *const sub[] = { "events", "events/raw_syscalls", "events/sched" };
	char p[512];

	if (chown(dir, uid, gid) || chmod(dir, 0755))
		return -1;
	for (size_t i = 0; i < sizeof(sub) / sizeof(*sub); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
		if (mkdir(p, 0755) || chown(p, uid, gid))
			return -1;
	}
	return 0;
}

char *cli_tracefs_copy(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	const char *src = NULL;
	char probe[256], *dir;
	struct cli_invoker inv;

	if (!cli_invoker(&inv))
		return NULL;
	for (int pass = 0; pass < 2 && !src; pass++) {
		for (size_t i = 0; i < sizeof(roots) / sizeof(*roots) && !src; i++) {
			snprintf(probe, sizeof(probe), "%s/events/raw_syscalls/sys_enter/id", roots[i]);
			if (!access(probe, R_OK))
				src = roots[i];
		}
		if (!src && (pass || mount("nodev", roots[0], "tracefs", 0, NULL)))
			break;
	}
	if (!src || !(dir = strdup("/tmp/rbpeek-tracefs.XXXXXX")))
		return NULL;
	if (!mkdtemp(dir) || make_dirs(dir, inv.uid, inv.gid) ||
	    copy_system(src, dir, "raw_syscalls", inv.uid, inv.gid) ||
	    copy_system(src, dir, "sched", inv.uid, inv.gid)) {
		cli_tracefs_remove(dir);
		return NULL;
	}
	return dir;
}

/* rm -r of a directory made by cli_tracefs_copy (three levels deep). */
static void remove_tree(const char *path, int depth)
{
	char p[512];
	struct dirent *de;
	DIR *d = depth < 4 ? opendir(path) : NULL;

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (de->d_type == DT_DIR)
			remove_tree(p, depth + 1);
		else
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

void cli_tracefs_remove(char *dir)
{
	if (!dir)
		return;
	remove_tree(dir, 0);
	free(dir);
}
