/*
 * watch.c - what the commands that watch a live process (record, top,
 * alloc) share besides signals (signals.c): the --duration, --rate and
 * --pid checks, the output check before sampling, the words for why sampling ended, rbpeek's
 * own CPU use for the closing statistics, and the help text with the list
 * of formats.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "output/output.h"
#include "profile/sampler.h"

int cli_parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || !(v > 0) || v > 1e7)
		return -1;
	*out = v;
	return 0;
}

int cli_duration_opt(const char *cmd, const char *arg, double *out)
{
	if (cli_parse_seconds(arg, out))
		return cli_usage_error(cmd, "invalid duration '%s' (seconds)", arg);
	return 0;
}

int cli_rate_opt(const char *cmd, const char *arg, const char *unit, unsigned *rate)
{
	if (!(*rate = cli_parse_rate(arg)))
		return cli_usage_error(cmd, "invalid rate '%s' (1 to 100000 %s)", arg, unit);
	return 0;
}

int cli_watch_opt(const char *cmd, int c, const char *arg, const char *unit, unsigned *rate,
		  double *duration)
{
	return c == 'r' ? cli_rate_opt(cmd, arg, unit, rate) : cli_duration_opt(cmd, arg, duration);
}

int cli_pid_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o,
		  const char *missing)
{
	if (optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	if (!o->pid)
		return cli_usage_error(cmd, "%s", missing);
	return 0;
}

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

void cli_print_usage(const char *usage)
{
	fputs(usage, stdout);
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		printf("  %-16s %s\n", f->name, f->desc);
}
