/*
 * outfmt.c - which format -o FILE gets: the -f given, else the one the
 * file's ending stands for (prof.pb.gz is pprof), else the command's
 * default.  A -f that the ending contradicts, or an ending that fits
 * several formats (.json) without -f, is a usage error naming the choices:
 * a file whose name lies about its contents is worse than no file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "output/output.h"
#include "profile/profile.h"

/* Whether word is one of the space-separated words of list. */
static int has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return 1;
	return 0;
}

/* "a or b or c" (sep " or ") of a space-separated list, for messages. */
static const char *or_list(const char *list, const char *sep, char *buf, size_t cap)
{
	size_t j = 0, k = strlen(sep);

	for (const char *p = list; *p && j + k + 1 < cap; p++) {
		if (*p == ' ') {
			memcpy(buf + j, sep, k);
			j += k;
		} else {
			buf[j++] = *p;
		}
	}
	buf[j] = 0;
	return buf;
}

int cli_pick_name(const char *cmd, const char *given, const char *fits, const char *output,
		  const char **name)
{
	char choices[256];

	if (given && fits && !has_word(fits, given))
		return cli_usage_error(cmd, "-f %s does not match the name '%s' (a file for %s); "
				       "change one of them", given, output, or_list(fits, " or ", choices, sizeof(choices)));
	if (given || !fits) {
		*name = given;
		return 0;
	}
	if (strchr(fits, ' '))
		return cli_usage_error(cmd, "the name '%s' fits several formats: give -f %s", output,
				       or_list(fits, " or -f ", choices, sizeof(choices)));
	*name = fits;
	return 0;
}

int cli_perfetto_name(const char *output)
{
	static const char *const endings[] = { ".pftrace", ".perfetto", ".perfetto-trace" };
	size_t n = strlen(output);

	for (size_t i = 0; i < sizeof(endings) / sizeof(endings[0]); i++) {
		size_t k = strlen(endings[i]);
		if (n > k && !strcasecmp(output + n - k, endings[i]) && output[n - k - 1] != '/')
			return 1;
	}
	return 0;
}

int cli_check_trace_name(const char *output)
{
	const char *fits = rbp_format_by_name(output);
	char choices[256];

	if (!fits || has_word(fits, "chrome"))   /* .json, .trace.json: Chrome JSON, as trace's json */
		return 0;
	return cli_usage_error("trace", "the name '%s' is a profile's (%s, what 'rbpeek record' writes), "
			       "not a trace's: name it FILE.pftrace (perfetto) or FILE.json (json)", output,
			       or_list(fits, " or ", choices, sizeof(choices)));
}

int cli_pick_format(const char *cmd, const char *given, const char *output,
		    const struct rbp_format **fmt)
{
	const char *fits = output && strcmp(output, "-") ? rbp_format_by_name(output) : NULL;
	const char *name = NULL;
	int rc;

	if (given && !rbp_format_find(given))
		return cli_usage_error(cmd, "unknown format '%s' (valid: %s)", given, rbp_format_names());
	if (output && cli_perfetto_name(output)) {   /* a trace's name on a profile is a lie too */
		const struct rbp_format *f = rbp_format_find(given ? given : "flamegraph");
		return cli_usage_error(cmd, "the name '%s' is a trace's (what 'rbpeek trace' writes), "
				       "not a profile's: name it for its format, e.g. prof.%s", output, f->ext);
	}
	if ((rc = cli_pick_name(cmd, given, fits, output, &name)))
		return rc;
	*fmt = rbp_format_find(name ? name : "flamegraph");
	return 0;
}

int cli_check_output(const char *output)
{
	if (output && strcmp(output, "-") && cli_check_writable(output)) {
		fprintf(stderr, "rbpeek: error: cannot write '%s': %s\n", output, strerror(errno));
		return EXIT_OUTPUT;
	}
	if (!output && cli_check_writable("./x")) {
		fprintf(stderr, "rbpeek: error: cannot write to the current directory: %s\n"
			"hint: choose a file with -o\n", strerror(errno));
		return EXIT_OUTPUT;
	}
	return 0;
}
