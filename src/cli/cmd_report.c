/*
 * cmd_report.c - `rbpeek report -i RAW -f FORMAT [-o FILE]`: write any
 * format from a raw file, with the same numbers as recording straight to it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "output/output.h"
#include "profile/raw.h"
#include "util/err.h"

/* The default bound of report's output: the raw file's size times this, plus the slack. */
#define REPORT_MAX_RATIO 1024
#define REPORT_MAX_SLACK (64ull << 20)

/* "123", "64K", "2G" (powers of 1024) into *out: 0, or -1 when it is not a size. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long n;
	int shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	n = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end || n == 0 || n > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)n << shift;
	return 0;
}

/* "1.5 GB" */
static const char *human(uint64_t n, char *buf, size_t cap)
{
	static const char units[] = "BKMGTP";
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %cB" : "%.0f %c", v, units[u]);
	return buf;
}

/* n rounded up to a --max-output value: "196M", "13G". */
static const char *size_arg(uint64_t n, char *buf, size_t cap)
{
	if (n < (1ull << 30))
		snprintf(buf, cap, "%lluM", (unsigned long long)((n + (1 << 20) - 1) >> 20));
	else
		snprintf(buf, cap, "%lluG", (unsigned long long)((n + (1ull << 30) - 1) >> 30));
	return buf;
}

/*
 * Whether fmt's output for p stays under the bound: 0, else the error
 * printed and EXIT_TOOBIG (EXIT_INTERNAL without memory).  Over the bound
 * the estimate goes on to 64 times it, to say how much was asked.
 */
static int check_output_size(const struct rbp_profile *p, const struct rbp_format *fmt,
			     const char *input, uint64_t max, int given)
{
	uint64_t est, far = max > UINT64_MAX / 64 ? UINT64_MAX : max * 64;
	char a[32], b[32], c[32];

	if (rbp_output_estimate(p, fmt, max, &est) ||
	    (est > max && rbp_output_estimate(p, fmt, far, &est))) {
		fprintf(stderr, "rbpeek: error: out of memory\n");
		return EXIT_INTERNAL;
	}
	if (est <= max)
		return 0;
	fprintf(stderr, "rbpeek: error: '%s': its %s output would be %s %s, over %s%s "
		"(its stacks are deep or wide, or its names long, far beyond its size)\n", input,
		fmt->name, est > far ? "over" : "about", human(est, a, sizeof(a)),
		human(max, b, sizeof(b)), given ? " (--max-output)" : ", the bound for a raw file of its size");
	if (est <= far)
		fprintf(stderr, "hint: if you trust the file, raise the bound: --max-output %s\n",
			size_arg(est, c, sizeof(c)));
	else
		fprintf(stderr, "hint: if you trust the file, raise the bound with --max-output SIZE\n");
	return EXIT_TOOBIG;
}

static const char report_usage[] =
	"usage: rbpeek report -i RAWFILE [-f FORMAT] [-o FILE]\n"
	"       rbpeek report --diff BASE -i NEW [-f flamegraph|summary|pprof] [-o FILE]\n"
	"\n"
	"Convert a raw profile (written by every 'rbpeek record') to another format.\n"
	"\n"
	"  -i, --input FILE    the raw file\n"
	"  -f, --format NAME   output format (default: the one -o FILE's name ends in,\n"
	"                      .svg .pb.gz .speedscope.json ..., else flamegraph)\n"
	"  -o, --output FILE   where to write (default: the input name with the format's\n"
	"                      extension in the current directory; - for stdout)\n"
	"      --idle          keep the samples of threads waiting for work (as record\n"
	"                      --idle; by default they are left out, as by record)\n"
	"      --no-idle       the default\n"
	"      --max-output SIZE\n"
	"                      refuse (exit 12) when the output would be larger (bytes,\n"
	"                      or with K, M, G; default 1024 times the raw file's size\n"
	"                      plus 64M: a small raw file of deep, wide stacks can ask\n"
	"                      for many GB)\n"
	"      --diff BASE     how -i NEW differs from the raw file BASE (a recording of the\n"
	"                      same program): a differential flame graph on NEW's shape\n"
	"                      (red: a frame's share of samples grew, blue: it shrank),\n"
	"                      -f summary's table of the largest changes, or a pprof diff\n"
	"                      (as go tool pprof -normalize -diff_base BASE NEW)\n"
	"      --node-fraction F  -f callgraph/dot: leave out functions under this\n"
	"                      fraction of the samples (default 0.005; 0 keeps all)\n"
	"      --edge-fraction F  ... and calls under this fraction (default 0.001)\n"
	"      --node-count N  ... and all but the N largest functions (default 80)\n"
	"  -h, --help          show this help\n"
	"\n"
	"formats:\n";

/* "rbpeek-12-2026.raw.gz" -> "rbpeek-12-2026.svg" in the current directory. */
static void default_output(char *buf, size_t n, const char *input, const char *ext)
{
	const char *base = strrchr(input, '/');
	base = base ? base + 1 : input;
	size_t len = strlen(base);
	static const char *const suffixes[] = { ".raw.gz", ".gz", ".raw" };
	for (size_t i = 0; i < 3; i++) {
		size_t sl = strlen(suffixes[i]);
		if (len > sl && !strcmp(base + len - sl, suffixes[i])) {
			len -= sl;
			break;
		}
	}
	snprintf(buf, n, "%.*s.%s", (int)len, base, ext);
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "max-output", required_argument, NULL, 'M' },
		{ "diff", required_argument, NULL, 'D' },
		CLI_OPTS_GRAPH,
		CLI_OPTS_OUTPUT,
		CLI_OPTS_IDLE,
		CLI_OPTS_END
	};
	const char *input = NULL, *format = NULL, *output = NULL, *diff = NULL;
	int c, err, rc, keep_idle = 0, max_given = 0;
	uint64_t max_output = 0;
	struct stat st;
	struct cli_parser cp = { .cmd = "report", .usage = report_usage, .formats = 1,
		.shortopts = ":i:f:o:h", .longopts = longopts, .output = &output, .format = &format,
		.idle = &keep_idle };
	const struct rbp_format *fmt;
	struct rbp_profile p, base;
	char outbuf[4096], title[512];
	size_t idle;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		if (c == CLI_OPT_ERROR)
			return EXIT_USAGE;
		if (c == 'M') {
			if (parse_size(optarg, &max_output))
				return cli_usage_error("report", "--max-output wants a size in bytes "
						       "(K, M, G allowed), not '%s'", optarg);
			max_given = 1;
		} else if (c == 'D') {
			diff = optarg;
		} else if (c == CLI_OPT_GRAPH) {
			if (cli_graph_opt("report", longopts[cp.index].name, optarg))
				return EXIT_USAGE;
		} else {
			input = optarg;   /* -i FILE */
		}
	}
	if (cli_no_operands("report", argc, argv))
		return EXIT_USAGE;
	if (!input)
		return cli_usage_error("report", "give the raw file with -i FILE");
	if ((rc = cli_pick_format("report", format, output, &fmt)))
		return rc;
	/* report needs no privilege: under sudo the input is read as the user */
	if ((rc = cli_drop_to_invoker("report")))
		return rc;
	if (diff && (rc = cli_diff_load("report", diff, fmt, &base)))
		return rc;
	if ((err = rbp_raw_read(input, &p))) {
		rbp_profile_free(&p);
		if (diff)
			rbp_profile_free(&base);
		/* the reason (permission: under sudo the input is read as the user) */
		const char *why = err == RBP_EIO && access(input, R_OK) ? strerror(errno) : NULL;

		fprintf(stderr, "rbpeek: error: '%s': %s%s%s\n", input,
			err == RBP_EIO ? "cannot open it" : rbp_strerror(err), why ? ": " : "", why ? why : "");
		return EXIT_RAW;
	}
	if (!max_given)   /* the file was read: it is there */
		max_output = (stat(input, &st) ? 0 : (uint64_t)st.st_size) * REPORT_MAX_RATIO +
			REPORT_MAX_SLACK;
	if ((rc = check_output_size(&p, fmt, input, max_output, max_given))) {
		rbp_profile_free(&p);
		if (diff)
			rbp_profile_free(&base);
		return rc;
	}
	if (!output) {
		default_output(outbuf, sizeof(outbuf), input, fmt->ext);
		output = outbuf;
	}
	idle = rbp_profile_mark_idle_threads(&p);
	if (diff) {
		rc = cli_diff_write(&base, diff, &p, fmt, output, "", keep_idle, 1);
		rbp_profile_free(&base);
		rbp_profile_free(&p);
		return rc;
	}
	if (idle == p.n_samples)
		keep_idle = 1;   /* nothing but waiting: show it (as record does) */
	cli_profile_title(&p, idle, keep_idle, title, sizeof(title));
	/* no raw copy ("") and silent: "wrote FORMAT to FILE" unless stdout */
	rc = cli_write_outputs(&p, fmt, output, "", keep_idle ? 0 : RBP_SAMPLE_IDLE, 1, title);
	rbp_profile_free(&p);
	return rc;
}
