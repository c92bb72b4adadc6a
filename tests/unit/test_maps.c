/* test_maps.c - /proc/PID/maps parsing and lookup. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proc/maps.h"
#include "util/err.h"

static const char fixture[] =
	"55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1311        /usr/bin/ruby3.1\n"
	"55d0c0a02000-55d0c0a03000 r-xp 00002000 fe:01 1311        /usr/bin/ruby3.1\n"
	"55d0c1b8a000-55d0c1f3c000 rw-p 00000000 00:00 0           [heap]\n"
	"7f1a2b000000-7f1a2b021000 rw-p 00000000 00:00 0 \n"
	"7f1a2c000000-7f1a2c100000 r--s 00010000 fe:01 99          /tmp/my dir/data file.bin\n"
	"7f1a2d000000-7f1a2d001000 r-xp 00003000 fe:01 42          /tmp/gone.so (deleted)\n"
	"7ffd5a9c2000-7ffd5a9c4000 r-xp 00000000 00:00 0           [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]\n";

int main(void)
{
	struct rbp_maps m;
	const struct rbp_mapping *x;

	TEST("parse fixture") {
		CHECK_EQ_INT(rbp_maps_parse(fixture, strlen(fixture), &m), RBP_OK);
		CHECK_EQ_INT(m.n, 8);
		CHECK_EQ_STR(m.v[0].path, "/usr/bin/ruby3.1");
		CHECK_EQ_INT(m.v[0].start, 0x55d0c0a00000ULL);
		CHECK_EQ_INT(m.v[0].end, 0x55d0c0a02000ULL);
		CHECK_EQ_INT(m.v[0].prot, RBP_PROT_R);
		CHECK_EQ_INT(m.v[1].prot, RBP_PROT_R | RBP_PROT_X);
		CHECK_EQ_INT(m.v[1].offset, 0x2000);
		CHECK_EQ_STR(m.v[2].path, "[heap]");
		CHECK_EQ_INT(m.v[2].prot, RBP_PROT_R | RBP_PROT_W);
		CHECK(m.v[3].path == NULL);
		CHECK_EQ_STR(m.v[4].path, "/tmp/my dir/data file.bin");
		CHECK_EQ_INT(m.v[4].offset, 0x10000);
		CHECK_EQ_INT(m.v[4].deleted, 0);
		CHECK_EQ_STR(m.v[5].path, "/tmp/gone.so");
		CHECK_EQ_INT(m.v[5].deleted, 1);
		CHECK_EQ_STR(m.v[6].path, "[vdso]");
		CHECK_EQ_INT(m.v[7].start, 0xffffffffff600000ULL);
		CHECK_EQ_INT(m.v[7].prot, RBP_PROT_X);
	}
	TEST("find") {
		x = rbp_maps_find(&m, 0x55d0c0a02fffULL);
		CHECK(x && x == &m.v[1]);
		x = rbp_maps_find(&m, 0x55d0c0a00000ULL);
		CHECK(x && x == &m.v[0]);
		CHECK(rbp_maps_find(&m, 0x55d0c0a03000ULL) == NULL);
		CHECK(rbp_maps_find(&m, 0) == NULL);
		CHECK(rbp_maps_find(&m, UINT64_MAX) == NULL);
		x = rbp_maps_find(&m, 0x7f1a2c0abcdeULL);
		CHECK(x && !strcmp(x->path, "/tmp/my dir/data file.bin"));
		x = rbp_maps_find(&m, 0xffffffffff600123ULL);
		CHECK(x && !strcmp(x->path, "[vsyscall]"));
		rbp_maps_free(&m);
		CHECK_EQ_INT(m.n, 0);
	}
	TEST("unsorted input, no trailing newline") {
		const char *t = "2000-3000 r--p 0 0:0 0 /b\n1000-2000 r--p 0 0:0 0 /a";

		CHECK_EQ_INT(rbp_maps_parse(t, strlen(t), &m), RBP_OK);
		CHECK_EQ_INT(m.n, 2);
		CHECK_EQ_STR(m.v[0].path, "/a");
		CHECK_EQ_STR(m.v[1].path, "/b");
		rbp_maps_free(&m);
	}
	TEST("empty and malformed") {
		CHECK_EQ_INT(rbp_maps_parse("", 0, &m), RBP_OK);
		CHECK_EQ_INT(m.n, 0);
		CHECK(rbp_maps_find(&m, 0x1000) == NULL);
		rbp_maps_free(&m);
		CHECK_EQ_INT(rbp_maps_parse("zzz\n", 4, &m), RBP_EINVAL);
		CHECK_EQ_INT(rbp_maps_parse("3000-1000 r--p 0 0:0 0\n", 23, &m), RBP_EINVAL);
		CHECK_EQ_INT(rbp_maps_parse("1000-2000 r", 11, &m), RBP_EINVAL);
		/* every prefix of the fixture parses or fails cleanly */
		for (size_t i = 0; i < sizeof(fixture) - 1; i++) {
			int err = rbp_maps_parse(fixture, i, &m);

			CHECK(err == RBP_OK || err == RBP_EINVAL);
			if (!err)
				rbp_maps_free(&m);
		}
	}
	TEST("read own maps") {
		const struct rbp_mapping *self;

		CHECK_EQ_INT(rbp_maps_read_pid(getpid(), &m), RBP_OK);
		CHECK(m.n > 5);
		self = rbp_maps_find(&m, (uint64_t)(uintptr_t)&main);
		CHECK(self && self->path && (self->prot & RBP_PROT_X));
		self = rbp_maps_find(&m, (uint64_t)(uintptr_t)&m);  /* the stack */
		CHECK(self && (self->prot & RBP_PROT_W));
		rbp_maps_free(&m);
		CHECK_EQ_INT(rbp_maps_read_pid(0x7ffffff0, &m), RBP_ENOPROC);
	}
	return harness_report();
}
