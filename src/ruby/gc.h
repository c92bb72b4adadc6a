/*
 * gc.h - the garbage collector of a Ruby target, read from outside:
 * whether it is running and in which phase (for GC frames in samples), and
 * a census of the object heap (`rbpeek heap`).
 *
 * Both read rb_objspace, the collector's private state (gc.c, from 3.4
 * gc/default/default.c), through the offsets tools/layout/probe_gc.c
 * generates for every version.  The VM points at it (rb_vm_t.objspace,
 * 3.4+ gc.objspace).  As everywhere in src/ruby, what is read is untrusted:
 * counts are bounded and pointers checked, garbage gives an error.  A
 * process running a collector loaded from a library (3.4+ modular GC,
 * librubygc.*.so) has another objspace: both give RBP_ENOSYM there.
 */
#ifndef RBP_RUBY_GC_H
#define RBP_RUBY_GC_H

#include <stddef.h>
#include <stdint.h>

#include "ruby/vm.h"

/* The collector's state at one moment. */
enum rbp_gc_phase {
	RBP_GC_NONE = 0,        /* not collecting (mutator running) */
	RBP_GC_RUNNING = 1,     /* collecting, phase unknown: "(GC)" */
	RBP_GC_MARKING = 2,     /* "(GC: marking)" */
	RBP_GC_SWEEPING = 3,    /* "(GC: sweeping)" */
	RBP_GC_COMPACTING = 4,  /* "(GC: compacting)" (3.2+) */
};

/*
 * The collector's phase now (one small read; the objspace address is
 * cached after the first).  RBP_GC_NONE between the incremental steps of
 * a marking or lazy-sweeping cycle: then Ruby code runs, not the GC.
 */
int rbp_vm_gc_phase(struct rbp_vm *vm, enum rbp_gc_phase *out);

/*
 * rb_objspace's address (validated once, then cached); RBP_ENOSYM for a
 * collector loaded from a library.
 */
int rbp_vm_objspace(struct rbp_vm *vm, uint64_t *out);

/*
 * For the in-kernel sampler: where its program copies rb_objspace's head
 * from at each tick (L->gc_addr, L->gc_len; both 0 when the collector's
 * flags are not known for this Ruby, or it is loaded from a library), and
 * the word naming the GVL's owner (L->gvl_addr: known once the thread list
 * has been read, else 0); and the phase such a copy
 * (RBP_FRAMECAP_GC_FLAGS bytes) says.
 */
void rbp_vm_framecap_gc(struct rbp_vm *vm, struct rbp_framecap_layout *L);
enum rbp_gc_phase rbp_vm_gc_phase_of(const struct rbp_vm *vm, const uint8_t *flags);

/* The frame label shown for a phase: "(GC: marking)"; NULL for RBP_GC_NONE. */
const char *rbp_gc_label(enum rbp_gc_phase phase);

/* ---- heap census ---------------------------------------------------- */

#define RBP_HEAP_TYPES 32        /* T_xxx values are 5 bits (RUBY_T_MASK) */
#define RBP_HEAP_MAX_POOLS 16    /* distinct slot sizes kept apart (4.1: 12) */

/* Objects of one class. */
struct rbp_heap_class {
	uint64_t klass;           /* the class in the target */
	const char *name;         /* "Foo::Bar"; "(anonymous)" when it has no path;
				   * interned in the vm's pool */
	uint64_t count;
};

/* Pages and slots of one slot size (Ruby 3.2+ has several size pools). */
struct rbp_heap_pool {
	uint32_t slot_size;       /* bytes per slot */
	uint64_t pages, slots, free_slots;
};

struct rbp_heap {
	uint64_t by_type[RBP_HEAP_TYPES]; /* live slots per T_xxx; [0] stays 0 */
	uint64_t pages, slots;    /* all heap pages, all their slots */
	uint64_t free_slots;      /* slots holding no object (flags 0), as
				   * ObjectSpace.count_objects' :FREE */
	uint64_t bytes;           /* bytes of slots read */
	struct rbp_heap_pool pools[RBP_HEAP_MAX_POOLS];
	size_t n_pools;           /* ascending slot size */
	struct rbp_heap_class *classes; /* by count, largest first */
	size_t n_classes, cap_classes;
	uint64_t classed;         /* objects counted in classes[] */
	uint64_t bad_pages;       /* pages skipped as unreadable or inconsistent */
	enum rbp_gc_phase gc;     /* collector state when the heap was read */
	uint64_t pause_ns;        /* how long the target was held stopped */
};

/*
 * Count every slot of every heap page.  The target is paused (ptrace, as
 * rbp_vm_read_stacks_paused) only while the pages are copied and counted;
 * class names are resolved after it runs again.  Signals that would stop
 * rbpeek are held meanwhile.  Core files are read as they are.  `out`
 * must be zeroed before the first call; free with rbp_heap_free().
 */
int rbp_vm_read_heap(struct rbp_vm *vm, struct rbp_heap *out);
void rbp_heap_free(struct rbp_heap *h);

/* "T_STRING" for a type number, NULL for numbers Ruby does not use. */
const char *rbp_heap_type_name(unsigned type);

#endif
