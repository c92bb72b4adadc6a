/*
 * text.c - control characters of target-supplied names written visibly
 * (see text.h).
 */
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

/*
 * The escape for the character at s into esc (at most 7 bytes + NUL), with
 * the bytes it stands for in *used; 0 when s[0] needs none.
 */
static size_t escape_at(const unsigned char *s, char *esc, size_t *used)
{
	static const char hex[] = "0123456789abcdef";
	unsigned c = s[0];

	*used = 1;
	if (c == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {   /* C1 control, UTF-8 */
		*used = 2;
		memcpy(esc, "\\u00", 4);
		esc[4] = hex[s[1] >> 4];
		esc[5] = hex[s[1] & 15];
		return 6;
	}
	if (c >= 0x20 && c != 0x7f)
		return 0;
	esc[0] = '\\';
	switch (c) {
	case 0x1b: esc[1] = 'e'; return 2;
	case '\r': esc[1] = 'r'; return 2;
	case '\n': esc[1] = 'n'; return 2;
	case '\t': esc[1] = 't'; return 2;
	default:
		esc[1] = 'x';
		esc[2] = hex[c >> 4];
		esc[3] = hex[c & 15];
		return 4;
	}
}

int rbp_text_clean(const char *s)
{
	char esc[8];
	size_t used;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (escape_at(p, esc, &used))
			return 0;
	return 1;
}

size_t rbp_text_escape(char *dst, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0, used, len;
	char esc[8];
	int full = cap == 0;

	while (*p) {
		if (!(len = escape_at(p, esc, &used))) {
			esc[0] = (char)*p;
			len = 1;
		}
		if (!full && n + len < cap)
			memcpy(dst + n, esc, len);
		else if (!full) {
			dst[n] = 0;
			full = 1;
		}
		n += len;
		p += used;
	}
	if (!full)
		dst[n] = 0;
	return n;
}

void rbp_text_put(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t used, len;
	char esc[8];

	while (*p) {
		const unsigned char *start = p;
		while (*p && !escape_at(p, esc, &used))
			p++;
		if (p > start)
			fwrite(start, 1, (size_t)(p - start), out);
		if (!*p)
			break;
		len = escape_at(p, esc, &used);
		fwrite(esc, 1, len, out);
		p += used;
	}
}

const char *rbp_text_safe(const char *s, char *dst, size_t cap)
{
	size_t need;
	char *m;

	if (rbp_text_clean(s))
		return s;
	if ((need = rbp_text_escape(dst, cap, s)) < cap)
		return dst;
	if (!(m = malloc(need + 1)))
		return NULL;
	rbp_text_escape(m, need + 1, s);
	return m;
}
