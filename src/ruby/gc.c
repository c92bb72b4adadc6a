/*
 * gc.c - the collector's phase, read from rb_objspace's flags.
 *
 * Ruby sets objspace->flags.during_gc while the collector runs (gc_enter ..
 * gc_exit): a full collection, one step of incremental marking, or one
 * step of lazy sweeping; flags.mode says which phase the cycle is in.
 * Between steps mode stays "marking" or "sweeping" while Ruby code runs,
 * so only during_gc decides whether a sample is "in GC".  The thread doing
 * the work is the one holding the GVL (the collector never runs without
 * it); the walker marks that thread's stack (rv_gc_mark_threads).
 */
#include "ruby/gc.h"
#include "ruby/internal.h"

#include <stdio.h>

/*
 * 1 when the process runs a collector loaded from a library (3.4+ modular
 * GC, RUBY_GC_LIBRARY=name loads librubygc.name.so): its objspace is not
 * the default collector's, whose layout is all we know.
 */
static int modular_gc(const struct rbp_vm *vm)
{
	const struct rbp_maps *m = &vm->t->maps;

	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->v[i].path, *base = p ? strrchr(p, '/') : NULL;
		if (base && !strncmp(base + 1, "librubygc.", 10))
			return 1;
	}
	return 0;
}

int rv_objspace_check(struct rbp_vm *vm, uint64_t os)
{
	const struct rbp_layout *L = vm->L;
	uint64_t sorted, n, page, start;
	uint16_t total, slot = L->heap_page.slot_size_base;
	uint8_t head[RV_HEAP_PAGE_HEAD];

	if (L->shape.heap_pages == RBP_HEAP_PAGES_NONE)
		return RBP_OK;   /* nothing to check it with */
	if (rv_word(vm, os + (uint64_t)L->objspace.pages_sorted, &sorted) || !sorted || (sorted & 7))
		return RBP_ECORRUPT;
	if (L->shape.heap_pages == RBP_HEAP_PAGES_DARRAY) {
		if (rv_word(vm, sorted + (uint64_t)L->darray.len, &n) ||
		    rv_word(vm, sorted + (uint64_t)L->darray.data, &page))
			return RBP_ECORRUPT;
	} else if (rv_word(vm, os + (uint64_t)L->objspace.pages_count, &n) ||
		   rv_word(vm, sorted, &page)) {
		return RBP_ECORRUPT;
	}
	if (n == 0 || n > RV_HEAP_MAX_PAGES || !page || (page & 7) || rv_read(vm, page, head, sizeof(head)))
		return RBP_ECORRUPT;
	start = rv_u64(head, L->heap_page.start);
	memcpy(&total, head + L->heap_page.total_slots, 2);
	if (L->shape.slot_size == RBP_SLOT_SIZE_PER_PAGE)
		memcpy(&slot, head + L->heap_page.slot_size, 2);
	if (!start || (start & 7) || !total || slot < L->heap_page.slot_size_base || slot % 8 ||
	    (uint64_t)total * slot > L->heap_page.page_size)
		return RBP_ECORRUPT;
	return RBP_OK;
}

/* rb_objspace: read once from the VM, then cached (it never moves). */
static int objspace(struct rbp_vm *vm, uint64_t *out)
{
	const struct rbp_layout *L = vm->L;
	uint64_t os;
	int err;

	if (vm->objspace_addr) {
		*out = vm->objspace_addr;
		return RBP_OK;
	}
	if (L->shape.objspace != RBP_OBJSPACE_IN_VM || modular_gc(vm))
		return RBP_ENOSYM;
	if ((err = rv_word(vm, vm->vm_addr + (uint64_t)L->vm.objspace, &os)))
		return err;
	if (os & 7)
		return RBP_ECORRUPT;
	uint8_t probe[8];
	/*
	 * What the layout names as the objspace must read as one: a build
	 * whose rb_vm_t lost or moved it (Ruby's development line gives each
	 * Ractor its own) makes the table's offset name another field.  The
	 * heap is then refused by name, and no GC frame is guessed.
	 */
	if (!os || (err = rv_read(vm, os, probe, sizeof(probe))) ||
	    (err = rv_objspace_check(vm, os))) {
		if (err == RBP_ENOPROC || err == RBP_EPERM)
			return err;
		vm->info.validation = "the collector's objspace does not fit the layout "
				      "(rb_vm_t.objspace and its heap pages)";
		return RBP_ELAYOUT;
	}
	vm->objspace_addr = os;
	*out = os;
	return RBP_OK;
}

int rbp_vm_objspace(struct rbp_vm *vm, uint64_t *out)
{
	return objspace(vm, out);
}

void rv_check_objspace(struct rbp_vm *vm)
{
	static const char why[] = "rb_vm_t.objspace (what the layout names there is not an objspace)";
	const char *validation = vm->info.validation;
	uint64_t os;
	int err = RBP_OK;

	/* twice: a page array being reallocated can tear the first read */
	for (int attempt = 0; attempt < 2; attempt++)
		if ((err = objspace(vm, &os)) != RBP_ELAYOUT)
			break;
	vm->info.validation = validation;   /* the attach passed: it stays "" */
	if (err != RBP_ELAYOUT)
		return;
	for (int f = RBP_FEAT_GC; f <= RBP_FEAT_HEAP; f++) {
		vm->info.unavailable |= 1u << f;
		snprintf(vm->feat_missing[f], sizeof(vm->feat_missing[f]), "%s", why);
	}
}

/* Bytes of rb_objspace's head holding flags.mode and flags.during_gc; 0: unknown. */
static size_t flags_len(const struct rbp_layout *L)
{
	int16_t end = L->objspace.mode.off + L->objspace.mode.size;

	if (L->objspace.during_gc.off + L->objspace.during_gc.size > end)
		end = L->objspace.during_gc.off + L->objspace.during_gc.size;
	if (L->shape.gc_flags != RBP_GC_FLAGS_IN_OBJSPACE || end > RV_GC_FLAGS_MAX)
		return 0;
	return (size_t)end;
}

static enum rbp_gc_phase decode_phase(const struct rbp_layout *L, const uint8_t *flags)
{
	if (!rv_bitfield(flags, &L->objspace.during_gc))
		return RBP_GC_NONE;
	unsigned mode = (unsigned)rv_bitfield(flags, &L->objspace.mode);
	return mode == L->objspace.mode_marking ? RBP_GC_MARKING :
	       mode == L->objspace.mode_sweeping ? RBP_GC_SWEEPING :
	       mode == L->objspace.mode_compacting ? RBP_GC_COMPACTING : RBP_GC_RUNNING;
}

int rbp_vm_gc_phase(struct rbp_vm *vm, enum rbp_gc_phase *out)
{
	uint8_t flags[RV_GC_FLAGS_MAX];
	size_t len = flags_len(vm->L);
	uint64_t os;
	int err;

	*out = RBP_GC_NONE;
	if (!len)
		return RBP_ENOSYM;
	if ((err = objspace(vm, &os)) || (err = rv_read(vm, os, flags, len)))
		return err;
	*out = decode_phase(vm->L, flags);
	return RBP_OK;
}

int rv_gc_flags_req(struct rbp_vm *vm, struct rbp_read_req *req)
{
	size_t len = flags_len(vm->L);

	vm->gc_flags_read = 0;
	if (!len || !vm->objspace_addr)
		return 0;
	*req = (struct rbp_read_req){ vm->objspace_addr, vm->gc_flags, len, 0 };
	return 1;
}

void rbp_vm_framecap_gc(struct rbp_vm *vm, struct rbp_framecap_layout *L)
{
	uint64_t os;
	size_t len = flags_len(vm->L);

	L->gc_addr = 0;
	L->gc_len = 0;
	L->gvl_addr = vm->gvl_word;   /* known once the thread list was read (walk.c) */
	_Static_assert(RV_GC_FLAGS_MAX == RBP_FRAMECAP_GC_FLAGS, "the copy holds the flags");
	if (len && !objspace(vm, &os)) {
		L->gc_addr = os;
		L->gc_len = (uint32_t)len;
	}
}

enum rbp_gc_phase rbp_vm_gc_phase_of(const struct rbp_vm *vm, const uint8_t *flags)
{
	return flags_len(vm->L) ? decode_phase(vm->L, flags) : RBP_GC_NONE;
}

const char *rbp_gc_label(enum rbp_gc_phase phase)
{
	switch (phase) {
	case RBP_GC_NONE: return NULL;
	case RBP_GC_MARKING: return "(GC: marking)";
	case RBP_GC_SWEEPING: return "(GC: sweeping)";
	case RBP_GC_COMPACTING: return "(GC: compacting)";
	default: return "(GC)";
	}
}

/*
 * Mark the thread running the collector, if it runs: the GVL holder, else
 * (GVL owner not known, as on 2.5) the main thread.  A failed read of the
 * collector's state leaves every thread unmarked: a sample without its GC
 * frame is better than a failed sample.
 */
void rv_gc_mark_threads(struct rbp_vm *vm, struct rbp_stacks *s)
{
	enum rbp_gc_phase phase;
	struct rbp_thread *main_th = NULL;

	for (size_t i = 0; i < s->n_threads; i++)
		s->threads[i].gc = RBP_GC_NONE;
	int read = vm->gc_flags_read;

	vm->gc_flags_read = 0;
	if (read == 1)   /* read with the threads (rv_gc_flags_req) */
		phase = decode_phase(vm->L, vm->gc_flags);
	else if (read == 2 || rbp_vm_gc_phase(vm, &phase))
		return;
	if (!s->n_threads || phase == RBP_GC_NONE)
		return;
	for (size_t i = 0; i < s->n_threads; i++) {
		if (s->threads[i].has_gvl) {
			s->threads[i].gc = (uint8_t)phase;
			return;
		}
		if (s->threads[i].is_main)
			main_th = &s->threads[i];
	}
	if (main_th)
		main_th->gc = (uint8_t)phase;
}
