/*
 * test_reader.c - the three readers: an in-memory image, a live child
 * process (process_vm_readv, and /proc/PID/mem when seccomp refuses it),
 * and a gcore'd core file of a child, including its NT_FILE fallback.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proc/elf.h"
#include "proc/reader.h"
#include "proc/target.h"
#include "util/err.h"

#define BUF_LEN 65536

static const char rodata_marker[] = "rbpeek reader test: a string in .rodata";

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131 + seed) ^ (i >> 8));
}

/* Fork a child that fills buf with seed and waits; returns its pid. */
static pid_t spawn_holder(unsigned char *buf, unsigned seed)
{
	int fds[2];
	pid_t pid;
	char c = 0;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		fill(buf, BUF_LEN, seed);
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		pid = -1;
	close(fds[0]);
	return pid;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	static char b[1 << 16];
	ssize_t n;
	int ok = in >= 0 && out >= 0;

	while (ok && (n = read(in, b, sizeof(b))) > 0)
		ok = write(out, b, (size_t)n) == n;
	close(in);
	close(out);
	return ok ? 0 : -1;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_image(void)
{
	static const unsigned char a[16] = "0123456789abcdef", b[8] = "ABCDEFGH",
				   c[4] = "wxyz";
	const struct rbp_image_segment segs[] = {
		{ 0x1000, a, sizeof(a) }, { 0x1010, b, sizeof(b) }, { 0x2000, c, 4 },
	};
	struct rbp_reader *r;
	char out[32];

	TEST("image reader") {
		CHECK_EQ_INT(rbp_reader_open_image(segs, 3, &r), RBP_OK);
		CHECK_EQ_INT(rbp_read(r, 0x1004, out, 4), RBP_OK);
		CHECK(!memcmp(out, "4567", 4));
		CHECK_EQ_INT(rbp_read(r, 0x100e, out, 6), RBP_OK);  /* spans two */
		CHECK(!memcmp(out, "efABCD", 6));
		CHECK_EQ_INT(rbp_read(r, 0x1014, out, 8), RBP_EFAULT);  /* into a gap */
		CHECK_EQ_INT(rbp_read(r, 0x0fff, out, 2), RBP_EFAULT);
		CHECK_EQ_INT(rbp_read(r, 0x2000, out, 4), RBP_OK);
		CHECK_EQ_INT(rbp_read(r, 0x2001, out, 4), RBP_EFAULT);
		CHECK_EQ_INT(rbp_read(r, UINT64_MAX - 1, out, 4), RBP_EFAULT);
		CHECK_EQ_INT(rbp_read(r, 0x1000, out, 0), RBP_OK);
		CHECK_EQ_INT(r->reads, 8);
		CHECK_EQ_INT(r->bytes, 32);
		rbp_reader_close(r);
		CHECK_EQ_INT(rbp_reader_open_image(NULL, 0, &r), RBP_OK);
		CHECK_EQ_INT(rbp_read(r, 0, out, 1), RBP_EFAULT);
		rbp_reader_close(r);
	}
}

/* In a grandchild: refuse process_vm_readv with EPERM, then read via mem. */
static int read_under_seccomp(pid_t pid, const unsigned char *addr,
			      const unsigned char *want)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	pid_t g = fork();
	int st = -1;

	if (g == 0) {
		struct rbp_reader *r;
		unsigned char got[256];

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(2);
		if (rbp_reader_open_pid(pid, &r))
			_exit(3);
		if (rbp_read(r, (uintptr_t)addr, got, sizeof(got)) ||
		    memcmp(got, want, sizeof(got)))
			_exit(4);
		if (rbp_read(r, 16, got, 8) != RBP_EFAULT)
			_exit(5);
		rbp_reader_close(r);
		_exit(0);
	}
	waitpid(g, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void test_live(unsigned char *buf)
{
	unsigned char want[BUF_LEN], got[BUF_LEN];
	struct rbp_reader *r = NULL;
	pid_t pid = spawn_holder(buf, 7);

	fill(want, BUF_LEN, 7);
	TEST("live reader") {
		CHECK(pid > 0);
		CHECK(memcmp(buf, want, 64));  /* the parent's copy differs */
		CHECK_EQ_INT(rbp_reader_open_pid(pid, &r), RBP_OK);
		CHECK_EQ_INT(rbp_read(r, (uintptr_t)buf, got, BUF_LEN), RBP_OK);
		CHECK(!memcmp(got, want, BUF_LEN));
		CHECK_EQ_INT(rbp_read(r, (uintptr_t)buf + 100, got, 3), RBP_OK);
		CHECK(!memcmp(got, want + 100, 3));
		CHECK_EQ_INT(rbp_read(r, 16, got, 8), RBP_EFAULT);
		CHECK_EQ_INT(rbp_read(r, UINT64_MAX - 3, got, 8), RBP_EFAULT);
		CHECK_EQ_INT(rbp_read(r, 0xffffffffff600000ULL - 4096, got, 8), RBP_EFAULT);
	}
	TEST("live reader: batched reads fail range by range") {
		unsigned char a[16], b[8], c[8], d[4];
		struct rbp_read_req v[] = {
			{ (uintptr_t)buf, a, sizeof(a), -1 },
			{ 16, b, sizeof(b), -1 },                    /* unmapped */
			{ (uintptr_t)buf + 200, c, sizeof(c), -1 },  /* after a failure */
			{ (uintptr_t)buf, d, 0, -1 },                /* empty */
			{ UINT64_MAX - 3, d, sizeof(d), -1 },        /* wraps */
			{ (uintptr_t)buf + 300, d, sizeof(d), -1 },
		};
		rbp_readv(r, v, 6);
		CHECK(v[0].err == RBP_OK && !memcmp(a, want, sizeof(a)));
		CHECK_EQ_INT(v[1].err, RBP_EFAULT);
		CHECK(v[2].err == RBP_OK && !memcmp(c, want + 200, sizeof(c)));
		CHECK_EQ_INT(v[3].err, RBP_OK);
		CHECK_EQ_INT(v[4].err, RBP_EFAULT);
		CHECK(v[5].err == RBP_OK && !memcmp(d, want + 300, sizeof(d)));
	}
	TEST("live reader: /proc/PID/mem fallback under seccomp") {
		CHECK_EQ_INT(read_under_seccomp(pid, buf, want), 0);
	}
	TEST("live reader: dead process") {
		reap(pid);
		CHECK_EQ_INT(rbp_read(r, (uintptr_t)buf, got, 8), RBP_ENOPROC);
		rbp_reader_close(r);
		CHECK_EQ_INT(rbp_reader_open_pid(pid, &r), RBP_ENOPROC);
		CHECK_EQ_INT(rbp_target_open_pid(pid, &(struct rbp_target *){ 0 }),
			     RBP_ENOPROC);
	}
}

static void test_target_pid(void)
{
	struct rbp_target *t;
	char path[128];
	char c[sizeof(rodata_marker)];

	TEST("live target") {
		CHECK_EQ_INT(rbp_target_open_pid(getpid(), &t), RBP_OK);
		CHECK_EQ_INT(t->is_core, 0);
		CHECK(rbp_maps_find(&t->maps, (uintptr_t)rodata_marker) != NULL);
		CHECK_EQ_INT(rbp_read(t->mem, (uintptr_t)rodata_marker, c, sizeof(c)), RBP_OK);
		CHECK_EQ_STR(c, rodata_marker);
		CHECK_EQ_INT(rbp_target_path(t, "/usr/lib/x.so", path, sizeof(path)), RBP_OK);
		snprintf(c, sizeof(c), "/proc/%d/root/usr/lib/x.so", (int)getpid());
		CHECK_EQ_STR(path, c);
		CHECK_EQ_INT(rbp_target_path(t, "/usr/lib/x.so", path, 10), RBP_EINVAL);
		rbp_target_close(t);
	}
}

static int has_tid(const struct rbp_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->n_core_tids; i++)
		if (t->core_tids[i] == tid)
			return 1;
	return 0;
}

/* The bytes of the boundary between the first two adjacent exe mappings. */
static uint64_t exe_boundary(const struct rbp_target *t)
{
	const struct rbp_maps *m = &t->maps;

	for (size_t i = 0; i + 1 < m->n; i++)
		if (m->v[i].path && strstr(m->v[i].path, "test_reader") &&
		    m->v[i + 1].start == m->v[i].end)
			return m->v[i].end;
	return 0;
}

/* 1 when the core holds the bytes at addr itself (a PT_LOAD's file part). */
static int dumped(const char *core, uint64_t addr)
{
	struct rbp_elf *e;
	int in = 0;

	if (rbp_elf_open(core, &e))
		return -1;
	for (size_t i = 0; i < rbp_elf_phnum(e); i++) {
		const struct rbp_elf_phdr *p = rbp_elf_phdr(e, i);

		if (p->type == 1 && addr >= p->vaddr && addr - p->vaddr < p->filesz)
			in = 1;
	}
	rbp_elf_close(e);
	return in;
}

/* What gdb records as pr_fname: the basename of argv[0], 15 chars at most. */
static void expected_comm(pid_t pid, char out[16])
{
	char path[64], arg0[256] = "", *base;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(arg0, sizeof(arg0), f))
			arg0[0] = '\0';
		fclose(f);
	}
	base = strrchr(arg0, '/');
	const char *name = base ? base + 1 : arg0;
	size_t n = strnlen(name, 15);
	memcpy(out, name, n);
	out[n] = '\0';
}

static void check_core(const char *core, const unsigned char *buf,
		       const unsigned char *want, pid_t pid)
{
	struct rbp_target *t = NULL;
	unsigned char got[BUF_LEN];
	char comm[16];
	uint64_t edge;

	expected_comm(pid, comm);

	CHECK_EQ_INT(rbp_target_open_core(core, NULL, &t), RBP_OK);
	if (!t)
		return;
	CHECK_EQ_INT(t->is_core, 1);
	CHECK_EQ_INT(t->pid, pid);
	CHECK(has_tid(t, pid));
	CHECK_EQ_STR(t->core_comm, comm);  /* "test_reader" */
	CHECK_EQ_STR(t->root, "");
	CHECK_EQ_INT(rbp_read(t->mem, (uintptr_t)buf, got, BUF_LEN), RBP_OK);
	CHECK(!memcmp(got, want, BUF_LEN));
	CHECK_EQ_INT(rbp_read(t->mem, (uintptr_t)rodata_marker, got,
			      sizeof(rodata_marker)), RBP_OK);
	CHECK_EQ_STR((char *)got, rodata_marker);
	edge = exe_boundary(t);
	CHECK(edge != 0);
	CHECK_EQ_INT(rbp_read(t->mem, edge - 32, got, 64), RBP_OK);
	CHECK(!memcmp(got, (void *)(uintptr_t)(edge - 32), 64));
	CHECK_EQ_INT(rbp_read(t->mem, 16, got, 8), RBP_EFAULT);
	CHECK(rbp_maps_find(&t->maps, (uintptr_t)rodata_marker) != NULL);
	rbp_target_close(t);

	/* under a sysroot without the files only dumped memory is readable */
	CHECK_EQ_INT(rbp_target_open_core(core, "/nonexistent", &t), RBP_OK);
	CHECK_EQ_STR(t->root, "/nonexistent");
	CHECK_EQ_INT(rbp_read(t->mem, (uintptr_t)buf, got, BUF_LEN), RBP_OK);
	/* gcore does not dump unmodified file pages: .rodata came from the file */
	CHECK_EQ_INT(dumped(core, (uintptr_t)rodata_marker), 0);
	CHECK_EQ_INT(rbp_read(t->mem, (uintptr_t)rodata_marker, got, 8), RBP_EFAULT);
	rbp_target_close(t);
}

/* Truncated copies: open fails with EBADCORE, or reads are right or EFAULT. */
static void check_truncated(const char *core, const unsigned char *buf,
			    const unsigned char *want)
{
	char cut[300];
	struct stat st;
	unsigned char got[BUF_LEN];

	snprintf(cut, sizeof(cut), "%.200s.cut", core);
	CHECK(copy_file(core, cut) == 0);
	stat(cut, &st);
	for (off_t len = st.st_size - 1; len >= 0; len = len > 8192 ? len / 3 : len - 97) {
		struct rbp_target *t;
		int err;

		CHECK(truncate(cut, len) == 0);
		err = rbp_target_open_core(cut, NULL, &t);
		CHECK(err == RBP_OK || err == RBP_EBADCORE);
		if (err)
			continue;
		err = rbp_read(t->mem, (uintptr_t)buf, got, BUF_LEN);
		CHECK(err == RBP_EFAULT || (err == RBP_OK && !memcmp(got, want, BUF_LEN)));
		rbp_target_close(t);
	}
	CHECK_EQ_INT(rbp_target_open_core(cut, NULL, &(struct rbp_target *){ 0 }),
		     RBP_EBADCORE);
	unlink(cut);
}

/* Flip bytes in the headers and notes of a copy: never a crash. */
static void check_flipped(const char *core, const unsigned char *buf)
{
	char bad[300];
	unsigned char got[256];
	unsigned seed = 99;
	int fd;

	snprintf(bad, sizeof(bad), "%.200s.bad", core);
	CHECK(copy_file(core, bad) == 0);
	fd = open(bad, O_RDWR);
	for (int i = 0; i < 400; i++) {
		struct rbp_target *t;
		unsigned char c, x;
		off_t off;
		int err;

		seed = seed * 1103515245u + 12345u;
		off = i < 128 ? (off_t)i : (off_t)((seed >> 8) % 16384);
		CHECK(pread(fd, &c, 1, off) == 1);
		x = c ^ (unsigned char)(0x80u >> (seed >> 29));
		CHECK(pwrite(fd, &x, 1, off) == 1);
		err = rbp_target_open_core(bad, NULL, &t);
		CHECK(err == RBP_OK || err == RBP_EBADCORE);
		if (!err) {
			rbp_read(t->mem, (uintptr_t)buf, got, sizeof(got));
			rbp_read(t->mem, (uintptr_t)rodata_marker, got, 16);
			rbp_target_close(t);
		}
		CHECK(pwrite(fd, &c, 1, off) == 1);
	}
	close(fd);
	unlink(bad);
}

/*
 * gdb dumps every anonymous mapping, and an ASan process maps terabytes
 * of shadow memory: there the buffer is shared memory and the child's
 * coredump_filter keeps only shared anonymous memory and ELF headers.
 * Either way gcore runs under a file size limit, so a runaway dump dies.
 */
#ifdef __SANITIZE_ADDRESS__
#define CORE_FILTER "0x12"
static unsigned char *core_buffer(unsigned char *heap)
{
	void *p = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? heap : p;
}
#else
#define CORE_FILTER "0x33"
static unsigned char *core_buffer(unsigned char *heap)
{
	return heap;
}
#endif

static void test_core(unsigned char *heap)
{
	char dir[] = "/tmp/rbp-core-XXXXXX", cmd[320], core[300];
	unsigned char want[BUF_LEN], *buf = core_buffer(heap);
	struct stat st;
	pid_t pid;

	if (system("command -v gcore >/dev/null 2>&1") != 0) {
		printf("skip core reader: gcore is not installed\n");
		return;
	}
	pid = spawn_holder(buf, 11);
	snprintf(cmd, sizeof(cmd), "echo %s > /proc/%d/coredump_filter",
		 CORE_FILTER, (int)pid);
	if (system(cmd) != 0)
		printf("note: could not set coredump_filter\n");
	fill(want, BUF_LEN, 11);
	TEST("core reader (gcore)") {
		CHECK(pid > 0 && mkdtemp(dir) != NULL);
		snprintf(cmd, sizeof(cmd), "ulimit -f 1048576; gcore -o %s/core %d >/dev/null 2>&1",
			 dir, (int)pid);
		CHECK(system(cmd) == 0);
		snprintf(core, sizeof(core), "%s/core.%d", dir, (int)pid);
		check_core(core, buf, want, pid);
	}
	reap(pid);
	if (stat(core, &st) || st.st_size > (1 << 30)) {
		unlink(core);
		rmdir(dir);
		return;
	}
	TEST("core reader: truncated and corrupted cores") {
		check_truncated(core, buf, want);
		check_flipped(core, buf);
		CHECK_EQ_INT(rbp_target_open_core("/proc/self/exe", NULL,
						  &(struct rbp_target *){ 0 }), RBP_EBADCORE);
		CHECK_EQ_INT(rbp_target_open_core("/etc/passwd", NULL,
						  &(struct rbp_target *){ 0 }), RBP_EBADCORE);
	}
	unlink(core);
	rmdir(dir);
}

int main(void)
{
	unsigned char *buf = malloc(BUF_LEN);

	if (!buf)
		return 1;
	memset(buf, 0, BUF_LEN);
	test_image();
	test_live(buf);
	test_target_pid();
	test_core(buf);
	free(buf);
	return harness_report();
}
