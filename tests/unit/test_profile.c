/*
 * The profile's thread table (rbp_profile_thread): one entry per (pid,
 * tid), found by hash however many threads came and went, names updated,
 * and the corner keys (tid 0, negative ids from a hostile raw file).
 */
#include "harness.h"
#include "profile/profile.h"

int main(void)
{
	struct rbp_profile p;
	uint32_t idx, again;

	if (rbp_profile_init(&p))
		return 1;
	TEST("20,000 threads: each has its own index, found again") {
		int bad = 0;
		for (int32_t t = 1; t <= 20000; t++)
			bad += rbp_profile_thread(&p, 100 + t % 3, t, "w", &idx) || idx != (uint32_t)t - 1;
		for (int32_t t = 1; t <= 20000; t++)
			bad += rbp_profile_thread(&p, 100 + t % 3, t, NULL, &idx) || idx != (uint32_t)t - 1;
		CHECK(bad == 0);
		CHECK(p.n_threads == 20000);
	}
	TEST("same tid in another process is another thread") {
		CHECK(rbp_profile_thread(&p, 999, 5, "x", &idx) == 0);
		CHECK(idx == 20000);
		CHECK(p.threads[idx].pid == 999 && p.threads[idx].tid == 5);
	}
	TEST("a new name replaces the old; no name keeps it") {
		CHECK(rbp_profile_thread(&p, 999, 5, "renamed", &again) == 0 && again == idx);
		CHECK_EQ_STR(p.threads[idx].name, "renamed");
		CHECK(rbp_profile_thread(&p, 999, 5, "", &again) == 0 && again == idx);
		CHECK_EQ_STR(p.threads[idx].name, "renamed");
	}
	TEST("tid 0 and (-1, -1) are ordinary keys") {
		uint32_t a, b, c, d;
		CHECK(rbp_profile_thread(&p, 7, 0, "", &a) == 0);
		CHECK(rbp_profile_thread(&p, -1, -1, "", &b) == 0);
		CHECK(rbp_profile_thread(&p, 7, 0, "", &c) == 0 && c == a);
		CHECK(rbp_profile_thread(&p, -1, -1, "", &d) == 0 && d == b && a != b);
	}
	rbp_profile_free(&p);
	return harness_report();
}
