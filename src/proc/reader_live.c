/*
 * reader_live.c - read a live process's memory.
 *
 * process_vm_readv(2) is one syscall per read and needs no open file.
 * When it is missing (ENOSYS) or refused by a seccomp profile (EPERM) the
 * reader switches for good to pread(2) on /proc/PID/mem, which the kernel
 * allows under the same ptrace access check.  Reads are all or nothing:
 * a short read means part of the range is unmapped (RBP_EFAULT).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proc/reader.h"
#include "util/err.h"

struct live_reader {
	struct rbp_reader base;
	pid_t pid;
	int mem_fd;    /* /proc/PID/mem once the fallback is in use, else -1 */
	int use_mem;   /* 1 after process_vm_readv was found unusable */
};

/* RBP_ENOPROC when /proc/PID is gone, else err. */
static int gone_or(pid_t pid, int err)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) && errno == ENOENT)
		return RBP_ENOPROC;
	return err;
}

static int map_errno(pid_t pid, int e)
{
	switch (e) {
	case ESRCH:
		return RBP_ENOPROC;
	case EPERM:
	case EACCES:
		return gone_or(pid, RBP_EPERM);
	case ENOMEM:
		return RBP_ENOMEM;
	default:  /* EFAULT, EIO, EINVAL (address beyond off_t) */
		return gone_or(pid, RBP_EFAULT);
	}
}

/* Fallback: open /proc/PID/mem on first use, then pread it. */
static int read_mem(struct live_reader *r, uint64_t addr, void *buf,
		    size_t len)
{
	size_t done = 0;

	if (r->mem_fd < 0) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
		r->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (r->mem_fd < 0)
			return errno == ENOENT ? RBP_ENOPROC :
			       map_errno(r->pid, errno);
	}
	if (addr > INT64_MAX || len > INT64_MAX - addr)
		return RBP_EFAULT;
	while (done < len) {
		ssize_t n = pread(r->mem_fd, (char *)buf + done, len - done,
				  (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return map_errno(r->pid, errno);
		if (n == 0)  /* no mm: the process is exiting, or unmapped */
			return gone_or(r->pid, RBP_EFAULT);
		done += (size_t)n;
	}
	return RBP_OK;
}

/* All-or-nothing read; see the file comment for the fallback. */
static int live_read(struct rbp_reader *base, uint64_t addr, void *buf,
		     size_t len)
{
	struct live_reader *r = (struct live_reader *)base;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (len == 0)
		return RBP_OK;
	if (addr + len < addr)
		return RBP_EFAULT;
	if (r->use_mem)
		return read_mem(r, addr, buf, len);
	n = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return RBP_OK;
	if (n >= 0)
		return RBP_EFAULT;  /* partial: the range crosses a hole */
	if (errno == ENOSYS || errno == EPERM) {
		int err;

		r->use_mem = 1;
		err = read_mem(r, addr, buf, len);
		if (err == RBP_EPERM || err == RBP_ENOPROC)
			r->use_mem = 0;  /* not seccomp: keep the fast path */
		return err;
	}
	return map_errno(r->pid, errno);
}

static void live_close(struct rbp_reader *base)
{
	struct live_reader *r = (struct live_reader *)base;

	if (r->mem_fd >= 0)
		close(r->mem_fd);
	free(r);
}

static const struct rbp_reader_ops live_ops = {
	.read = live_read,
	.close = live_close,
};

/* *out is owned by the caller (rbp_reader_close). */
int rbp_reader_open_pid(pid_t pid, struct rbp_reader **out)
{
	struct live_reader *r;

	*out = NULL;
	if (pid <= 0)
		return RBP_EINVAL;
	if (gone_or(pid, RBP_OK))
		return RBP_ENOPROC;
	r = calloc(1, sizeof(*r));
	if (!r)
		return RBP_ENOMEM;
	r->base.ops = &live_ops;
	r->pid = pid;
	r->mem_fd = -1;
	*out = &r->base;
	return RBP_OK;
}
