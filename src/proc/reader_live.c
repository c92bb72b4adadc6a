/*
 * reader_live.c - read a live process's memory.
 *
 * process_vm_readv(2) is one syscall per read and needs no open file.
 * When it is missing (ENOSYS) or refused by a seccomp profile (EPERM) the
 * reader switches for good to pread(2) on /proc/PID/mem, which the kernel
 * allows under the same ptrace access check.  Reads are all or nothing:
 * a short read means part of the range is unmapped (RBP_EFAULT).  Batches
 * of ranges (rbp_readv) go in one process_vm_readv call.
 *
 * Reads name a thread of the process, not the process: once its main
 * thread has exited while others run on (a zombie thread-group leader),
 * process_vm_readv() naming the PID and /proc/PID/mem fail, while they
 * work through any live thread.  The reader starts with the PID and moves
 * to a live thread (rbp_live_task) when a read finds the one it uses gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proc/reader.h"
#include "proc/procfs.h"
#include "util/err.h"

struct live_reader {
	struct rbp_reader base;
	pid_t pid;
	pid_t tid;     /* the thread reads go through: pid, or a live one (see above) */
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
		char path[64];

		if (r->tid == r->pid)
			snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
		else
			snprintf(path, sizeof(path), "/proc/%d/task/%d/mem", (int)r->pid, (int)r->tid);
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

/* The thread read through has exited: 1 when another live one took its place. */
static int retarget(struct live_reader *r)
{
	pid_t live = rbp_live_task(r->pid);

	if (!live || live == r->tid)
		return 0;
	r->tid = live;
	if (r->mem_fd >= 0)
		close(r->mem_fd);
	r->mem_fd = -1;
	return 1;
}

static int live_read_once(struct live_reader *r, uint64_t addr, void *buf, size_t len);

/* All-or-nothing read; see the file comment for the fallback. */
static int live_read(struct rbp_reader *base, uint64_t addr, void *buf,
		     size_t len)
{
	struct live_reader *r = (struct live_reader *)base;
	int err = live_read_once(r, addr, buf, len);

	if (err == RBP_ENOPROC && retarget(r))
		err = live_read_once(r, addr, buf, len);
	return err;
}

static int live_read_once(struct live_reader *r, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (len == 0)
		return RBP_OK;
	if (addr + len < addr)
		return RBP_EFAULT;
	if (r->use_mem)
		return read_mem(r, addr, buf, len);
	n = process_vm_readv(r->tid, &local, 1, &remote, 1, 0);
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

#define MAX_IOV 1024   /* UIO_MAXIOV */

/*
 * Many ranges in one process_vm_readv per MAX_IOV ranges.  The kernel
 * stops at the first range it cannot read and never splits one, so the
 * byte count tells which ranges are complete; the failing range is read
 * again alone (for its error), and the rest in a new call.
 */
static void live_readv(struct rbp_reader *base, struct rbp_read_req *v, size_t n)
{
	struct live_reader *r = (struct live_reader *)base;
	struct iovec local[MAX_IOV], remote[MAX_IOV];
	size_t i = 0;

	while (i < n) {
		size_t k = 0;
		for (size_t j = i; j < n && k < MAX_IOV; j++, k++) {
			local[k] = (struct iovec){ v[j].buf, v[j].len };
			remote[k] = (struct iovec){ (void *)(uintptr_t)v[j].addr, v[j].len };
		}
		ssize_t got = r->use_mem ? -1 : process_vm_readv(r->tid, local, k, remote, k, 0);
		if (got < 0) {   /* fallback, a gone process...: one by one says why */
			for (size_t j = i; j < i + k; j++)
				v[j].err = live_read(base, v[j].addr, v[j].buf, v[j].len);
			i += k;
			continue;
		}
		size_t done = (size_t)got;
		for (; i < n && k > 0 && v[i].len <= done; i++, k--) {
			done -= v[i].len;
			v[i].err = RBP_OK;
		}
		if (k > 0) {   /* v[i] failed: its own error, then go on after it */
			v[i].err = live_read(base, v[i].addr, v[i].buf, v[i].len);
			i++;
		}
	}
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
	.readv = live_readv,
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
	r->tid = rbp_live_task(pid);
	if (!r->tid)
		r->tid = pid;
	r->mem_fd = -1;
	*out = &r->base;
	return RBP_OK;
}
