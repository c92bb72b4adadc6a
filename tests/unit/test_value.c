/*
 * Decoding Ruby objects (strings, arrays, IDs, class paths, method
 * prefixes) from a synthetic memory image laid out with the real Ruby 3.1
 * layout table, plus garbage: wild pointers, wrong types, absurd lengths.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proc/reader.h"
#include "proc/target.h"
#include "ruby/internal.h"

#define BASE 0x10000000ull
#define SIZE (256 * 1024)

static uint8_t mem[SIZE];
static uint64_t brk_ = BASE + 64;
static const struct rbp_layout *L;

static uint64_t alloc(size_t n)
{
	uint64_t a = brk_;
	brk_ += (n + 15) & ~(size_t)15;
	return a;
}
static void put64(uint64_t addr, uint64_t v) { memcpy(mem + (addr - BASE), &v, 8); }
static void put32(uint64_t addr, uint32_t v) { memcpy(mem + (addr - BASE), &v, 4); }

/* A String, embedded when short (3.1 model: length in the flags). */
static uint64_t str(const char *s)
{
	uint64_t o = alloc(40), len = strlen(s);
	if (len < 24) {
		put64(o, L->value.t_string | (len << L->rstring.embed_len_shift));
		memcpy(mem + (o - BASE) + L->rstring.embed_ary, s, len);
	} else {
		uint64_t p = alloc(len + 1);
		memcpy(mem + (p - BASE), s, len);
		put64(o, L->value.t_string | L->rstring.noembed);
		put64(o + L->rstring.heap_len, len);
		put64(o + L->rstring.heap_ptr, p);
	}
	return o;
}

static uint64_t ary(const uint64_t *v, size_t n)
{
	uint64_t o = alloc(40);
	uint64_t p = alloc(8 * n + 8);
	for (size_t i = 0; i < n; i++)
		put64(p + 8 * i, v[i]);
	put64(o, L->value.t_array);
	put64(o + L->rarray.heap_len, n);
	put64(o + L->rarray.heap_ptr, p);
	return o;
}

/*
 * Global symbols with one name per serial in names[] (serial = SERIAL0 +
 * index): real serials of named IDs come after the operator IDs.
 */
#define SERIAL0 300
static uint64_t symbols(const char **names, size_t n)
{
	uint64_t *chunk = calloc(L->id.entry_unit * L->id.entry_size, 8);
	for (size_t i = 1; i < n; i++)
		chunk[(SERIAL0 + i) * L->id.entry_size + L->id.entry_str] = str(names[i]);
	for (size_t i = 0; i < (size_t)L->id.entry_unit * L->id.entry_size; i++)
		if (!chunk[i])
			chunk[i] = L->value.qnil;
	uint64_t c = ary(chunk, L->id.entry_unit * L->id.entry_size);
	uint64_t ids = ary(&c, 1);
	uint64_t tbl = alloc(64);
	put32(tbl + L->symbols.last_id, 480);
	put64(tbl + L->symbols.ids, ids);
	free(chunk);
	return tbl;
}

static uint64_t id_of(uint64_t i) { return (SERIAL0 + i) << L->id.scope_shift | 1; }

/* A class (or module) with the given ivars (ID -> VALUE) in its iv_tbl. */
static uint64_t klass(int type, uint64_t flags, const uint64_t *kv, size_t n)
{
	uint64_t k = alloc(64), ext = alloc(256), tbl = alloc(128), ent = alloc(24 * n + 8);
	put64(k, (uint64_t)type | flags);
	put64(k + L->rclass.ext_ptr, ext);
	put64(ext + L->classext.iv_tbl, tbl);
	put64(tbl + L->st.entries_start, 0);
	put64(tbl + L->st.entries_bound, n);
	put64(tbl + L->st.entries, ent);
	for (size_t i = 0; i < n; i++) {
		put64(ent + i * L->st_entry.size + L->st_entry.key, kv[2 * i]);
		put64(ent + i * L->st_entry.size + L->st_entry.record, kv[2 * i + 1]);
	}
	return k;
}

int main(void)
{
	static const char *names[] = { "", "each", "__classpath__", "grüße", "ivar" };
	struct rbp_image_segment seg = { BASE, mem, SIZE };
	struct rbp_target t = { 0 };
	struct rbp_vm vm = { 0 };
	char buf[64];
	size_t len;
	const char *s;

	L = rbp_layout_find("3.1.2");
	if (!L || !L->rstring.embed_len_mask || L->rclass.ext_ptr < 0) {
		printf("skip: needs the 3.1 layout\n");
		return harness_report();
	}
	CHECK(rbp_reader_open_image(&seg, 1, &t.mem) == 0);
	vm.t = &t;
	rbp_layout_use(&vm.layout, L);
	vm.L = &vm.layout;
	vm.symbols_addr = symbols(names, 5);

	uint64_t s_short = str("hello"), s_long = str("/a/path/that/is/longer/than/24/bytes.rb");
	TEST("strings") {
		CHECK(rv_string(&vm, s_short, buf, sizeof(buf), &len) == 0);
		CHECK_EQ_STR(buf, "hello");
		CHECK(rv_string(&vm, s_long, buf, sizeof(buf), &len) == 0);
		CHECK_EQ_STR(buf, "/a/path/that/is/longer/than/24/bytes.rb");
		CHECK(rv_string(&vm, s_long, buf, 8, &len) == 0);   /* truncated */
		CHECK_EQ_STR(buf, "/a/path");
		CHECK(rv_string_intern(&vm, s_short, &s) == 0 && !strcmp(s, "hello"));
	}
	TEST("garbage strings") {
		uint64_t bogus = str("x");
		put64(bogus, L->value.t_string | L->rstring.noembed);
		put64(bogus + L->rstring.heap_len, 1ull << 40);   /* absurd length */
		CHECK(rv_string(&vm, bogus, buf, sizeof(buf), &len) != 0);
		put64(bogus + L->rstring.heap_len, 10);
		put64(bogus + L->rstring.heap_ptr, 0xdead0000ull);  /* unmapped */
		CHECK(rv_string(&vm, bogus, buf, sizeof(buf), &len) != 0);
		CHECK(rv_string(&vm, L->value.qnil, buf, sizeof(buf), &len) != 0);
		CHECK(rv_string(&vm, BASE + SIZE + 4096, buf, sizeof(buf), &len) != 0);
		uint64_t arr = ary(&s_short, 1);
		CHECK(rv_string(&vm, arr, buf, sizeof(buf), &len) != 0);   /* wrong type */
	}
	TEST("arrays") {
		uint64_t v[] = { s_short, s_long, L->value.qnil }, n, x;
		uint64_t a = ary(v, 3);
		CHECK(rv_array_len(&vm, a, &n) == 0 && n == 3);
		CHECK(rv_array_get(&vm, a, 1, &x) == 0 && x == s_long);
		CHECK(rv_array_get(&vm, a, 3, &x) != 0);
		CHECK(rv_array_get(&vm, s_short, 0, &x) != 0);
	}
	TEST("ID names through the symbol table") {
		CHECK(rv_id_name(&vm, id_of(1), &s) == 0 && !strcmp(s, "each"));
		CHECK(rv_id_name(&vm, id_of(3), &s) == 0 && !strcmp(s, "grüße"));
		CHECK(rv_id_name(&vm, id_of(3), &s) == 0 && !strcmp(s, "grüße"));  /* cached */
		CHECK(rv_id_name(&vm, id_of(100), &s) != 0);   /* nil entry */
		CHECK(rv_id_name(&vm, id_of(5000), &s) != 0);  /* beyond last_id */
	}
	TEST("class paths and method prefixes") {
		uint64_t path = str("Foo::Bar");
		uint64_t kv[] = { id_of(4), L->value.qnil, id_of(2), path };
		uint64_t k = klass(L->value.t_class, 0, kv, 2);
		uint64_t m = klass(L->value.t_module, 0, (uint64_t[]){ id_of(2), str("Kernel") }, 1);
		uint64_t anon = klass(L->value.t_class, 0, (uint64_t[]){ id_of(4), L->value.qnil }, 1);
		uint64_t meta = klass(L->value.t_class, L->value.fl_singleton,
				      (uint64_t[]){ L->classext.id_attached, k }, 1);
		CHECK(rv_class_path(&vm, k, &s) == 0);
		CHECK_EQ_STR(s, "Foo::Bar");
		CHECK(rv_class_path(&vm, anon, &s) == 0);
		CHECK_EQ_STR(s, "");
		rv_method_prefix(&vm, k, buf, sizeof(buf));
		CHECK_EQ_STR(buf, "Foo::Bar#");
		rv_method_prefix(&vm, m, buf, sizeof(buf));
		CHECK_EQ_STR(buf, "Kernel#");
		rv_method_prefix(&vm, meta, buf, sizeof(buf));
		CHECK_EQ_STR(buf, "Foo::Bar.");
		rv_method_prefix(&vm, anon, buf, sizeof(buf));
		CHECK_EQ_STR(buf, "");
		rv_method_prefix(&vm, s_short, buf, sizeof(buf));  /* not a class */
		CHECK_EQ_STR(buf, "");
		rv_method_prefix(&vm, 0xdead0000ull, buf, sizeof(buf));
		CHECK_EQ_STR(buf, "");
	}
	rbp_hmap_clear(&vm.id_names);
	rbp_hmap_clear(&vm.class_paths);
	rbp_strpool_free(&vm.pool);
	rbp_reader_close(t.mem);
	return harness_report();
}
