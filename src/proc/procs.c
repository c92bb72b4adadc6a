/*
 * procs.c - the process tree from /proc (see procs.h).
 *
 * Each call reads one small file or one directory; nothing is cached here
 * (the caller decides how often to look: procset.c scans at most four
 * times a second).
 */
#include "proc/procs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/vec.h"

int rbp_proc_list(pid_t **pids_out, size_t *n_out)
{
	DIR *d = opendir("/proc");
	pid_t *pids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (!d)
		return RBP_EIO;
	while ((e = readdir(d))) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		if (*end || v <= 0)
			continue;
		if (rbp_grow(&pids, &cap, n + 1, sizeof(*pids))) {
			closedir(d);
			free(pids);
			return RBP_ENOMEM;
		}
		pids[n++] = (pid_t)v;
	}
	closedir(d);
	*pids_out = pids;
	*n_out = n;
	return RBP_OK;
}

/* Read a small /proc file into buf (NUL-terminated); its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len;

	if (fd < 0)
		return -1;
	len = read(fd, buf, n - 1);
	close(fd);
	if (len < 0)
		return -1;
	buf[len] = 0;
	return len;
}

int rbp_proc_parent(pid_t pid, pid_t *ppid, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	int pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) < 0)
		return RBP_ENOPROC;
	/* the name in parentheses may hold anything: fields start after the last ')' */
	if (!(p = strrchr(buf, ')')))
		return RBP_EIO;
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 *  cutime cstime priority nice threads itrealvalue starttime" */
	if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu", &pp, &st) != 2)
		return RBP_EIO;
	*ppid = (pid_t)pp;
	*start = st;
	return RBP_OK;
}

char *rbp_proc_cmdline(pid_t pid, char *buf, size_t n)
{
	char path[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((len = read_small(path, buf, n)) < 0) {
		buf[0] = 0;
		return buf;
	}
	while (len > 0 && (buf[len - 1] == 0 || buf[len - 1] == ' '))
		buf[--len] = 0;
	for (ssize_t i = 0; i < len; i++)
		if (buf[i] == 0 || buf[i] == '\n' || buf[i] == '\t')
			buf[i] = ' ';
	return buf;
}

char *rbp_proc_exe(pid_t pid, char *buf, size_t n)
{
	char path[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	len = readlink(path, buf, n - 1);
	buf[len < 0 ? 0 : len] = 0;
	return buf;
}
