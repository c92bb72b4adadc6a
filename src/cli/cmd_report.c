/*
 * cmd_report.c - `rbpeek report -i RAW -f FORMAT [-o FILE]`: write any
 * format from a raw file, with the same numbers as recording straight to it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "output/output.h"
#include "profile/raw.h"
#include "util/err.h"

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
		{ "diff", required_argument, NULL, 'D' },
		CLI_OPTS_GRAPH,
		CLI_OPTS_OUTPUT,
		CLI_OPTS_IDLE,
		CLI_OPTS_END
	};
	const char *input = NULL, *format = NULL, *output = NULL, *diff = NULL;
	int c, err, rc, keep_idle = 0;
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
		if (c == 'D')
			diff = optarg;
		else if (c == CLI_OPT_GRAPH && cli_graph_opt("report", longopts[cp.index].name, optarg))
			return EXIT_USAGE;
		else if (c == CLI_OPT_GRAPH)
			continue;
		else
			input = optarg;   /* -i FILE */
	}
	if (cli_no_operands("report", argc, argv))
		return EXIT_USAGE;
	if (!input)
		return cli_usage_error("report", "give the raw file with -i FILE");
	if ((rc = cli_pick_format("report", format, output, &fmt)))
		return rc;
	if (diff && (rc = cli_diff_load("report", diff, fmt, &base)))
		return rc;
	if ((err = rbp_raw_read(input, &p))) {
		rbp_profile_free(&p);
		if (diff)
			rbp_profile_free(&base);
		fprintf(stderr, "rbpeek: error: '%s': %s\n", input,
			err == RBP_EIO ? "cannot open it" : rbp_strerror(err));
		return EXIT_RAW;
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
