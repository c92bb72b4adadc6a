/*
 * util/text.c: control characters of target-supplied names written visibly
 * (C0, DEL, C1 as UTF-8), everything else byte for byte, and the buffer
 * variants cut at a whole escape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/text.h"

int main(void)
{
	char buf[64];

	TEST("plain text, UTF-8 and invalid bytes pass unchanged") {
		const char *s = "Ünïcödé#grüß \xff\xfe (a.rb:1) \\e";
		CHECK(rbp_text_clean(s));
		CHECK_EQ_INT(rbp_text_escape(buf, sizeof(buf), s), strlen(s));
		CHECK_EQ_STR(buf, s);
		CHECK(rbp_text_safe(s, buf, sizeof(buf)) == s);
	}
	TEST("ESC, CR, LF, TAB, BEL, DEL, NUL-free C0 and C1 escaped") {
		const char *s = "a\x1b[31mb\rc\nd\te\af\x7fg\x01h\xc2\x9bi\xc2\xa0j";
		CHECK(!rbp_text_clean(s));
		size_t n = rbp_text_escape(buf, sizeof(buf), s);
		CHECK_EQ_STR(buf, "a\\e[31mb\\rc\\nd\\te\\x07f\\x7fg\\x01h\\u009bi\xc2\xa0j");
		CHECK_EQ_INT(n, strlen(buf));
	}
	TEST("a short buffer is cut at a whole escape, the length still the whole") {
		char small[6];
		CHECK_EQ_INT(rbp_text_escape(small, sizeof(small), "ab\x1b\x1b"), 6);
		CHECK_EQ_STR(small, "ab\\e");
		CHECK_EQ_INT(rbp_text_escape(small, sizeof(small), "abcd\x1b"), 6);
		CHECK_EQ_STR(small, "abcd");
		CHECK_EQ_INT(rbp_text_escape(NULL, 0, "\x1b"), 2);
	}
	TEST("rbp_text_safe: the buffer when it fits, else a copy of its own") {
		char small[4];
		const char *t = rbp_text_safe("\x1b", small, sizeof(small));
		CHECK(t == small);
		CHECK_EQ_STR(t, "\\e");
		t = rbp_text_safe("x\x1by\x1bz", small, sizeof(small));
		CHECK(t && t != small);
		CHECK_EQ_STR(t, "x\\ey\\ez");
		if (t != small)
			free((char *)t);
	}
	TEST("rbp_text_put writes what rbp_text_escape makes") {
		char *mem = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&mem, &len);
		rbp_text_put(f, "thr\x1b[32mG\r\nx\a\xc2\x85");
		fclose(f);
		CHECK_EQ_STR(mem, "thr\\e[32mG\\r\\nx\\x07\\u0085");
		free(mem);
	}
	return harness_report();
}
