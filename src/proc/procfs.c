/*
 * procfs.c - what /proc tells of a live process, one small file or one
 * directory at a time: its threads and their states, a live thread to read
 * it through, and the process tree.  Nothing is cached.  The target
 * (target.c), its mappings (maps.c) and the live reader (reader_live.c)
 * all read through here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/procfs.h"
#include "util/err.h"
#include "util/vec.h"

int rbp_proc_errno(int e)
{
	if (e == ENOENT || e == ESRCH)
		return RBP_ENOPROC;
	if (e == EACCES || e == EPERM)
		return RBP_EPERM;
	return e == ENOMEM ? RBP_ENOMEM : RBP_EIO;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

int rbp_task_collect(DIR *d, pid_t **tids, size_t *n, size_t *cap)
{
	struct dirent *de;

	*n = 0;
	rewinddir(d);
	for (;;) {
		char *end;

		errno = 0;
		if (!(de = readdir(d)))
			break;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || tid <= 0 || end == de->d_name)
			continue;
		if (rbp_grow(tids, cap, *n + 1, sizeof(**tids)))
			return RBP_ENOMEM;
		(*tids)[(*n)++] = (pid_t)tid;
	}
	if (errno)   /* readdir failed (the process is gone) */
		return rbp_proc_errno(errno);
	if (*n)
		qsort(*tids, *n, sizeof(**tids), cmp_pid);
	return RBP_OK;
}

/* Numeric entries of an open /proc directory; *tids owned by the caller. */
static int collect_tids(DIR *d, pid_t **tids, size_t *n)
{
	size_t cap = 0;
	int err;

	*tids = NULL;
	if ((err = rbp_task_collect(d, tids, n, &cap))) {
		free(*tids);
		*tids = NULL;
	}
	return err;
}

pid_t rbp_live_task(pid_t pid)
{
	struct rbp_task_info ti;
	pid_t *tids = NULL, live = 0;
	size_t n = 0;

	if (rbp_task_info(pid, pid, &ti))
		return 0;
	if (ti.state != 'Z' && ti.state != 'X')
		return pid;
	if (rbp_task_list(pid, &tids, &n))
		return 0;
	for (size_t i = 0; i < n && !live; i++)
		if (!rbp_task_info(pid, tids[i], &ti) && ti.state != 'Z' && ti.state != 'X')
			live = tids[i];
	free(tids);
	return live;
}

/* *tids is owned by the caller (free). */
int rbp_task_list(pid_t pid, pid_t **tids, size_t *n)
{
	char path[48];
	DIR *d;
	int err;

	*tids = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return rbp_proc_errno(errno);
	err = collect_tids(d, tids, n);
	closedir(d);
	if (!err && *n == 0) {  /* a zombie lists no tasks */
		free(*tids);
		*tids = NULL;
		return RBP_ENOPROC;
	}
	return err;
}

/* Read a small /proc file into buf (NUL-terminated); returns its length. */
static int read_small(const char *path, char *buf, size_t size, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return rbp_proc_errno(errno);
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return rbp_proc_errno(errno);
	buf[n] = '\0';
	*len = (size_t)n;
	return RBP_OK;
}

/* State from .../stat (after the last ')'), comm from .../comm. */
int rbp_task_info(pid_t pid, pid_t tid, struct rbp_task_info *out)
{
	char path[64], buf[512], *paren;
	size_t len;
	int err;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	err = read_small(path, buf, sizeof(buf), &len);
	if (err)
		return err;
	paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ' || !paren[2])
		return RBP_EIO;
	out->state = paren[2];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	err = read_small(path, buf, sizeof(out->comm), &len);
	if (err)
		return err;
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	memcpy(out->comm, buf, len + 1);
	return RBP_OK;
}

/* ---- the process tree (for --subprocesses and naming processes) ---- */

int rbp_proc_list(pid_t **pids, size_t *n)
{
	DIR *d = opendir("/proc");
	int err;

	*pids = NULL;
	*n = 0;
	if (!d)
		return RBP_EIO;
	err = collect_tids(d, pids, n);   /* the same numeric entries */
	closedir(d);
	return err;
}

int rbp_proc_parent(pid_t pid, pid_t *ppid, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	size_t len;
	int pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf), &len))
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
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (read_small(path, buf, n, &len)) {
		buf[0] = 0;
		return buf;
	}
	while (len > 0 && (buf[len - 1] == 0 || buf[len - 1] == ' '))
		buf[--len] = 0;
	for (size_t i = 0; i < len; i++)
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
