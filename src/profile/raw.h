/*
 * raw.h - rbpeek's own profile file: everything a recording saw, so any
 * format can be written from it later (`rbpeek report`) with the same
 * numbers as recording straight to that format.  docs/raw-format.md
 * documents the encoding.
 */
#ifndef RBP_PROFILE_RAW_H
#define RBP_PROFILE_RAW_H

#include <stdio.h>

#include "profile/profile.h"

#define RBP_RAW_MAGIC "RBPEEKRAW"
/* Written: 2 (meta ends with on_cpu).  Read: 1 and 2. */
#define RBP_RAW_VERSION 2

/* Write p as a gzip-compressed raw file to out. */
int rbp_raw_write(const struct rbp_profile *p, FILE *out);
/*
 * Read a raw file into p (initialised by this call; free it with
 * rbp_profile_free() whatever the result).  RBP_EBADRAW for anything that
 * is not a complete, consistent raw file of a version we read (1 or 2).
 */
int rbp_raw_read(const char *path, struct rbp_profile *p);

#endif
