/*
 * json.h - writing JSON strings.  Bytes that are not valid UTF-8 (paths
 * and labels are raw bytes from the target) become U+FFFD so the output is
 * always valid JSON.
 */
#ifndef RBP_UTIL_JSON_H
#define RBP_UTIL_JSON_H

#include <stdio.h>

/* Write s as a quoted JSON string; NULL writes null. */
void rbp_json_string(FILE *f, const char *s);

#endif
