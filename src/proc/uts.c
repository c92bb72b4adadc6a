/*
 * uts.c - the host name of a process's UTS namespace (see uts.h).  setns()
 * changes the namespaces of the calling thread only: a thread of its own
 * enters the target's UTS namespace, asks uname(), and ends, leaving the
 * rest of the process where it was.
 */
#include "proc/uts.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "proc/elf.h"
#include "util/err.h"

struct ask {
	int fd;               /* the target's /proc/PID/ns/uts */
	char name[65];
	int err;
};

static void *enter_and_ask(void *arg)
{
	struct ask *a = arg;
	struct utsname u;

	if (setns(a->fd, CLONE_NEWUTS) || uname(&u)) {
		a->err = errno ? errno : EPERM;
		return NULL;
	}
	snprintf(a->name, sizeof(a->name), "%s", u.nodename);
	return NULL;
}

/* A host name: letters, digits, '-', '.', '_' (anything else is not used). */
static int plausible(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '.' || *s == '_'))
			return 0;
	return 1;
}

int rbp_proc_uts_hostname(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	struct stat ours, theirs;
	struct ask a = { .fd = -1 };
	pthread_t th;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)pid);
	if (stat("/proc/self/ns/uts", &ours) || stat(path, &theirs))
		return RBP_EPERM;
	if (ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev)
		return RBP_ENOFILE;
	if ((a.fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (!pthread_create(&th, NULL, enter_and_ask, &a))
			pthread_join(th, NULL);
		close(a.fd);
		if (!a.err && plausible(a.name)) {
			snprintf(buf, cap, "%s", a.name);
			return RBP_OK;
		}
	}
	/* setns refused: the file the container's host name was set from */
	snprintf(path, sizeof(path), "/proc/%d/root/etc/hostname", (int)pid);
	int fd = rbp_open_regular(path);
	if (fd < 0)
		return RBP_EPERM;
	ssize_t n = read(fd, a.name, sizeof(a.name) - 1);
	close(fd);
	a.name[n > 0 ? n : 0] = 0;
	a.name[strcspn(a.name, "\r\n")] = 0;
	if (!plausible(a.name))
		return RBP_EPERM;
	snprintf(buf, cap, "%s", a.name);
	return RBP_OK;
}
