/*
 * heap.c - a census of the object heap: every slot of every heap page,
 * counted by type and by class, as ObjectSpace.count_objects counts them.
 *
 * The collector keeps every page in one array sorted by address
 * (objspace->heap_pages.sorted: a plain array + count before 3.4, an
 * rb_darray from 3.4).  A page says where its slots start, how many it
 * has and (3.1+) how big each is; a slot whose flags word is 0 is free,
 * else flags & T_MASK is its type and the next word its class.
 *
 * Workload: up to millions of slots, read while the target is stopped.  So
 * the pause covers only what must be consistent: the page array, one bulk
 * read per page (16-64 KiB) and a counting pass over it (type array +
 * class -> count hash keyed by the class's address).  Naming classes costs
 * further reads per class; it happens after the target runs again, where
 * a class collected meanwhile just fails to be named.
 */
#include "ruby/gc.h"
#include "ruby/internal.h"
#include "proc/target.h"
#include "util/vec.h"

#include <stdlib.h>
#include <time.h>


/* Ruby's public type numbers (ruby/internal/value_type.h, unchanged since 2.0). */
static const char *const type_names[RBP_HEAP_TYPES] = {
	[0x00] = "T_NONE", [0x01] = "T_OBJECT", [0x02] = "T_CLASS", [0x03] = "T_MODULE",
	[0x04] = "T_FLOAT", [0x05] = "T_STRING", [0x06] = "T_REGEXP", [0x07] = "T_ARRAY",
	[0x08] = "T_HASH", [0x09] = "T_STRUCT", [0x0a] = "T_BIGNUM", [0x0b] = "T_FILE",
	[0x0c] = "T_DATA", [0x0d] = "T_MATCH", [0x0e] = "T_COMPLEX", [0x0f] = "T_RATIONAL",
	[0x11] = "T_NIL", [0x12] = "T_TRUE", [0x13] = "T_FALSE", [0x14] = "T_SYMBOL",
	[0x15] = "T_FIXNUM", [0x16] = "T_UNDEF", [0x1a] = "T_IMEMO", [0x1b] = "T_NODE",
	[0x1c] = "T_ICLASS", [0x1d] = "T_ZOMBIE", [0x1e] = "T_MOVED",
};

const char *rbp_heap_type_name(unsigned type)
{
	return type < RBP_HEAP_TYPES ? type_names[type] : NULL;
}

/* 1 for types whose class word names a class a user would recognise. */
static int classed_type(unsigned t)
{
	return t != 0x00 && t != 0x02 && t != 0x03 && t != 0x1a && t != 0x1b &&
	       t != 0x1c && t != 0x1d && t != 0x1e;
}

struct census {
	struct rbp_vm *vm;
	struct rbp_heap *h;
	struct rbp_hmap counts;   /* class address -> objects */
	uint64_t run_klass;       /* neighbouring slots often share a class: */
	uint64_t run_len;         /* objects of run_klass not yet in counts */
	uint8_t *body;            /* one page's slots */
	size_t body_cap;
};

static struct rbp_heap_pool *pool_for(struct rbp_heap *h, uint32_t slot_size)
{
	size_t i = 0;
	while (i < h->n_pools && h->pools[i].slot_size < slot_size)
		i++;
	if (i < h->n_pools && h->pools[i].slot_size == slot_size)
		return &h->pools[i];
	if (h->n_pools == RBP_HEAP_MAX_POOLS)
		return NULL;
	memmove(&h->pools[i + 1], &h->pools[i], (h->n_pools - i) * sizeof(h->pools[0]));
	h->n_pools++;
	memset(&h->pools[i], 0, sizeof(h->pools[i]));
	h->pools[i].slot_size = slot_size;
	return &h->pools[i];
}

/* Add the current run of same-class objects to the counts. */
static int flush_run(struct census *c)
{
	uint64_t n = 0;

	if (!c->run_len)
		return RBP_OK;
	rbp_hmap_get(&c->counts, c->run_klass, &n);
	c->run_len += n;
	int err = rbp_hmap_put(&c->counts, c->run_klass, c->run_len);
	c->run_len = 0;
	return err;
}

/* Count the slots of one page; a page that fails a check is skipped. */
static int count_page(struct census *c, uint64_t page)
{
	const struct rbp_layout *L = c->vm->L;
	uint8_t head[RV_HEAP_PAGE_HEAD];
	uint64_t word;
	int err;

	if (rv_read(c->vm, page, head, sizeof(head)))
		return RBP_ECORRUPT;
	uint64_t start = rv_u64(head, L->heap_page.start);
	uint16_t total, slot = L->heap_page.slot_size_base;
	memcpy(&total, head + L->heap_page.total_slots, 2);
	if (L->shape.slot_size == RBP_SLOT_SIZE_PER_PAGE)
		memcpy(&slot, head + L->heap_page.slot_size, 2);
	if (slot < L->heap_page.slot_size_base || slot % 8 || (start & 7) ||
	    (uint64_t)total * slot > L->heap_page.page_size)
		return RBP_ECORRUPT;
	size_t len = (size_t)total * slot;
	if ((err = rbp_grow(&c->body, &c->body_cap, len + 1, 1)))
		return err;
	if (len && rv_read(c->vm, start, c->body, len))
		return RBP_ECORRUPT;
	struct rbp_heap_pool *pool = pool_for(c->h, slot);
	if (!pool)
		return RBP_ECORRUPT;
	uint64_t free_slots = 0;
	for (size_t off = 0; off < len; off += slot) {
		memcpy(&word, c->body + off, 8);
		if (!word) {
			free_slots++;
			continue;
		}
		unsigned t = (unsigned)(word & L->value.t_mask);
		c->h->by_type[t]++;
		uint64_t klass;
		memcpy(&klass, c->body + off + 8, 8);
		if (!classed_type(t) || !rv_is_heap(c->vm, klass))
			continue;
		if (klass != c->run_klass && (err = flush_run(c)))
			return err;
		c->run_klass = klass;
		c->run_len++;
	}
	pool->pages++;
	pool->slots += total;
	pool->free_slots += free_slots;
	c->h->pages++;
	c->h->slots += total;
	c->h->free_slots += free_slots;
	c->h->bytes += len;
	return RBP_OK;
}

/* The page array: its address and length. */
static int page_array(struct rbp_vm *vm, uint64_t *pages, uint64_t *n)
{
	const struct rbp_layout *L = vm->L;
	uint64_t os, sorted;
	int err;

	if (L->shape.heap_pages == RBP_HEAP_PAGES_NONE)
		return RBP_ENOSYM;
	if ((err = rbp_vm_objspace(vm, &os)) ||
	    (err = rv_word(vm, os + (uint64_t)L->objspace.pages_sorted, &sorted)))
		return err;
	if (L->shape.heap_pages == RBP_HEAP_PAGES_DARRAY) {
		*pages = sorted + (uint64_t)L->darray.data;
		err = sorted ? rv_word(vm, sorted + (uint64_t)L->darray.len, n) : RBP_ECORRUPT;
	} else {
		*pages = sorted;
		err = rv_word(vm, os + (uint64_t)L->objspace.pages_count, n);
	}
	if (!err && (*n > RV_HEAP_MAX_PAGES || (*n && (!*pages || (*pages & 7)))))
		err = RBP_ECORRUPT;
	return err;
}


/* Everything that needs the target stopped: the pages and their slots. */
static int count_pages(struct census *c)
{
	uint64_t pages, n, chunk[512];
	int err;

	if ((err = rbp_vm_gc_phase(c->vm, &c->h->gc)) || (err = page_array(c->vm, &pages, &n)))
		return err;
	for (uint64_t i = 0; i < n; i += 512) {
		size_t k = n - i < 512 ? (size_t)(n - i) : 512;
		if ((err = rv_read(c->vm, pages + i * 8, chunk, k * 8)))
			return err;
		for (size_t j = 0; j < k; j++) {
			err = count_page(c, chunk[j]);
			if (err == RBP_ENOMEM)
				return err;
			c->h->bad_pages += err != RBP_OK;
		}
	}
	if ((err = flush_run(c)))
		return err;
	/* most pages unreadable: the page array itself is suspect */
	return c->h->bad_pages * 2 > n ? RBP_ECORRUPT : RBP_OK;
}

static int by_count_desc(const void *a, const void *b)
{
	const struct rbp_heap_class *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (x->klass > y->klass) - (x->klass < y->klass);
}

/* classes[] from the counts, named (the target may run again). */
static int name_classes(struct census *c)
{
	struct rbp_heap *h = c->h;
	int err;

	h->n_classes = 0;
	for (size_t i = 0; i < c->counts.cap; i++) {
		uint64_t klass = c->counts.keys[i], n = c->counts.vals[i];
		if (!klass)
			continue;
		if ((err = rbp_grow(&h->classes, &h->cap_classes, h->n_classes + 1,
				    sizeof(*h->classes))))
			return err;
		const char *name = "";
		rv_class_path(c->vm, klass, &name);
		h->classes[h->n_classes++] = (struct rbp_heap_class){
			.klass = klass, .name = name[0] ? name : "(anonymous)", .count = n };
		h->classed += n;
	}
	if (h->n_classes)
		qsort(h->classes, h->n_classes, sizeof(*h->classes), by_count_desc);
	return RBP_OK;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int rbp_vm_read_heap(struct rbp_vm *vm, struct rbp_heap *out)
{
	struct census c = { .vm = vm, .h = out };
	struct rbp_pause *pause = NULL;
	sigset_t old;
	int err;

	rbp_heap_free(out);
	uint64_t t0 = mono_ns();
	err = vm->t->is_core ? RBP_OK : rv_pause(vm, NULL, 0, &pause, &old);
	if (!err) {
		err = count_pages(&c);
		if (!vm->t->is_core)
			rv_resume(vm, pause, &old);
	}
	out->pause_ns = vm->t->is_core ? 0 : mono_ns() - t0;
	if (!err)
		err = name_classes(&c);
	rbp_hmap_clear(&c.counts);
	free(c.body);
	return err;
}

void rbp_heap_free(struct rbp_heap *h)
{
	free(h->classes);
	memset(h, 0, sizeof(*h));
}
