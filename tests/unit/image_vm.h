/*
 * image_vm.h - a Ruby VM over a memory image of a real process (the
 * images in tests/unit/images, fuzz_walk's input format: "RBPW", the
 * version (32 bytes), the VM's address, the global symbol table's, the
 * PID, then segments of address (8), length (4) and bytes): the walker
 * reads it through the reader seam (rbp_reader_open_image) as it reads a
 * live process.  For test_labels and test_alloccount.
 */
#ifndef RBP_TEST_IMAGE_VM_H
#define RBP_TEST_IMAGE_VM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/target.h"
#include "ruby/internal.h"

#define IMAGES "tests/unit/images"
#define IMAGE_HEADER (4 + 32 + 8 + 8 + 4)
#define IMAGE_MAX_SEGS 4096

struct image_vm {
	struct rbp_image_segment segs[IMAGE_MAX_SEGS];
	struct rbp_target t;          /* t.mem reads the segments */
	struct rbp_vm *vm;            /* over t, with the version's layout */
	char version[33];
	const struct rbp_layout *layout;
};

static inline uint64_t image_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A whole file in a new buffer (*size its length); NULL when it cannot be read. */
static inline uint8_t *image_slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	*size = buf ? (size_t)n : 0;
	fclose(f);
	return buf;
}

/*
 * The VM of the image in data[0..size) (which must outlive iv): 0, or -1
 * when it does not load (iv->version is set as soon as the header is read,
 * iv->layout when the version has a table).  Free with image_vm_close().
 */
static inline int image_vm_open(struct image_vm *iv, const uint8_t *data, size_t size)
{
	size_t n = 0, at = IMAGE_HEADER;

	memset(iv, 0, sizeof(*iv));
	iv->t.is_core = 1;
	if (size < IMAGE_HEADER || memcmp(data, "RBPW", 4))
		return -1;
	memcpy(iv->version, data + 4, 32);
	while (at + 12 <= size && n < IMAGE_MAX_SEGS) {
		size_t len = (size_t)image_le(data + at + 8, 4);
		if (len > size - at - 12)
			return -1;
		iv->segs[n++] = (struct rbp_image_segment){ image_le(data + at, 8), data + at + 12, len };
		at += 12 + len;
	}
	iv->layout = rbp_layout_find(iv->version);
	if (!iv->layout || !(iv->vm = calloc(1, sizeof(*iv->vm))))
		return -1;
	if (rbp_reader_open_image(iv->segs, n, &iv->t.mem)) {
		free(iv->vm);
		iv->vm = NULL;
		return -1;
	}
	rbp_layout_use(&iv->vm->layout, iv->layout);
	iv->vm->L = &iv->vm->layout;
	iv->t.pid = iv->t.ns_pid = (pid_t)image_le(data + 52, 4);
	iv->vm->t = &iv->t;
	snprintf(iv->vm->version, sizeof(iv->vm->version), "%.31s", iv->version);
	iv->vm->vm_addr = image_le(data + 36, 8);
	iv->vm->symbols_addr = image_le(data + 44, 8);
	return 0;
}

static inline void image_vm_close(struct image_vm *iv)
{
	rbp_vm_free(iv->vm);
	iv->vm = NULL;
	rbp_reader_close(iv->t.mem);
	iv->t.mem = NULL;
}

#endif
