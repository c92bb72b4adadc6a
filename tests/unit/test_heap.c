/*
 * The collector's state and the heap census (src/ruby/gc.c, heap.c) on a
 * synthetic memory image laid out with the real layout tables of Ruby 3.1
 * (a plain page array) and 3.4 (an rb_darray of pages, several slot
 * sizes), plus garbage: wild page pointers, absurd slot counts and page
 * counts, a missing objspace.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proc/reader.h"
#include "proc/target.h"
#include "ruby/gc.h"
#include "ruby/internal.h"

#define BASE 0x10000000ull
#define SIZE (1024 * 1024)

static uint8_t mem[SIZE];
static uint64_t brk_;
static const struct rbp_layout *L;

static uint64_t alloc(size_t n)
{
	uint64_t a = brk_;
	brk_ += (n + 15) & ~(size_t)15;
	return a;
}
static void put64(uint64_t addr, uint64_t v) { memcpy(mem + (addr - BASE), &v, 8); }
static void put16(uint64_t addr, uint16_t v) { memcpy(mem + (addr - BASE), &v, 2); }

/* Set a bitfield of the layout in the image. */
static void put_bits(uint64_t base, const struct rbp_bitfield *bf, uint64_t v)
{
	uint64_t w = 0;
	memcpy(&w, mem + (base + bf->off - BASE), bf->size);
	w = (w & ~((uint64_t)bf->mask << bf->shift)) | (v & bf->mask) << bf->shift;
	memcpy(mem + (base + bf->off - BASE), &w, bf->size);
}

/* A page of n slots of slot bytes; slot i gets types[i] (0 free) and class k. */
static uint64_t page(uint16_t n, uint16_t slot, const uint8_t *types, uint64_t k)
{
	uint64_t pg = alloc(64), start = alloc((size_t)n * slot);
	put64(pg + L->heap_page.start, start);
	put16(pg + L->heap_page.total_slots, n);
	put16(pg + L->heap_page.free_slots, 0);
	if (L->heap_page.slot_size >= 0)
		put16(pg + L->heap_page.slot_size, slot);
	for (uint16_t i = 0; i < n; i++) {
		put64(start + (uint64_t)i * slot, types[i]);
		put64(start + (uint64_t)i * slot + 8, types[i] ? k : 0);
	}
	return pg;
}

/* vm -> objspace -> pages; returns the objspace address. */
static uint64_t heap_image(struct rbp_vm *vm, const uint64_t *pages, size_t n)
{
	uint64_t os = alloc(4096), arr;
	memset(mem + (os - BASE), 0, 4096);
	vm->vm_addr = alloc(4096);
	put64(vm->vm_addr + L->vm.objspace, os);
	if (L->darray.data >= 0) {
		arr = alloc((size_t)L->darray.data + 8 * n);
		put64(arr + L->darray.len, n);
		for (size_t i = 0; i < n; i++)
			put64(arr + L->darray.data + 8 * i, pages[i]);
	} else {
		arr = alloc(8 * n);
		put64(os + L->objspace.pages_count, n);
		for (size_t i = 0; i < n; i++)
			put64(arr + 8 * i, pages[i]);
	}
	put64(os + L->objspace.pages_sorted, arr);
	return os;
}

static void reset(struct rbp_vm *vm, struct rbp_target *t, const char *version)
{
	rbp_strpool_free(&vm->pool);
	rbp_hmap_clear(&vm->class_paths);
	memset(vm, 0, sizeof(*vm));
	memset(mem, 0, sizeof(mem));
	brk_ = BASE + 64;
	L = rbp_layout_find(version);
	if (L) {
		rbp_layout_use(&vm->layout, L);
		L = &vm->layout;
	}
	vm->t = t;
	vm->L = L;
}

static void census(const char *version, uint16_t slot2)
{
	static const uint8_t a[] = { 5, 5, 0, 1, 1, 1, 7, 0 };  /* 2 strings, 3 objects, 1 array */
	static const uint8_t b[] = { 1, 0, 0, 0x1a };           /* 1 object, 1 imemo */
	struct rbp_image_segment seg = { BASE, mem, SIZE };
	struct rbp_target t = { .is_core = 1 };
	struct rbp_vm vm = { 0 };
	struct rbp_heap h = { 0 };
	enum rbp_gc_phase g;

	reset(&vm, &t, version);
	if (!L) {
		CHECK(L != NULL);
		return;
	}
	CHECK(rbp_reader_open_image(&seg, 1, &t.mem) == 0);
	uint64_t k1 = alloc(64), k2 = alloc(64);
	put64(k1, L->value.t_class);
	put64(k2, L->value.t_class);
	uint64_t pages[] = { page(8, 40, a, k1), page(4, slot2, b, k2) };
	uint64_t os = heap_image(&vm, pages, 2);

	TEST("census counts types, free slots, classes") {
		CHECK(rbp_vm_read_heap(&vm, &h) == 0);
		CHECK_EQ_INT(h.pages, 2);
		CHECK_EQ_INT(h.slots, 12);
		CHECK_EQ_INT(h.free_slots, 4);
		CHECK_EQ_INT(h.by_type[5], 2);
		CHECK_EQ_INT(h.by_type[1], 4);
		CHECK_EQ_INT(h.by_type[7], 1);
		CHECK_EQ_INT(h.by_type[0x1a], 1);
		CHECK_EQ_INT(h.bad_pages, 0);
		/* k1: 2 strings + 3 objects + 1 array; k2: 1 object (not the imemo) */
		CHECK_EQ_INT(h.n_classes, 2);
		if (h.n_classes == 2) {
			CHECK(h.classes[0].klass == k1 && h.classes[0].count == 6);
			CHECK(h.classes[1].klass == k2 && h.classes[1].count == 1);
			CHECK_EQ_STR(h.classes[0].name, "(anonymous)");
		}
		CHECK_EQ_INT(h.n_pools, slot2 == 40 ? 1 : 2);
		CHECK(h.gc == RBP_GC_NONE && h.pause_ns == 0);
	}
	TEST("GC phase from the objspace flags") {
		put_bits(os, &L->objspace.during_gc, 1);
		put_bits(os, &L->objspace.mode, L->objspace.mode_marking);
		CHECK(rbp_vm_gc_phase(&vm, &g) == 0 && g == RBP_GC_MARKING);
		put_bits(os, &L->objspace.mode, L->objspace.mode_sweeping);
		CHECK(rbp_vm_gc_phase(&vm, &g) == 0 && g == RBP_GC_SWEEPING);
		put_bits(os, &L->objspace.mode, L->objspace.mode_none);
		CHECK(rbp_vm_gc_phase(&vm, &g) == 0 && g == RBP_GC_RUNNING);
		CHECK_EQ_STR(rbp_gc_label(g), "(GC)");
		put_bits(os, &L->objspace.during_gc, 0);
		put_bits(os, &L->objspace.mode, L->objspace.mode_marking);   /* between incremental steps */
		CHECK(rbp_vm_gc_phase(&vm, &g) == 0 && g == RBP_GC_NONE);
		CHECK(rbp_gc_label(RBP_GC_NONE) == NULL);
	}
	TEST("the collector's thread: the GVL holder, else the main thread") {
		struct rbp_thread th[2] = { { .is_main = 1 }, { .has_gvl = 1 } };
		struct rbp_stacks s = { .threads = th, .n_threads = 2 };
		put_bits(os, &L->objspace.during_gc, 1);
		rv_gc_mark_threads(&vm, &s);
		CHECK(th[0].gc == RBP_GC_NONE && th[1].gc == RBP_GC_MARKING);
		th[1].has_gvl = 0;
		rv_gc_mark_threads(&vm, &s);
		CHECK(th[0].gc == RBP_GC_MARKING && th[1].gc == RBP_GC_NONE);
		put_bits(os, &L->objspace.during_gc, 0);
		rv_gc_mark_threads(&vm, &s);
		CHECK(th[0].gc == RBP_GC_NONE && th[1].gc == RBP_GC_NONE);
	}
	TEST("garbage pages are skipped, not trusted") {
		uint64_t wild = alloc(64);
		put64(wild + L->heap_page.start, 0xdead0000beef);    /* unmapped slots */
		put16(wild + L->heap_page.total_slots, 100);
		uint64_t huge = page(8, 40, a, k1);
		put16(huge + L->heap_page.total_slots, 60000);     /* more than a page holds */
		uint64_t bad[] = { pages[0], wild, huge, 0x7, pages[1], page(4, 40, b, k2) };
		heap_image(&vm, bad, 6);
		vm.objspace_addr = 0;
		CHECK(rbp_vm_read_heap(&vm, &h) == 0);
		CHECK_EQ_INT(h.pages, 3);
		CHECK_EQ_INT(h.bad_pages, 3);
		CHECK_EQ_INT(h.slots, 16);
		/* more bad pages than good: the array itself is suspect */
		uint64_t worse[] = { pages[0], wild, huge };
		heap_image(&vm, worse, 3);
		vm.objspace_addr = 0;
		CHECK(rbp_vm_read_heap(&vm, &h) == RBP_ECORRUPT);
	}
	TEST("garbage page arrays and objspace give errors") {
		uint64_t none[] = { 0 };
		uint64_t o = heap_image(&vm, none, 0);
		vm.objspace_addr = 0;
		/* no page at all: no running Ruby's objspace (the layout's offset
		 * names another field): refused as a layout that does not fit */
		CHECK_EQ_INT(rbp_vm_read_heap(&vm, &h), RBP_ELAYOUT);
		CHECK(strstr(vm.info.validation, "objspace") != NULL);
		put64(o + L->objspace.pages_sorted, L->darray.data >= 0 ? 0 : 0x10); /* NULL darray */
		if (L->objspace.pages_count >= 0)
			put64(o + L->objspace.pages_count, 1ull << 40);     /* absurd count */
		vm.objspace_addr = 0;
		CHECK_EQ_INT(rbp_vm_read_heap(&vm, &h), RBP_ELAYOUT);
		put64(vm.vm_addr + L->vm.objspace, 0);               /* no objspace */
		vm.objspace_addr = 0;
		CHECK(rbp_vm_read_heap(&vm, &h) != 0);
		CHECK(rbp_vm_gc_phase(&vm, &g) != 0 && g == RBP_GC_NONE);
		put64(vm.vm_addr + L->vm.objspace, 0x5000000000ull); /* unmapped */
		CHECK(rbp_vm_read_heap(&vm, &h) != 0);
	}
	TEST("type names") {
		CHECK_EQ_STR(rbp_heap_type_name(5), "T_STRING");
		CHECK_EQ_STR(rbp_heap_type_name(0x1a), "T_IMEMO");
		CHECK(rbp_heap_type_name(0x10) == NULL && rbp_heap_type_name(99) == NULL);
	}
	rbp_heap_free(&h);
	rbp_hmap_clear(&vm.class_paths);
	rbp_strpool_free(&vm.pool);
	rbp_reader_close(t.mem);
}

int main(void)
{
	census("3.1.2", 40);
	census("3.4.9", 80);
	return harness_report();
}
