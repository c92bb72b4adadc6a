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

static const struct {
	const char *name;
	uint64_t ticks, late, tick_us;
	uint32_t rate;
	enum rbp_late_cause want;
} cases[] = {
	{ "busy host at 100 Hz, cheap ticks, 2.5 % late: no advice", 6000, 150, 80, 100, RBP_LATE_FEW },
	{ "busy host at 100 Hz, cheap ticks, 20 % late: the host, not the rate", 6000, 1200, 80, 100,
	  RBP_LATE_HOST },
	{ "10 kHz with 60 us ticks (over a quarter of 100 us), 3 % late: the rate", 50000, 1500, 60,
	  10000, RBP_LATE_COST },
	{ "10 kHz with 60 us ticks but 0.5 % late: nothing to say", 50000, 250, 60, 10000, RBP_LATE_FEW },
	{ "no ticks: nothing to say", 0, 0, 0, 100, RBP_LATE_FEW },
	{ "no rate: nothing to say", 10, 10, 10, 0, RBP_LATE_FEW },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rbp_sampler_status s = st(cases[i].ticks, cases[i].late, cases[i].tick_us);
		TEST(cases[i].name) {
			CHECK(rbp_sampler_late_cause(&s, cases[i].rate) == cases[i].want);
		}
	}
	return harness_report();
}
