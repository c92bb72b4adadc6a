/*
 * tracefs.c - a private copy of tracefs's raw_syscalls and sched event
 * descriptions (see tracefs.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/tracefs.h"
#include "util/err.h"

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

int rbp_tracefs_copy(uid_t uid, gid_t gid, char **out)
{
	const char *src = find_root();
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
	if (make_dirs(dir, uid, gid) || copy_system(src, dir, "raw_syscalls", uid, gid) ||
	    copy_system(src, dir, "sched", uid, gid)) {
		rbp_tracefs_remove(dir);
		return RBP_EIO;
	}
	*out = dir;
	return RBP_OK;
}

/* rm -r of a directory made by rbp_tracefs_copy (three levels deep). */
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

void rbp_tracefs_remove(char *dir)
{
	if (!dir)
		return;
	remove_tree(dir, 0);
	free(dir);
}
