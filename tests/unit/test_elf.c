/*
 * test_elf.c - symbols, load bias and vaddr reads against this very
 * process and its libc; corrupted copies of this binary must never crash.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "proc/elf.h"
#include "proc/maps.h"
#include "util/err.h"

static const char marker[] = "rbpeek-elf-test-marker-0123456789";
static char scratch[4096];  /* .bss: no file contents */

/* Runtime bias of the file mapped at its offset-0 mapping named like sub. */
static int bias_of(struct rbp_elf *e, const struct rbp_maps *m,
		   const char *sub, uint64_t *bias)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path && strstr(m->v[i].path, sub) &&
		    m->v[i].offset == 0)
			return rbp_elf_load_bias(e, m->v[i].start, 0, bias);
	return RBP_ENOSYM;
}

static const char *libc_path(const struct rbp_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path && strstr(m->v[i].path, "/libc.so"))
			return m->v[i].path;
	return NULL;
}

/* Open, look up, read: any outcome but a crash is fine; count the opens. */
static int poke(const char *path, uint64_t marker_vaddr)
{
	struct rbp_elf *e;
	uint64_t v, sz;
	char buf[sizeof(marker)];
	int err = rbp_elf_open(path, &e);

	if (err) {
		CHECK(err == RBP_EBADELF || err == RBP_ENOFILE);
		return 0;
	}
	err = rbp_elf_symbol(e, "main", &v, &sz);
	CHECK(err == RBP_OK || err == RBP_ENOSYM || err == RBP_EBADELF);
	err = rbp_elf_symbol(e, "no_such_symbol_here", &v, NULL);
	CHECK(err == RBP_ENOSYM || err == RBP_EBADELF);
	err = rbp_elf_read_vaddr(e, marker_vaddr, buf, sizeof(buf));
	CHECK(err == RBP_OK || err == RBP_EFAULT);
	rbp_elf_base_vaddr(e);
	rbp_elf_load_bias(e, 0x1000000, 0, &v);
	rbp_elf_close(e);
	return 1;
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char buf[65536];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	close(in);
	close(out);
}

static void patch(const char *path, uint64_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	if (pwrite(fd, bytes, n, (off_t)off) != (ssize_t)n)
		perror("pwrite");
	close(fd);
}

/* The build-id readelf reports for path, as lowercase hex; "" if none. */
static void readelf_build_id(const char *path, char *hex, size_t cap)
{
	char cmd[4200], line[256];
	FILE *f;

	hex[0] = 0;
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	if (!(f = popen(cmd, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "Build ID: ");
		if (p && sscanf(p + 10, "%127s", hex) == 1 && strlen(hex) < cap)
			break;
		hex[0] = 0;
	}
	pclose(f);
}

static void test_build_id(void)
{
	char want[128], got[128] = "";
	uint8_t id[64];
	size_t len = 0;
	struct rbp_elf *e = NULL;

	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	readelf_build_id(self, want, sizeof(want));
	TEST("build-id matches readelf") {
		CHECK_EQ_INT(rbp_elf_open("/proc/self/exe", &e), RBP_OK);
		if (!want[0]) {
			CHECK_EQ_INT(rbp_elf_build_id(e, id, sizeof(id), &len), RBP_ENOSYM);
		} else {
			CHECK_EQ_INT(rbp_elf_build_id(e, id, sizeof(id), &len), RBP_OK);
			for (size_t i = 0; i < len && 2 * i + 2 < sizeof(got); i++)
				snprintf(got + 2 * i, 3, "%02x", id[i]);
			CHECK_EQ_STR(got, want);
			CHECK_EQ_INT(rbp_elf_build_id(e, id, 4, &len), RBP_EINVAL);
		}
		rbp_elf_close(e);
	}
}

int main(void)
{
	test_build_id();
	struct rbp_maps m;
	struct rbp_elf *exe = NULL, *libc = NULL;
	uint64_t exe_bias = 0, libc_bias = 0, v, sz, marker_vaddr = 0;
	char buf[sizeof(marker)];
	char tmp[] = "/tmp/rbp-elf-XXXXXX";
	int fd;

	if (rbp_maps_read_pid(getpid(), &m))
		return 1;
	TEST("open self and libc") {
		CHECK_EQ_INT(rbp_elf_open("/proc/self/exe", &exe), RBP_OK);
		CHECK(libc_path(&m) != NULL);
		CHECK_EQ_INT(rbp_elf_open(libc_path(&m), &libc), RBP_OK);
		CHECK(exe && libc);
	}
	if (!exe || !libc)
		return harness_report();
	TEST("types and headers") {
		CHECK(rbp_elf_type(exe) == 2 || rbp_elf_type(exe) == 3);
		CHECK_EQ_INT(rbp_elf_type(libc), 3);
		CHECK_EQ_INT(rbp_elf_base_vaddr(libc), 0);
		CHECK(rbp_elf_phnum(libc) > 3);
		CHECK(rbp_elf_phdr(libc, rbp_elf_phnum(libc)) == NULL);
		CHECK(rbp_elf_file_size(libc) > 100000);
		CHECK_EQ_INT(rbp_elf_has_symtab(exe), 1);
	}
	TEST("libc symbols at their runtime addresses") {
		void *real = dlvsym(RTLD_DEFAULT, "realpath", "GLIBC_2.3");

		CHECK_EQ_INT(bias_of(libc, &m, "/libc.so", &libc_bias), RBP_OK);
		CHECK_EQ_INT(rbp_elf_symbol(libc, "gnu_get_libc_version", &v, &sz), RBP_OK);
		CHECK_EQ_INT(v + libc_bias, (uintptr_t)&gnu_get_libc_version);
		CHECK(sz > 0);
		/* two versions: the default one (@@GLIBC_2.3) must win */
		CHECK_EQ_INT(rbp_elf_symbol(libc, "realpath", &v, NULL), RBP_OK);
		CHECK_EQ_INT(v + libc_bias, (uintptr_t)real);
		CHECK_EQ_INT(rbp_elf_symbol(libc, "printf", &v, &sz), RBP_OK);
		CHECK(v != 0 && sz > 0);
		CHECK_EQ_INT(rbp_elf_symbol(libc, "rbpeek_no_such", &v, NULL), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_elf_symbol(libc, "", &v, NULL), RBP_ENOSYM);
	}
	TEST("own symbols and rodata") {
		CHECK_EQ_INT(bias_of(exe, &m, "test_elf", &exe_bias), RBP_OK);
		CHECK_EQ_INT(rbp_elf_symbol(exe, "main", &v, NULL), RBP_OK);
		CHECK_EQ_INT(v + exe_bias, (uintptr_t)&main);
		CHECK_EQ_INT(rbp_elf_symbol(exe, "marker", &v, &sz), RBP_OK);
		marker_vaddr = (uintptr_t)marker - exe_bias;
		CHECK_EQ_INT(v, marker_vaddr);
		CHECK_EQ_INT(sz, sizeof(marker));
		/* printf is undefined in the executable's .dynsym */
		CHECK_EQ_INT(rbp_elf_symbol(exe, "printf", &v, NULL), RBP_ENOSYM);
		memset(buf, 0, sizeof(buf));
		CHECK_EQ_INT(rbp_elf_read_vaddr(exe, marker_vaddr, buf, sizeof(buf)), RBP_OK);
		CHECK(!memcmp(buf, marker, sizeof(marker)));
		CHECK_EQ_INT(rbp_elf_read_vaddr(exe, (uintptr_t)scratch - exe_bias + 64,
						buf, 8), RBP_EFAULT);
		CHECK_EQ_INT(rbp_elf_read_vaddr(exe, UINT64_MAX - 4, buf, 8), RBP_EFAULT);
	}
	TEST("bias from a later mapping of the file") {
		for (size_t i = 0; i < m.n; i++) {
			if (!m.v[i].path || !strstr(m.v[i].path, "/libc.so"))
				continue;
			CHECK_EQ_INT(rbp_elf_load_bias(libc, m.v[i].start,
						       m.v[i].offset, &v), RBP_OK);
			CHECK_EQ_INT(v, libc_bias);
		}
		CHECK_EQ_INT(rbp_elf_load_bias(libc, 0, 1ULL << 40, &v), RBP_EINVAL);
	}
	TEST("non-ELF and missing files") {
		struct rbp_elf *e;

		CHECK_EQ_INT(rbp_elf_open("/nonexistent/x", &e), RBP_ENOFILE);
		CHECK(e == NULL);
		CHECK_EQ_INT(rbp_elf_open("/proc/self/maps", &e), RBP_EBADELF);
		CHECK_EQ_INT(rbp_elf_open("/etc/passwd", &e), RBP_EBADELF);
		CHECK_EQ_INT(rbp_elf_open("/", &e), RBP_EBADELF);
	}
	rbp_elf_close(libc);
	rbp_maps_free(&m);

	fd = mkstemp(tmp);
	close(fd);
	TEST("bogus header fields") {
		Elf64_Ehdr h;
		uint64_t big = 0xfffffffffff0ULL;
		uint16_t many = 0xffff, zero = 0;
		struct {
			size_t off;
			const void *val;
			size_t n;
		} edits[] = {
			{ offsetof(Elf64_Ehdr, e_shoff), &big, 8 },
			{ offsetof(Elf64_Ehdr, e_phoff), &big, 8 },
			{ offsetof(Elf64_Ehdr, e_shnum), &many, 2 },
			{ offsetof(Elf64_Ehdr, e_phnum), &many, 2 },
			{ offsetof(Elf64_Ehdr, e_shnum), &zero, 2 },
			{ offsetof(Elf64_Ehdr, e_phentsize), &zero, 2 },
			{ offsetof(Elf64_Ehdr, e_shentsize), &many, 2 },
		};

		copy_file("/proc/self/exe", tmp);
		fd = open(tmp, O_RDONLY);
		CHECK(read(fd, &h, sizeof(h)) == sizeof(h));
		close(fd);
		for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
			patch(tmp, edits[i].off, edits[i].val, edits[i].n);
			poke(tmp, marker_vaddr);
			patch(tmp, 0, &h, sizeof(h));
		}
		/* shdr 0 with a huge count for extended numbering */
		patch(tmp, offsetof(Elf64_Ehdr, e_shnum), &zero, 2);
		patch(tmp, h.e_shoff + offsetof(Elf64_Shdr, sh_size), &big, 8);
		CHECK_EQ_INT(poke(tmp, marker_vaddr), 0);
	}
	TEST("flipped bytes") {
		struct stat st;
		uint64_t size;
		unsigned seed = 12345;

		copy_file("/proc/self/exe", tmp);
		stat(tmp, &st);
		size = (uint64_t)st.st_size;
		for (int i = 0; i < 1500; i++) {
			unsigned char c, x;
			uint64_t off;

			seed = seed * 1103515245u + 12345u;
			off = i < 512 ? (uint64_t)i : (seed >> 4) % size;
			fd = open(tmp, O_RDWR);
			CHECK(pread(fd, &c, 1, (off_t)off) == 1);
			x = c ^ (unsigned char)(1u << (seed >> 28) % 8) ^ (i & 0x80 ? 0xff : 0);
			CHECK(pwrite(fd, &x, 1, (off_t)off) == 1);
			poke(tmp, marker_vaddr);
			CHECK(pwrite(fd, &c, 1, (off_t)off) == 1);
			close(fd);
		}
	}
	TEST("truncated copies") {
		struct stat st;
		int opened = 0;

		copy_file("/proc/self/exe", tmp);
		stat(tmp, &st);
		for (off_t len = st.st_size; len >= 0;
		     len -= len > 4096 ? 997 : (len > 256 ? 61 : 1)) {
			CHECK(truncate(tmp, len) == 0);
			opened += poke(tmp, marker_vaddr);
		}
		CHECK(opened > 0);
	}
	unlink(tmp);
	rbp_elf_close(exe);
	return harness_report();
}
