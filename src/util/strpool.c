#include "util/strpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An interned string: chained with others of the same hash. */
struct entry {
	struct entry *next;
	size_t len;
	char str[];
};

struct chunk {
	struct chunk *next;
	char data[];
};

#define CHUNK_SIZE (64 * 1024)

static uint64_t fnv1a(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}

/* Carve n bytes (8-aligned) from the pool's chunks. */
static void *pool_alloc(struct rbp_strpool *p, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	if (n > p->avail) {
		size_t size = n > CHUNK_SIZE ? n : CHUNK_SIZE;
		struct chunk *c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->next = p->chunks;
		p->chunks = c;
		p->cur = c->data;
		p->avail = size;
	}
	void *r = p->cur;
	p->cur += n;
	p->avail -= n;
	p->used += n;
	return r;
}

const char *rbp_strpool_intern(struct rbp_strpool *p, const char *s, size_t len)
{
	uint64_t h = fnv1a(s, len), head = 0;
	struct entry *e;

	if (rbp_hmap_get(&p->index, h, &head)) {
		for (e = (struct entry *)(uintptr_t)head; e; e = e->next)
			if (e->len == len && !memcmp(e->str, s, len))
				return e->str;
	}
	e = pool_alloc(p, sizeof(*e) + len + 1);
	if (!e)
		return NULL;
	e->next = (struct entry *)(uintptr_t)head;
	e->len = len;
	memcpy(e->str, s, len);
	e->str[len] = 0;
	if (rbp_hmap_put(&p->index, h, (uint64_t)(uintptr_t)e))
		return NULL;
	return e->str;
}

const char *rbp_strpool_intern0(struct rbp_strpool *p, const char *s)
{
	return rbp_strpool_intern(p, s, strlen(s));
}

void rbp_strpool_free(struct rbp_strpool *p)
{
	struct chunk *c = p->chunks;
	while (c) {
		struct chunk *next = c->next;
		free(c);
		c = next;
	}
	rbp_hmap_clear(&p->index);
	memset(p, 0, sizeof(*p));
}
