/*
 * environ.c - a process's environment from its own `environ` (see
 * environ.h).  Every read is bounded: at most ENV_VARS pointers, each
 * string at most what is left of the caller's buffer.
 */
#include "proc/environ.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc/elf.h"
#include "proc/target.h"
#include "util/err.h"

#define ENV_VARS 8192      /* pointers read at most */
#define CHUNK 256          /* string bytes read per call */

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* libc's file: glibc's libc.so.6 / libc-2.x.so, musl's libc.so / ld-musl-*. */
static int is_libc(const char *path)
{
	const char *b = base(path);
	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) || !strncmp(b, "ld-musl-", 8);
}

/* The runtime address of `environ` in the file mapped at m, or 0. */
static uint64_t environ_in(struct rbp_target *t, const struct rbp_mapping *m)
{
	static const char *const names[] = { "environ", "__environ", "_environ" };
	char path[4096];
	struct rbp_elf *elf;
	uint64_t vaddr = 0, bias, addr = 0;

	if (rbp_target_path(t, m->path, path, sizeof(path)) || rbp_elf_open(path, &elf)) {
		/* a process merely chroot'ed in our mount namespace shows our paths */
		if (rbp_elf_open(m->path, &elf))
			return 0;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!rbp_elf_symbol(elf, names[i], &vaddr, NULL))
			break;
	if (vaddr && !rbp_elf_load_bias(elf, m->start, m->offset, &bias))
		addr = vaddr + bias;
	rbp_elf_close(elf);
	return addr;
}

/* A NUL-ended string at addr into out (at most cap bytes with the NUL); its length, or -1. */
static long read_str(struct rbp_reader *r, uint64_t addr, char *out, size_t cap)
{
	size_t n = 0;

	while (n < cap) {
		/* never across a page end in one read: the next page may be unmapped */
		size_t want = CHUNK - (size_t)((addr + n) % CHUNK);
		if (want > cap - n)
			want = cap - n;
		if (rbp_read(r, addr + n, out + n, want))
			return -1;
		char *nul = memchr(out + n, 0, want);
		if (nul)
			return (long)(nul - out);
		n += want;
	}
	return -1;   /* longer than cap */
}

int rbp_target_environ(struct rbp_target *t, char *buf, size_t cap, size_t *len)
{
	const struct rbp_maps *maps = &t->maps;
	uint64_t where = 0, envp = 0;
	char exe[4096] = "";

	*len = 0;
	if (!cap)
		return RBP_EINVAL;
	rbp_proc_exe(t->pid, exe, sizeof(exe));
	/* pass 0: the executable (a copy relocation puts environ there); pass 1: libc */
	for (int pass = 0; pass < 2 && !where; pass++)
		for (size_t i = 0; i < maps->n && !where; i++) {
			const struct rbp_mapping *m = &maps->v[i];
			int seen = 0;
			if (!m->path || m->path[0] != '/' || m->deleted)
				continue;
			if (pass == 0 ? strcmp(m->path, exe) : !is_libc(m->path))
				continue;
			for (size_t j = 0; j < i && !seen; j++)   /* the file's lowest mapping only */
				seen = maps->v[j].path && !strcmp(maps->v[j].path, m->path);
			if (!seen)
				where = environ_in(t, m);
		}
	if (!where)
		return RBP_ENOSYM;
	if (rbp_read(t->mem, where, &envp, sizeof(envp)) || !envp)
		return RBP_EFAULT;
	size_t n = 0;
	for (size_t i = 0; i < ENV_VARS; i += 32) {
		uint64_t ptrs[32];
		size_t got = 32;
		/* the array ends with NULL: read it a few pointers at a time */
		if (rbp_read(t->mem, envp + i * 8, ptrs, sizeof(ptrs))) {
			for (got = 0; got < 32 && !rbp_read(t->mem, envp + (i + got) * 8, &ptrs[got], 8); got++)
				;
			if (!got)
				return i ? RBP_OK : RBP_EFAULT;
		}
		for (size_t k = 0; k < got; k++) {
			if (!ptrs[k]) {
				*len = n;
				return RBP_OK;
			}
			long l = read_str(t->mem, ptrs[k], buf + n, cap - n);
			if (l < 0)
				continue;   /* unreadable, or does not fit: left out */
			n += (size_t)l + 1;
			*len = n;
		}
		if (got < 32)
			break;
	}
	return RBP_OK;
}

/* /proc/PID/environ whole (what fits). */
static int read_proc_environ(pid_t pid, char *buf, size_t cap, size_t *len)
{
	char path[64];
	ssize_t r;
	int fd;

	*len = 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return rbp_proc_errno(errno);
	while (*len < cap && (r = read(fd, buf + *len, cap - *len)) > 0)
		*len += (size_t)r;
	close(fd);
	return RBP_OK;
}

int rbp_proc_environ(pid_t pid, char *buf, size_t cap, size_t *len)
{
	struct rbp_target *t;

	*len = 0;
	if (!rbp_target_open_pid(pid, &t)) {
		int err = rbp_target_environ(t, buf, cap, len);
		rbp_target_close(t);
		if (!err)
			return RBP_OK;
	}
	return read_proc_environ(pid, buf, cap, len);
}
