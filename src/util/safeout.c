/*
 * safeout.c - the two careful steps of creating an output file (safeout.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/safeout.h"

/* This process's umask, from /proc (umask() cannot read it without
 * changing it, which other threads would see); 022 when unknown. */
static mode_t current_umask(void)
{
	char line[128];
	unsigned mask = 022;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &mask) == 1)
			break;
	if (f)
		fclose(f);
	return (mode_t)(mask & 0777);
}

int rbp_open_in_place(const char *path)
{
	struct stat st;
	int fd;

	if (!lstat(path, &st) && S_ISLNK(st.st_mode) && st.st_uid != 0 && st.st_uid != geteuid()) {
		errno = ELOOP;
		return -1;
	}
	if ((fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode)) {   /* replaced meanwhile */
		close(fd);
		errno = EEXIST;
		return -1;
	}
	return fd;
}

int rbp_create_temp(const char *path, char *tmp, size_t n)
{
	const char *slash = strrchr(path, '/');
	int fd, len;

	if (strlen(slash ? slash + 1 : path) + 10 <= NAME_MAX)
		len = snprintf(tmp, n, "%s.tmpXXXXXX", path);
	else
		len = snprintf(tmp, n, "%.*s.rbpeek.tmpXXXXXX", slash ? (int)(slash - path + 1) : 0, path);
	if (len < 0 || (size_t)len >= n) {
		if (n)
			tmp[0] = 0;
		errno = ENAMETOOLONG;
		return -1;
	}
	/* mkostemp: O_CREAT|O_EXCL, which never follows a symlink */
	if ((fd = mkostemp(tmp, O_CLOEXEC | O_NOFOLLOW)) < 0) {
		tmp[0] = 0;
		return -1;
	}
	if (fchmod(fd, 0666 & ~current_umask())) {
		int e = errno;
		close(fd);
		unlink(tmp);
		tmp[0] = 0;
		errno = e;
		return -1;
	}
	return fd;
}
