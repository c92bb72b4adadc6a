/*
 * strtab.h - the string table of a file being written (pprof's
 * string_table, the raw file's strings): each distinct string gets an index,
 * in order of first use.  Strings are compared by contents and not copied:
 * they must outlive the table (profile strings and literals do).
 */
#ifndef RBP_UTIL_STRTAB_H
#define RBP_UTIL_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#include "util/hmap.h"

struct rbp_strtab {
	struct rbp_hmap index;   /* hash of contents (probed) -> index */
	const char **v;          /* strings by index */
	size_t n, cap;
	int err;                 /* first error (RBP_ENOMEM), sticky */
};

/* Index of s, added when new; 0 with t->err set when out of memory. */
uint64_t rbp_strtab_id(struct rbp_strtab *t, const char *s);
void rbp_strtab_free(struct rbp_strtab *t);

#endif
