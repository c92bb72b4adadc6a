/*
 * reader_image.c - a target made of in-memory segments (tests, fuzzers).
 * The segments are borrowed, not copied; a read may span segments that
 * touch, and fails with RBP_EFAULT when any byte falls in a gap.
 */
#include <stdlib.h>
#include <string.h>

#include "proc/reader.h"
#include "util/err.h"

struct image_reader {
	struct rbp_reader base;
	const struct rbp_image_segment *segs;  /* borrowed */
	size_t n;
};

/* The first segment containing addr, or NULL. */
static const struct rbp_image_segment *seg_at(const struct image_reader *r,
					      uint64_t addr)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct rbp_image_segment *s = &r->segs[i];

		if (addr >= s->addr && addr - s->addr < s->len)
			return s;
	}
	return NULL;
}

static int image_read(struct rbp_reader *base, uint64_t addr, void *buf,
		      size_t len)
{
	struct image_reader *r = (struct image_reader *)base;

	if (addr + len < addr)
		return RBP_EFAULT;
	while (len) {
		const struct rbp_image_segment *s = seg_at(r, addr);
		size_t skip, n;

		if (!s)
			return RBP_EFAULT;
		skip = (size_t)(addr - s->addr);
		n = s->len - skip < len ? s->len - skip : len;
		memcpy(buf, (const char *)s->data + skip, n);
		buf = (char *)buf + n;
		addr += n;
		len -= n;
	}
	return RBP_OK;
}

static void image_close(struct rbp_reader *base)
{
	free(base);
}

static const struct rbp_reader_ops image_ops = {
	.read = image_read,
	.close = image_close,
};

/* *out is owned by the caller; segs must outlive it. */
int rbp_reader_open_image(const struct rbp_image_segment *segs, size_t n,
			  struct rbp_reader **out)
{
	struct image_reader *r;

	*out = NULL;
	if (n && !segs)
		return RBP_EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return RBP_ENOMEM;
	r->base.ops = &image_ops;
	r->segs = segs;
	r->n = n;
	*out = &r->base;
	return RBP_OK;
}
