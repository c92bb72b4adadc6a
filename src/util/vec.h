/*
 * vec.h - growing a malloc'd array.  Every growable array in rbpeek is a
 * (pointer, count, capacity) triple; rbp_grow() makes room and the caller
 * appends.
 */
#ifndef RBP_UTIL_VEC_H
#define RBP_UTIL_VEC_H

#include <stddef.h>

/*
 * Make *v (of *cap elements of elem bytes) hold at least need elements,
 * doubling from 16; *v and *cap change only on success.  RBP_ENOMEM on
 * failure (also on size overflow), the array untouched.
 */
int rbp_grow(void *v, size_t *cap, size_t need, size_t elem);

#endif
