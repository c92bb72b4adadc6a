/*
 * mkseed_walk.c - write a seed for fuzz_walk from a live Ruby process:
 * attach, then read every thread's stack once through a reader that notes
 * each range read; the ranges (merged when close) are copied into an image
 * in fuzz_walk's input format.  The image holds exactly the memory a real
 * walk touches, so the fuzzer starts from a valid VM and mutates from there.
 *
 *   build/mkseed_walk PID OUTPUT
 */
#include <stdio.h>
#include <stdlib.h>

#include "proc/target.h"
#include "ruby/internal.h"
#include "util/vec.h"

#define GAP 64   /* ranges closer than this become one segment */

struct range {
	uint64_t lo, hi;
};

struct rec_reader {
	struct rbp_reader base;
	struct rbp_reader *inner;   /* not owned */
	struct range *v;
	size_t n, cap;
};

static int rec_read(struct rbp_reader *base, uint64_t addr, void *buf, size_t len)
{
	struct rec_reader *r = (struct rec_reader *)base;
	int err = rbp_read(r->inner, addr, buf, len);

	if (!err && len && !rbp_grow(&r->v, &r->cap, r->n + 1, sizeof(*r->v)))
		r->v[r->n++] = (struct range){ addr, addr + len };
	return err;
}

static void rec_close(struct rbp_reader *base) { (void)base; }

static const struct rbp_reader_ops rec_ops = { .read = rec_read, .close = rec_close };

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void put(FILE *f, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		fputc((int)(v >> (8 * i)) & 0xff, f);
}

/* Merge the ranges and write header and segments to f. */
static int write_image(struct rbp_vm *vm, struct rec_reader *r, FILE *f)
{
	char version[32] = { 0 };
	size_t m = 0;

	qsort(r->v, r->n, sizeof(*r->v), cmp_range);
	for (size_t i = 0; i < r->n; i++) {
		if (m && r->v[i].lo <= r->v[m - 1].hi + GAP) {
			if (r->v[i].hi > r->v[m - 1].hi)
				r->v[m - 1].hi = r->v[i].hi;
		} else {
			r->v[m++] = r->v[i];
		}
	}
	snprintf(version, sizeof(version), "%s", vm->version);
	fwrite("RBPW", 1, 4, f);
	fwrite(version, 1, sizeof(version), f);
	put(f, vm->vm_addr, 8);
	put(f, vm->symbols_addr, 8);
	put(f, (uint64_t)vm->t->ns_pid, 4);
	for (size_t i = 0; i < m; i++) {
		size_t len = (size_t)(r->v[i].hi - r->v[i].lo);
		uint8_t *buf = malloc(len);
		/* the gap may be unmapped: fall back to the pieces read */
		if (!buf || rbp_read(r->inner, r->v[i].lo, buf, len)) {
			fprintf(stderr, "mkseed_walk: cannot re-read %#llx+%zu\n",
				(unsigned long long)r->v[i].lo, len);
			free(buf);
			return 1;
		}
		put(f, r->v[i].lo, 8);
		put(f, len, 4);
		fwrite(buf, 1, len, f);
		free(buf);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct rbp_target *t;
	struct rbp_vm *vm;
	struct rbp_stacks st = { 0 };
	struct rec_reader rec = { .base.ops = &rec_ops };
	FILE *f;
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: mkseed_walk PID OUTPUT\n");
		return 2;
	}
	if ((err = rbp_target_open_pid(atoi(argv[1]), &t))) {
		fprintf(stderr, "mkseed_walk: %s\n", rbp_strerror(err));
		return 1;
	}
	/*
	 * Record from the attach on: its validation walks the stacks once
	 * (src/ruby/validate.c), and what it decoded is cached, so the walk
	 * below alone would not read it again.
	 */
	rec.inner = t->mem;
	t->mem = &rec.base;
	if ((err = rbp_vm_attach(t, NULL, &vm))) {
		t->mem = rec.inner;
		fprintf(stderr, "mkseed_walk: %s\n", rbp_strerror(err));
		return 1;
	}
	err = rbp_vm_read_stacks(vm, &st);
	t->mem = rec.inner;
	if (err || !(f = fopen(argv[2], "wb"))) {
		fprintf(stderr, "mkseed_walk: cannot read stacks or open %s\n", argv[2]);
		return 1;
	}
	err = write_image(vm, &rec, f);
	if (fclose(f))
		err = 1;
	fprintf(stderr, "mkseed_walk: %zu threads, %zu frames, %zu reads\n", st.n_threads,
		st.n_frames, rec.n);
	free(rec.v);
	rbp_stacks_free(&st);
	rbp_vm_free(vm);
	rbp_target_close(t);
	return err;
}
