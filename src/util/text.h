/*
 * text.h - names read out of a target (thread names, method and class
 * names, paths, command lines) made safe for a terminal and for line-based
 * text formats.
 *
 * A Ruby program can name a thread or define a method "\e]52;c;...\a" or
 * "a\rb": written raw, the terminal showing `snapshot`, `top` or a summary
 * would obey the escape sequence, and a line-based format would get a
 * forged line.  Every control character is written visibly instead:
 * ESC as "\e", CR "\r", LF "\n", TAB "\t", the other C0 bytes and DEL as
 * "\xHH", and the C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F, which
 * some terminals obey) as "\u00HH".  Everything else, valid UTF-8 or not,
 * is left as it is; a backslash is not escaped (names holding "\e" as
 * text read the same: the output is for people, not for parsing back).
 */
#ifndef RBP_UTIL_TEXT_H
#define RBP_UTIL_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* 1 when s holds nothing rbp_text_escape would change. */
int rbp_text_clean(const char *s);
/*
 * s escaped into dst (NUL-terminated, cut at a whole escape when cap is
 * short; cap 0 writes nothing).  Returns the length the whole escaped text
 * needs, as snprintf does.
 */
size_t rbp_text_escape(char *dst, size_t cap, const char *s);
/* s escaped onto out. */
void rbp_text_put(FILE *out, const char *s);
/*
 * s escaped into a buffer of its own: dst when the escaped text fits in
 * cap bytes, else a malloc'd copy the caller frees when it is not dst;
 * s itself when nothing needs escaping; NULL for no memory.
 */
const char *rbp_text_safe(const char *s, char *dst, size_t cap);

#endif
