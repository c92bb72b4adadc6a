/*
 * diff.c - `--diff BASE` of record and report: the new recording against a
 * raw file, as a differential flame graph, a table of the largest changes
 * (summary) or a pprof diff (profile/diff.h has the model).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "output/output.h"
#include "profile/diff.h"
#include "profile/raw.h"
#include "util/err.h"

int cli_diff_load(const char *cmd, const char *path, const struct rbp_format *fmt,
		  struct rbp_profile *base)
{
	int err;

	if (fmt->write != rbp_write_flamegraph && fmt->write != rbp_write_summary &&
	    fmt->write != rbp_write_pprof)
		return cli_usage_error(cmd, "--diff writes flamegraph, summary or pprof, not %s",
				       fmt->name);
	if ((err = rbp_raw_read(path, base))) {
		rbp_profile_free(base);
		fprintf(stderr, "rbpeek: error: --diff '%s': %s\n", path,
			err == RBP_EIO ? "cannot open it" : rbp_strerror(err));
		return EXIT_RAW;
	}
	rbp_profile_mark_idle_threads(base);
	return 0;
}

int cli_diff_write(const struct rbp_profile *base, const char *base_path,
		   const struct rbp_profile *cur, const struct rbp_format *fmt, const char *output,
		   const char *raw, int keep_idle, int silent)
{
	struct rbp_profile d;
	uint64_t n_new, n_base;
	char title[1024];
	const char *name = strrchr(base_path, '/');
	int rc;

	if (rbp_profile_diff(base, cur, keep_idle ? 0 : RBP_SAMPLE_IDLE, &d)) {
		rbp_profile_free(&d);
		fprintf(stderr, "rbpeek: error: out of memory\n");
		return EXIT_INTERNAL;
	}
	rbp_diff_totals(&d, &n_new, &n_base);
	if (!n_new || !n_base) {
		rbp_profile_free(&d);
		fprintf(stderr, "rbpeek: error: --diff: %s has no samples%s\n",
			n_new ? "BASE" : "the new recording", keep_idle ? "" : " (but idle ones: --idle)");
		return EXIT_NOSAMPLES;
	}
	snprintf(title, sizeof(title), "rbpeek diff: pid %d%s%s, %llu samples against %s (pid %d), "
		 "%llu samples", (int)cur->meta.pid, *cur->meta.cmdline ? " " : "", cur->meta.cmdline,
		 (unsigned long long)n_new, name ? name + 1 : base_path, (int)base->meta.pid,
		 (unsigned long long)n_base);
	rc = cli_write_outputs_diff(cur, &d, fmt, output, raw, silent, title);
	rbp_profile_free(&d);
	return rc;
}
