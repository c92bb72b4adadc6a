/*
 * probe_gc.c - print the garbage collector's part of one `struct
 * rbp_layout` initializer (src/ruby/layout.h): where rb_objspace keeps its
 * phase and its heap pages (the objspace, darray and heap_page groups), for
 * the Ruby tree it is compiled against.  Where rb_vm_t points at the
 * objspace is rb_vm_t's, printed by probe.c.
 *
 * rb_objspace_t, struct heap_page and enum gc_mode are private to gc.c
 * (gc/default/default.c from 3.4 on, which gc.c includes), so this probe
 * includes that .c file itself, after the tree's configured headers: the
 * compiler then sees exactly the definitions Ruby was built from, with no
 * copy of them anywhere.  gc.c's own functions come along but are never
 * called; tools/layout/gen links the probe with unresolved references left
 * unresolved (-no-pie, --unresolved-symbols=ignore-all), which is harmless
 * because main() below only evaluates offsetof/sizeof/enum constants.
 *
 * Built by tools/layout/gen:
 *   cc -no-pie -I<ruby>/.ext/include/<arch> -I<ruby>/include -I<ruby> \
 *      probe_gc.c -Wl,--unresolved-symbols=ignore-all && ./a.out
 */
#include "gc.c"
#include "ruby/version.h"
#include "probe.h"

/* gc.c abbreviates objspace->flags.during_gc as during_gc */
#undef during_gc

#if V(3, 4)
#define RBP_PAGES_DARRAY 1              /* heap_pages.sorted is an rb_darray */
#else
#define RBP_PAGES_DARRAY 0
#if defined(ENABLE_VM_OBJSPACE) && !ENABLE_VM_OBJSPACE
#error "this build keeps rb_objspace in a static variable, not in the VM"
#endif
#endif

/* The size of a heap_page field, checked against what rbpeek loads. */
#define SIZE_IS(type, field, n) \
	do { \
		if (sizeof(((type *)0)->field) != (n)) \
			printf("#error %s.%s is not %d bytes\n", #type, #field, (n)); \
	} while (0)

int main(void)
{
	static rb_objspace_t os;

	group("objspace");   /* rb_objspace_t: the collector's phase, the page list */
	memset(&os, 0, sizeof os);
	os.flags.mode = 3;
	bitfield("mode", (const unsigned char *)&os, sizeof os);
	memset(&os, 0, sizeof os);
	os.flags.during_gc = 1;
	bitfield("during_gc", (const unsigned char *)&os, sizeof os);
	num("mode_none", gc_mode_none);
	num("mode_marking", gc_mode_marking);
	num("mode_sweeping", gc_mode_sweeping);
#if V(3, 2)
	num("mode_compacting", gc_mode_compacting);
#else
	num("mode_compacting", 255); /* no compacting mode before 3.2 */
#endif
	OFF("pages_sorted", rb_objspace_t, heap_pages.sorted);
#if RBP_PAGES_DARRAY
	ABSENT("pages_count");
#else
	OFF("pages_count", rb_objspace_t, heap_pages.allocated_pages);
#endif
	end_group();

	group("darray");   /* rb_darray: heap_pages.sorted (3.4+) */
#if RBP_PAGES_DARRAY
	OFF("len", rb_darray_meta_t, size);
	num("data", (long long)offsetof(__typeof__(*os.heap_pages.sorted), data));
#else
	ABSENT("len");
	ABSENT("data");
#endif
	end_group();

	group("heap_page");   /* struct heap_page */
	OFF("start", struct heap_page, start);
	SIZE_IS(struct heap_page, start, 8);
	OFF("total_slots", struct heap_page, total_slots);
	SIZE_IS(struct heap_page, total_slots, 2);
	OFF("free_slots", struct heap_page, free_slots);
	SIZE_IS(struct heap_page, free_slots, 2);
#if V(3, 1)
	OFF("slot_size", struct heap_page, slot_size);
	SIZE_IS(struct heap_page, slot_size, 2);
#else
	ABSENT("slot_size");
#endif
#if V(4, 1)
	/* twelve pools of listed sizes (EACH_POOL_SLOT_SIZE): the smallest */
	num("slot_size_base", pool_slot_sizes[0]);
#elif V(3, 4)
	num("slot_size_base", BASE_SLOT_SIZE);
#else
	num("slot_size_base", sizeof(RVALUE));
#endif
	num("page_size", HEAP_PAGE_SIZE);
	end_group();
	return 0;
}
