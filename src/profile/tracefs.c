/*
 * tracefs.c - a private copy of tracefs's raw_syscalls and sched event
 * descriptions (see tracefs.h).
 *
 * The copy is made by root for a user under sudo, in /tmp, so every step
 * assumes that user is trying to redirect it: the directory is mkdtemp's
 * (root's, in sticky /tmp, so nobody else may rename or remove its entry),
 * it stays root's and only readable by others, and everything below it is
 * created and removed through directory descriptors opened with
 * O_DIRECTORY|O_NOFOLLOW, never by a path: no component can be a symlink,
 * and nothing is ever chowned.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/tracefs.h"
#include "util/err.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* Make directory name in dirfd (0755 whatever the umask) and open it; -1 on error. */
static int make_dir(int dirfd, const char *name)
{
	int fd;

	if (mkdirat(dirfd, name, 0700))
		return -1;
	if ((fd = openat(dirfd, name, DIR_FLAGS)) < 0)
		return -1;
	if (fchmod(fd, 0755)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Copy file name from directory in to a new file in out (0644); 0 or -1. */
static int copy_file(int in, int out, const char *name)
{
	char buf[16384];
	int src = openat(in, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), dst = -1, rc = -1;
	ssize_t n = 0;

	if (src >= 0)
		dst = openat(out, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst >= 0 && !fchmod(dst, 0644)) {
		rc = 0;
		while (!rc && (n = read(src, buf, sizeof(buf))) > 0)
			rc = write(dst, buf, (size_t)n) == n ? 0 : -1;
		if (n < 0)
			rc = -1;
	}
	if (src >= 0)
		close(src);
	if (dst >= 0)
		close(dst);
	return rc;
}

/* Copy events/SYS/EVENT/{id,format} from tracefs's events dir to ours. */
static int copy_system(int src_events, int dst_events, const char *sys)
{
	int in = openat(src_events, sys, DIR_FLAGS), out = -1, rc = 0;
	struct dirent *de;
	DIR *d;

	if (in < 0)
		return -1;
	int fd = dup(in);
	if ((out = make_dir(dst_events, sys)) < 0 || fd < 0 || !(d = fdopendir(fd))) {
		close(in);
		if (out >= 0)
			close(out);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (!rc && (de = readdir(d))) {
		int ein, eout;

		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		if ((ein = openat(in, de->d_name, DIR_FLAGS)) < 0)
			continue;   /* went away */
		if ((eout = make_dir(out, de->d_name)) < 0)
			rc = -1;
		/* an event whose files cannot be read is left out, as before */
		else if (copy_file(ein, eout, "id") == 0)
			copy_file(ein, eout, "format");
		close(ein);
		if (eout >= 0)
			close(eout);
	}
	closedir(d);
	close(in);
	close(out);
	return rc;
}

/* The tracefs with our events, mounting it when none is mounted; NULL: none. */
static const char *find_root(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char probe[256];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(roots) / sizeof(*roots); i++) {
			snprintf(probe, sizeof(probe), "%s/events/raw_syscalls/sys_enter/id", roots[i]);
			if (!access(probe, R_OK))
				return roots[i];
		}
		if (pass || mount("nodev", roots[0], "tracefs", 0, NULL))
			break;
	}
	return NULL;
}

/* rm -r of what dirfd holds (entries made by rbp_tracefs_copy), never following a symlink. */
static void empty_dir(int dirfd, int depth)
{
	struct dirent *de;
	int fd = dup(dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (depth < 3 && (sub = openat(dirfd, de->d_name, DIR_FLAGS)) >= 0) {
			empty_dir(sub, depth + 1);
			close(sub);
			unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dirfd, de->d_name, 0);
		}
	}
	closedir(d);
}

int rbp_tracefs_copy(char **out)
{
	const char *src = find_root();
	int top = -1, in = -1, ev = -1, rc = -1;
	char *dir;

	*out = NULL;
	if (!src)
		return RBP_ENOFILE;
	if (!(dir = strdup("/tmp/rbpeek-tracefs.XXXXXX")))
		return RBP_ENOMEM;
	if (!mkdtemp(dir)) {
		free(dir);
		return RBP_EIO;
	}
	/* mkdtemp made it 0700 and root's; others may read, never write */
	if ((top = open(dir, DIR_FLAGS)) >= 0 && !fchmod(top, 0755) &&
	    (in = open(src, DIR_FLAGS)) >= 0 && (ev = make_dir(top, "events")) >= 0) {
		int sin = openat(in, "events", DIR_FLAGS);
		rc = sin < 0 || copy_system(sin, ev, "raw_syscalls") || copy_system(sin, ev, "sched") ? -1 : 0;
		if (sin >= 0)
			close(sin);
	}
	if (ev >= 0)
		close(ev);
	if (in >= 0)
		close(in);
	if (top >= 0)
		close(top);
	if (rc) {
		rbp_tracefs_remove(dir);
		return RBP_EIO;
	}
	*out = dir;
	return RBP_OK;
}

void rbp_tracefs_remove(char *dir)
{
	int fd;

	if (!dir)
		return;
	if ((fd = open(dir, DIR_FLAGS)) >= 0) {
		empty_dir(fd, 0);
		close(fd);
	}
	rmdir(dir);
	free(dir);
}
