/*
 * watch.c - what the commands that watch a live process (record, top,
 * alloc) share besides signals (signals.c) and options (opts.c): the
 * output check before sampling, the words for why sampling ended, and
 * rbpeek's own CPU use for the closing statistics.
 */
#include <sys/resource.h>

#include "cli/cli.h"
#include "profile/sampler.h"

int cli_check_outputs(const char *output, const char *raw)
{
	int rc;

	if ((rc = cli_check_output(output)))
		return rc;
	return raw && *raw ? cli_check_output(raw) : 0;
}

const char *cli_stop_words(int stop)
{
	switch ((enum rbp_stop_reason)stop) {
	case RBP_STOP_REQUESTED: return "stopped";
	case RBP_STOP_DURATION: return "duration reached";
	case RBP_STOP_EXITED: return "process exited";
	case RBP_STOP_FAILING: return "gave up: most samples failed";
	default: return "stopped";
	}
}

int cli_own_usage(double *cpu_s, double *max_rss_mb)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return -1;
	*cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	*max_rss_mb = (double)ru.ru_maxrss / 1024.0;
	return 0;
}
