/*
 * test_dwarf.c - proc/dwarf.c against this very binary's DWARF (unit tests
 * are built with -g): every answer is compared with what the compiler says
 * (offsetof, sizeof, enum values, the bits a bitfield sets), for shapes
 * Ruby's structs have - typedefs, nested named structs, anonymous unions
 * and structs, bitfields, pointers to structs.  Also the Ruby reader
 * (ruby/layout_dwarf.c) on a file without Ruby's types, and the field list
 * of struct rbp_layout (ruby/layout_fields.c).
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proc/dwarf.h"
#include "ruby/layout.h"
#include "ruby/layout_dwarf.h"
#include "util/err.h"

enum fx_color { FX_RED = 3, FX_BLUE = -2, FX_BIG = 0x7fff0001 };
enum fx_small { FX_S0, FX_S7 = 7 };
/* built with -g3 (Makefile): macros are in .debug_macro */
#define FX_MACRO_NEG (-2)
#define FX_MACRO_UNIT 512U
#define FX_MACRO_EXPR (1 << 3)
#define FX_MACRO_FUNC(x) 5

typedef struct fx_inner {
	int a;
	union {
		long u1;
		struct {
			char c;
			short s;
		} pair;
	};
} fx_inner_t;

struct fx_outer {
	void *p;
	struct {
		int x;
		fx_inner_t in;
	} named;
	struct {
		long anon_a;
		long anon_b;
	};
	unsigned flag1 : 1;
	enum fx_small color : 3;
	unsigned wide : 20;
	const fx_inner_t *ptr;
	char tail[7];
	uint16_t small;
};
typedef struct fx_outer fx_outer_t;

/* Used, so that the compiler keeps the types in the DWARF. */
fx_outer_t fx_instance;
volatile enum fx_color fx_color_var = FX_BIG;

/* The first set bit and the width of the bits set in a zeroed object. */
static void set_bits(const unsigned char *b, size_t n, uint32_t *first, uint32_t *width)
{
	*first = *width = 0;
	int seen = 0;
	for (uint32_t i = 0; i < n * 8; i++)
		if (b[i / 8] >> (i % 8) & 1) {
			if (!seen)
				*first = i;
			seen = 1;
			*width = i - *first + 1;
		}
}

static const char *const types[] = { "fx_outer_t", "struct fx_inner", "fx_inner_t", "struct nope" };
static const char *const consts[] = {
	"FX_RED", "FX_BLUE", "FX_BIG", "FX_MISSING", "FX_MACRO_NEG", "FX_MACRO_UNIT",
	"FX_MACRO_EXPR", "FX_MACRO_FUNC",
};
#define N_CONSTS (sizeof(consts) / sizeof(consts[0]))
static const char *const hints[] = { "test_dwarf.c" };

int main(void)
{
	struct rbp_dwarf *d = NULL;
	struct rbp_dwarf_member m;
	size_t units = 0;
	int64_t v;
	uint64_t size;

	fx_instance.flag1 = 1;

	TEST("dwarf: open this binary") {
		CHECK_EQ_INT(rbp_dwarf_open("/proc/self/exe", &d), RBP_OK);
	}
	if (!d)
		return harness_report();

	TEST("dwarf: one hinted unit finds every type") {
		CHECK_EQ_INT(rbp_dwarf_index(d, types, 4, 4, consts, N_CONSTS, hints, 1, &units), RBP_OK);
		/* "struct nope" is missing and required, so every unit was visited */
		CHECK(units > 1);
		/* optional: looked for in the hinted unit only */
		CHECK_EQ_INT(rbp_dwarf_index(d, types, 4, 3, consts, N_CONSTS, hints, 1, &units), RBP_OK);
		CHECK_EQ_INT(units, 1);
		CHECK_EQ_INT(rbp_dwarf_index(d, types, 3, 3, consts, N_CONSTS, hints, 1, &units), RBP_OK);
		CHECK_EQ_INT(units, 1);
	}

	TEST("dwarf: member offsets, through named and unnamed members") {
		static const struct {
			const char *path;
			size_t off;
		} cases[] = {
			{ "p", offsetof(fx_outer_t, p) },
			{ "named.x", offsetof(fx_outer_t, named.x) },
			{ "named.in.a", offsetof(fx_outer_t, named.in.a) },
			{ "named.in.u1", offsetof(fx_outer_t, named.in.u1) },
			{ "named.in.pair.s", offsetof(fx_outer_t, named.in.pair.s) },
			{ "anon_b", offsetof(fx_outer_t, anon_b) },
			{ "ptr", offsetof(fx_outer_t, ptr) },
			{ "tail", offsetof(fx_outer_t, tail) },
			{ "small", offsetof(fx_outer_t, small) },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int err = rbp_dwarf_member(d, "fx_outer_t", cases[i].path, &m);
			if (err || (size_t)m.offset != cases[i].off)
				fprintf(stderr, "  %s: err %d, offset %lld, expected %zu\n", cases[i].path,
					err, (long long)m.offset, cases[i].off);
			CHECK(!err && (size_t)m.offset == cases[i].off);
		}
	}

	TEST("dwarf: member sizes and pointers") {
		CHECK(!rbp_dwarf_member(d, "fx_outer_t", "tail", &m) && m.size == 7 && !m.is_pointer);
		CHECK(!rbp_dwarf_member(d, "fx_outer_t", "small", &m) && m.size == 2);
		CHECK(!rbp_dwarf_member(d, "fx_outer_t", "ptr", &m) && m.size == 8 && m.is_pointer);
		CHECK(!rbp_dwarf_member(d, "fx_outer_t", "named.in", &m) &&
		      m.size == sizeof(fx_inner_t) && m.bit_size == 0);
		CHECK(!rbp_dwarf_pointee_member(d, "fx_outer_t", "ptr", "pair.s", &v) &&
		      v == (int64_t)offsetof(fx_inner_t, pair.s));
		CHECK_EQ_INT(rbp_dwarf_pointee_member(d, "fx_outer_t", "tail", "a", &v), RBP_ENOSYM);
	}

	TEST("dwarf: bitfields where the compiler puts them") {
		static const char *const names[] = { "flag1", "color", "wide" };
		for (int i = 0; i < 3; i++) {
			fx_outer_t o;
			uint32_t first, width;
			memset(&o, 0, sizeof(o));
			if (i == 0)
				o.flag1 = 1;
			else if (i == 1)
				o.color = FX_S7;
			else
				o.wide = 0xfffff;
			set_bits((const unsigned char *)&o, sizeof(o), &first, &width);
			CHECK(!rbp_dwarf_member(d, "fx_outer_t", names[i], &m));
			CHECK_EQ_INT(m.bit_offset, first);
			CHECK_EQ_INT(m.bit_size, width);
		}
	}

	TEST("dwarf: sizeof by typedef and by struct name") {
		CHECK(!rbp_dwarf_sizeof(d, "fx_outer_t", &size) && size == sizeof(fx_outer_t));
		CHECK(!rbp_dwarf_sizeof(d, "struct fx_inner", &size) && size == sizeof(fx_inner_t));
		CHECK_EQ_INT(rbp_dwarf_sizeof(d, "struct nope", &size), RBP_ENOSYM);
	}

	TEST("dwarf: enumerators") {
		CHECK(!rbp_dwarf_const(d, "FX_RED", &v) && v == FX_RED);
		CHECK(!rbp_dwarf_const(d, "FX_BLUE", &v) && v == FX_BLUE);
		CHECK(!rbp_dwarf_const(d, "FX_BIG", &v) && v == FX_BIG);
		CHECK_EQ_INT(rbp_dwarf_const(d, "FX_MISSING", &v), RBP_ENOSYM);
	}

	TEST("dwarf: macros whose body is an integer literal") {
		CHECK(!rbp_dwarf_const(d, "FX_MACRO_NEG", &v) && v == FX_MACRO_NEG);
		CHECK(!rbp_dwarf_const(d, "FX_MACRO_UNIT", &v) && v == FX_MACRO_UNIT);
		/* an expression or a function-like macro is not evaluated */
		CHECK_EQ_INT(rbp_dwarf_const(d, "FX_MACRO_EXPR", &v), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_dwarf_const(d, "FX_MACRO_FUNC", &v), RBP_ENOSYM);
		CHECK(FX_MACRO_EXPR == 8 && FX_MACRO_FUNC(0) == 5);
	}

	TEST("dwarf: what is not there") {
		CHECK_EQ_INT(rbp_dwarf_member(d, "fx_outer_t", "nope", &m), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_dwarf_member(d, "fx_outer_t", "named.nope", &m), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_dwarf_member(d, "fx_outer_t", "p.x", &m), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_dwarf_member(d, "struct nope", "a", &m), RBP_ENOSYM);
		CHECK_EQ_INT(rbp_dwarf_member(d, "never indexed", "a", &m), RBP_ENOSYM);
	}

	TEST("dwarf: a file without Ruby's structs gives no layout, and says why") {
		struct rbp_layout L;
		struct rbp_layout_dwarf_report rep;
		CHECK_EQ_INT(rbp_layout_from_dwarf(d, "3.3.8", &rbp_layouts[0], &L, &rep), RBP_ENOSYM);
		CHECK(strstr(rep.missing, "rb_vm_t") != NULL);
	}
	rbp_dwarf_close(d);

	TEST("dwarf: files without DWARF") {
		char name[64];
		char path[] = "/tmp/rbpeek-test-dwarf.XXXXXX";
		int fd = mkstemp(path);
		CHECK(fd >= 0 && write(fd, "not an ELF file", 15) == 15);
		close(fd);
		CHECK_EQ_INT(rbp_dwarf_open(path, &d), RBP_EBADELF);
		CHECK_EQ_INT(rbp_dwarf_debuglink(path, name, sizeof(name)), RBP_ENOSYM);
		unlink(path);
		CHECK_EQ_INT(rbp_dwarf_open("/nonexistent/rbpeek", &d), RBP_ENOFILE);
		CHECK_EQ_INT(rbp_dwarf_debuglink("/proc/self/exe", name, sizeof(name)), RBP_ENOSYM);
	}

	TEST("layout fields: named once, in order, inside the struct") {
		CHECK(rbp_layout_n_fields > 100);
		for (size_t i = 0; i < rbp_layout_n_fields; i++) {
			const struct rbp_layout_field *f = &rbp_layout_fields[i];
			static const size_t sizes[] = { 1, 1, 2, 2, 4, 8, sizeof(struct rbp_bitfield) };
			CHECK(f->off + sizes[f->kind] <= sizeof(struct rbp_layout));
			if (i > 0) {
				const struct rbp_layout_field *p = &rbp_layout_fields[i - 1];
				CHECK(p->off + sizes[p->kind] <= f->off);
				/* a gap wider than alignment padding is a field left out;
				 * a group (a nested struct, "cfp." ...) may start at 8 */
				size_t glen = strcspn(f->name, ".");
				int same = !strncmp(f->name, p->name, glen) && p->name[glen] == f->name[glen];
				CHECK(f->off - (p->off + sizes[p->kind]) < (same ? sizes[f->kind] : 8));
			}
		}
	}

	TEST("layout fields: compare names the fields that differ") {
		struct rbp_layout a = rbp_layouts[0], b = rbp_layouts[0];
		char buf[80];
		b.thread.ec++;
		b.thread.status.shift++;
		size_t diff = 0;
		for (size_t i = 0; i < rbp_layout_n_fields; i++)
			if (!rbp_layout_field_eq(&a, &b, &rbp_layout_fields[i])) {
				diff++;
				CHECK(!strcmp(rbp_layout_fields[i].name, "thread.ec") ||
				      !strcmp(rbp_layout_fields[i].name, "thread.status"));
			}
		CHECK_EQ_INT(diff, 2);
		for (size_t i = 0; i < rbp_layout_n_fields; i++)
			if (!strcmp(rbp_layout_fields[i].name, "value.qnil")) {
				rbp_layout_field_str(&a, &rbp_layout_fields[i], buf, sizeof(buf));
				CHECK_EQ_STR(buf, "0x4");
			}
	}
	return harness_report();
}
