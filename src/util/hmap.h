/*
 * hmap.h - an open-addressing hash map from uint64_t keys to uint64_t
 * values.  It serves every cache keyed by a remote address (iseq -> info,
 * ID -> name, class -> path, (iseq,pc) -> line): keys are pointers or small
 * integers, lookups are hot, deletions never happen, so linear probing over
 * a power-of-two table with a multiplicative hash is enough.
 *
 * Key 0 is reserved as "empty" and cannot be stored (callers mix in a
 * non-zero tag when 0 is possible).  The map owns only its slot array.
 */
#ifndef RBP_UTIL_HMAP_H
#define RBP_UTIL_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct rbp_hmap {
	uint64_t *keys;   /* cap slots; 0 = empty */
	uint64_t *vals;
	size_t cap;       /* power of two, or 0 before the first insert */
	size_t len;
};

/* Zero-initialised struct rbp_hmap is an empty map. */
/* 1 and *val set when key is present, else 0. */
int rbp_hmap_get(const struct rbp_hmap *m, uint64_t key, uint64_t *val);
/* Insert or overwrite; RBP_ENOMEM on allocation failure, RBP_EINVAL for key 0. */
int rbp_hmap_put(struct rbp_hmap *m, uint64_t key, uint64_t val);
void rbp_hmap_clear(struct rbp_hmap *m);  /* frees memory, map is empty again */
void rbp_hmap_reset(struct rbp_hmap *m);  /* empty again, keeping its memory */

/* A good 64-bit mix for combining two keys (e.g. iseq and pc). */
static inline uint64_t rbp_mix64(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 29;
	return h ? h : 1;
}

#endif
