/*
 * When `record` blames late samples on its rate (rbp_sampler_late_cause).
 * The figures are those of real runs: 100 Hz on a busy 2-CPU host, where
 * 1-3 % of ticks came late with ~80 us ticks (lowering the rate would not
 * help, and the old "over 1 %" rule said it would on nearly every run);
 * 10 kHz on 100 deep threads, where reading a sample took most of the
 * period.
 */
#include "harness.h"
#include "profile/sampler.h"

static struct rbp_sampler_status st(uint64_t ticks, uint64_t late, uint64_t tick_us)
{
	struct rbp_sampler_status s = { 0 };

	s.ticks = ticks;
	s.late = late;
	s.tick_ns_sum = ticks * tick_us * 1000;
	return s;
}

int main(void)
{
	struct rbp_sampler_status s;

	TEST("busy host at 100 Hz, cheap ticks, 2.5 % late: no advice") {
		s = st(6000, 150, 80);
		CHECK(rbp_sampler_late_cause(&s, 100) == RBP_LATE_FEW);
	}
	TEST("busy host at 100 Hz, cheap ticks, 20 % late: the host, not the rate") {
		s = st(6000, 1200, 80);
		CHECK(rbp_sampler_late_cause(&s, 100) == RBP_LATE_HOST);
	}
	TEST("10 kHz with 60 us ticks (over a quarter of 100 us), 3 % late: the rate") {
		s = st(50000, 1500, 60);
		CHECK(rbp_sampler_late_cause(&s, 10000) == RBP_LATE_COST);
	}
	TEST("10 kHz with 60 us ticks but 0.5 % late: nothing to say") {
		s = st(50000, 250, 60);
		CHECK(rbp_sampler_late_cause(&s, 10000) == RBP_LATE_FEW);
	}
	TEST("no ticks, no rate: nothing to say") {
		s = st(0, 0, 0);
		CHECK(rbp_sampler_late_cause(&s, 100) == RBP_LATE_FEW);
		s = st(10, 10, 10);
		CHECK(rbp_sampler_late_cause(&s, 0) == RBP_LATE_FEW);
	}
	return harness_report();
}
