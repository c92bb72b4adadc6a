/*
 * strpool.h - interned strings with stable addresses.
 *
 * Labels and paths are read from the target once and then referred to by
 * every sample that contains them.  The pool stores each distinct string
 * once, in large chunks that never move, so a `const char *` from the pool
 * stays valid until rbp_strpool_free() and equal strings have equal
 * pointers (compare with ==).
 */
#ifndef RBP_UTIL_STRPOOL_H
#define RBP_UTIL_STRPOOL_H

#include <stddef.h>

#include "util/hmap.h"

struct rbp_strpool {
	struct rbp_hmap index;   /* FNV hash of bytes -> chain head (struct entry *) */
	void *chunks;            /* singly linked list of chunks */
	size_t used, avail;      /* in the current chunk */
	char *cur;
};

/*
 * The interned copy of s[0..len) (NUL-terminated), or NULL when out of
 * memory.  s need not be NUL-terminated and may contain any bytes but NUL.
 */
const char *rbp_strpool_intern(struct rbp_strpool *p, const char *s, size_t len);
const char *rbp_strpool_intern0(struct rbp_strpool *p, const char *s);
void rbp_strpool_free(struct rbp_strpool *p);

#endif
