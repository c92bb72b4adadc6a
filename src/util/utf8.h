/*
 * utf8.h - validating UTF-8 decoding, for writers that must emit valid
 * text (JSON, XML) from raw bytes read out of a target.
 */
#ifndef RBP_UTIL_UTF8_H
#define RBP_UTIL_UTF8_H

#include <stdint.h>

/*
 * Length (1 to 4) of the valid UTF-8 sequence at s, with its code point in
 * *cp; 0 when the bytes there are not valid UTF-8 (overlong forms,
 * surrogates and code points above U+10FFFF included).  s must be
 * NUL-terminated: a truncated sequence meets the NUL and is invalid.
 */
int rbp_utf8_decode(const unsigned char *s, uint32_t *cp);

#endif
