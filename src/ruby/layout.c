/*
 * layout.c - pick the rbp_layout for a Ruby version string.
 * The tables themselves are generated (layouts.c, tools/layout/gen).
 */
#include "ruby/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "X.Y" or "X.Y.Z" (anything after Z, such as "preview1", is ignored).
 * Returns 0 on success; *patch is -1 when absent. */
static int parse_version(const char *s, long *major, long *minor, long *patch)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	*major = strtol(s, &end, 10);
	if (*end != '.' || end[1] < '0' || end[1] > '9')
		return -1;
	*minor = strtol(end + 1, &end, 10);
	*patch = -1;
	if (*end == '.' && end[1] >= '0' && end[1] <= '9')
		*patch = strtol(end + 1, &end, 10);
	if (*major > 255 || *minor > 255)
		return -1;
	return 0;
}

static long patch_of(const char *s)
{
	long ma, mi, pa;

	if (parse_version(s, &ma, &mi, &pa) != 0 || pa < 0)
		return 0;
	return pa;
}

const struct rbp_layout *rbp_layout_find(const char *version)
{
	long major, minor, patch;
	const struct rbp_layout *best_lower = NULL, *lowest = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	if (patch < 0)
		patch = 0;
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		if (l->major != major || l->minor != minor)
			continue;
		long first = patch_of(l->version);
		long last = l->last ? patch_of(l->last) : first;
		if (patch >= first && patch <= last)
			return l;
		if (first <= patch && (!best_lower || first > patch_of(best_lower->version)))
			best_lower = l;
		if (!lowest || first < patch_of(lowest->version))
			lowest = l;
	}
	/* Unknown patch release: the nearest lower one, else the oldest we know. */
	return best_lower ? best_lower : lowest;
}

static long version_key(long major, long minor, long patch)
{
	return (major * 1000 + minor) * 10000 + (patch < 0 ? 0 : patch);
}

const struct rbp_layout *rbp_layout_newest_below(const char *version)
{
	long major, minor, patch, want, best_k = -1;
	const struct rbp_layout *best = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	want = version_key(major, minor, patch);
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		long k = version_key(l->major, l->minor, patch_of(l->version));
		if (k <= want && k > best_k) {
			best_k = k;
			best = l;
		}
	}
	return best;
}

const char *rbp_layout_closest(const char *version)
{
	long major, minor, patch, best_d = -1;
	const struct rbp_layout *best = NULL;

	if (parse_version(version, &major, &minor, &patch) != 0)
		return NULL;
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		long d = labs((long)(l->major * 100 + l->minor) - (major * 100 + minor)) * 2;
		if ((long)(l->major * 100 + l->minor) > major * 100 + minor)
			d++;   /* prefer the older of two equally near versions */
		if (best_d < 0 || d < best_d) {
			best_d = d;
			best = l;
		}
	}
	return best ? (best->last ? best->last : best->version) : NULL;
}

const char *rbp_layout_supported(void)
{
	static char buf[512];
	size_t n = 0;

	buf[0] = '\0';
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		int dup = 0;
		for (const struct rbp_layout *p = rbp_layouts; p < l; p++)
			if (p->major == l->major && p->minor == l->minor)
				dup = 1;
		if (dup)
			continue;
		int w = snprintf(buf + n, sizeof buf - n, "%s%u.%u", n ? ", " : "",
				 (unsigned)l->major, (unsigned)l->minor);
		if (w < 0 || (size_t)w >= sizeof buf - n)
			break;
		n += (size_t)w;
	}
	return buf;
}
