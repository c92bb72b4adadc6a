#include "util/json.h"

#include <stdint.h>

#include "util/utf8.h"

void rbp_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	if (!s) {
		fputs("null", f);
		return;
	}
	putc('"', f);
	while (*s) {
		uint32_t cp;
		int n = rbp_utf8_decode(s, &cp);
		if (n == 0) {
			fputs("\\ufffd", f);
			s++;
		} else if (n > 1) {
			fwrite(s, 1, (size_t)n, f);
			s += n;
		} else if (*s == '"' || *s == '\\') {
			putc('\\', f);
			putc(*s++, f);
		} else if (*s < 0x20) {
			fprintf(f, "\\u%04x", *s++);
		} else {
			putc(*s++, f);
		}
	}
	putc('"', f);
}
