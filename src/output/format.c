/*
 * format.c - the table of output formats and helpers shared by writers.
 */
#include <stdio.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"

const struct rbp_format rbp_formats[] = {
	{ "collapsed", "txt", "folded stacks 'a;b;c count' (FlameGraph, inferno, speedscope)",
	  rbp_write_collapsed },
	{ "summary", "txt", "table of functions: % self, % total, file:line", rbp_write_summary },
	{ "summary-by-line", "txt", "the same table per line", rbp_write_summary_by_line },
	{ "raw", "raw.gz", "rbpeek's own raw profile (convert later with 'rbpeek report')",
	  rbp_write_raw },
	{ NULL, NULL, NULL, NULL },
};

const struct rbp_format *rbp_format_find(const char *name)
{
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		if (!strcmp(f->name, name))
			return f;
	return NULL;
}

const char *rbp_format_names(void)
{
	static char buf[512];
	size_t n = 0;

	buf[0] = 0;
	for (const struct rbp_format *f = rbp_formats; f->name; f++)
		n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, "%s%s",
				      f == rbp_formats ? "" : ", ", f->name);
	return buf;
}

int rbp_frame_name(const struct rbp_pframe *f, char *buf, size_t cap)
{
	int n;

	if (f->kind == RBP_PFRAME_THREAD || f->kind == RBP_PFRAME_PROCESS || !f->path[0])
		n = snprintf(buf, cap, "%s", f->label);
	else
		n = snprintf(buf, cap, "%s (%s:%d)", f->label, f->path, (int)f->line);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}
