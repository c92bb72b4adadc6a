/*
 * probe.h - printing helpers shared by probe.c and probe_gc.c (both built
 * and run by tools/layout/gen, never by the top-level Makefile).  Each
 * prints one designated initializer line of `struct rbp_layout`: a
 * top-level field, or one inside the group (a nested struct of the
 * layout, `.cfp = { ... },`) opened by group() and closed by end_group().
 * A group is opened once per entry, so all of its fields come together.
 */
#ifndef RBP_LAYOUT_PROBE_H
#define RBP_LAYOUT_PROBE_H

#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <stddef.h>

#define V(M, m) (RUBY_API_VERSION_MAJOR > (M) || \
		 (RUBY_API_VERSION_MAJOR == (M) && RUBY_API_VERSION_MINOR >= (m)))

static int in_group; /* 1 between group() and end_group() */

static void indent(void) { printf(in_group ? "\t\t\t" : "\t\t"); }
static void group(const char *name) { printf("\t\t.%s = {\n", name); in_group = 1; }
static void end_group(void) { printf("\t\t},\n"); in_group = 0; }
static void num(const char *name, long long v) { indent(); printf(".%s = %lld,\n", name, v); }
static void hex(const char *name, unsigned long long v) { indent(); printf(".%s = 0x%llx,\n", name, v); }
#define OFF(name, type, field) num(name, (long long)offsetof(type, field))
#define ABSENT(name) num(name, -1)

/* Locate a bitfield: `bytes` is a zeroed object in which only the field was
 * set to all ones. */
static void bitfield(const char *name, const unsigned char *bytes, size_t n)
{
	size_t first = n, last = 0;
	for (size_t i = 0; i < n; i++)
		if (bytes[i]) {
			if (first == n)
				first = i;
			last = i;
		}
	if (first == n) {
		fprintf(stderr, "probe: bitfield %s not found\n", name);
		printf("#error bitfield %s not found\n", name);
		return;
	}
	unsigned size = 1;
	while (first + size <= last)
		size *= 2;
	unsigned long long w = 0;
	memcpy(&w, bytes + first, size); /* little endian */
	unsigned shift = 0;
	while (!((w >> shift) & 1))
		shift++;
	unsigned long long mask = w >> shift;
	if (mask & (mask + 1)) {
		printf("#error bitfield %s is not contiguous\n", name);
		return;
	}
	indent();
	printf(".%s = { .off = %zu, .size = %u, .shift = %u, .mask = 0x%llx },\n",
	       name, first, size, shift, mask);
}

#endif
