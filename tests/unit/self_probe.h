/*
 * self_probe.h - for the unit tests that put uprobes on a function of their
 * own executable (test_uprobe, test_framecap): where that function is.
 */
#ifndef SELF_PROBE_H
#define SELF_PROBE_H

#include <stdint.h>
#include <unistd.h>

#include "proc/maps.h"
#include "proc/uprobe.h"

/*
 * The uprobe spec of fn, a function of this executable; exe (n bytes)
 * receives the executable's path, which spec points to.  0, or -1 when
 * /proc does not say.
 */
static inline int self_probe_spec(const void *fn, char *exe, size_t n, struct rbp_uprobe_spec *spec)
{
	struct rbp_maps maps = { 0 };
	const struct rbp_mapping *m;
	uint64_t addr = (uint64_t)(uintptr_t)fn;
	ssize_t len = readlink("/proc/self/exe", exe, n - 1);
	int rc = -1;

	if (len <= 0)
		return -1;
	exe[len] = 0;
	if (!rbp_maps_read_pid(getpid(), &maps) && (m = rbp_maps_find(&maps, addr))) {
		spec->path = exe;
		spec->offset = m->offset + (addr - m->start);
		rc = 0;
	}
	rbp_maps_free(&maps);
	return rc;
}

#endif
