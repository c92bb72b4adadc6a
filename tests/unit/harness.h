/*
 * harness.h - a tiny unit-test harness (in the spirit of redis' testhelp.h).
 *
 *   TEST("name") { CHECK(x == 1); CHECK_EQ_INT(a, b); CHECK_EQ_STR(s, "x"); }
 *   int main(void) { ...; return harness_report(); }
 *
 * Each TEST block counts as one test: passed when none of its CHECKs fail.
 * harness_report() prints "unit: N passed, N failed" for the file and
 * returns the exit status (1 when anything failed).
 */
#ifndef RBP_TEST_HARNESS_H
#define RBP_TEST_HARNESS_H

#include <stdio.h>
#include <string.h>

static int harness_passed, harness_failed, harness_cur_failed;
static char harness_cur[256];   /* a copy: test names may be built in scoped buffers */

static inline void harness_end(void)
{
	if (*harness_cur) {
		if (harness_cur_failed) harness_failed++;
		else harness_passed++;
	}
	harness_cur_failed = 0;
}

static inline int harness_begin(const char *name)
{
	harness_end();
	snprintf(harness_cur, sizeof(harness_cur), "%s", name);
	return 1;
}

#define TEST(name) for (int harness_once_ = harness_begin(name); harness_once_; harness_once_ = 0)

#define CHECK(cond) do { if (!(cond)) { harness_cur_failed = 1; \
	fprintf(stderr, "FAIL %s: %s:%d: %s\n", harness_cur, __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_EQ_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ != b_) { harness_cur_failed = 1; fprintf(stderr, "FAIL %s: %s:%d: %s == %lld, expected %lld\n", \
	harness_cur, __FILE__, __LINE__, #a, a_, b_); } } while (0)

#define CHECK_EQ_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
	if (!a_ || !b_ || strcmp(a_, b_)) { harness_cur_failed = 1; fprintf(stderr, \
	"FAIL %s: %s:%d: %s == \"%s\", expected \"%s\"\n", harness_cur, __FILE__, __LINE__, #a, \
	a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } } while (0)

static inline int harness_report(void)
{
	harness_end();
	harness_cur[0] = 0;
	printf("unit: %d passed, %d failed\n", harness_passed, harness_failed);
	return harness_failed ? 1 : 0;
}

#endif
