/*
 * test_tracefs.c - the copy of tracefs's event descriptions that `sudo
 * rbpeek trace` makes for the program it runs as the invoking user
 * (src/profile/tracefs.c): the raw_syscalls and sched events' id and format
 * files, the same bytes as tracefs's, root's and read-only to others (the
 * user reads it and may change nothing); removed without a trace.
 *
 * Needs root (tracefs is root's) and tracefs with
 * those events; else it prints "skip ...".
 */
#include "harness.h"
#include "profile/tracefs.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file's bytes (up to len - 1, NUL-terminated); 0 or -1. */
static int slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return 0;
}

/* The tracefs the copy reads (it mounts one when none is mounted). */
static const char *source(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char p[256];

	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/events/raw_syscalls/sys_enter/id", roots[i]);
		if (!access(p, R_OK))
			return roots[i];
	}
	return NULL;
}

int main(void)
{
	static const char *const files[] = {
		"raw_syscalls/sys_enter/id", "raw_syscalls/sys_enter/format", "raw_syscalls/sys_exit/format",
		"sched/sched_switch/id", "sched/sched_switch/format", "sched/sched_waking/format",
	};
	char *dir = NULL;
	int rc;

	if (geteuid()) {
		printf("skip tracefs copy: not root\n");
		return harness_report();
	}
	rc = rbp_tracefs_copy(&dir);
	if (rc == RBP_ENOFILE) {
		printf("skip tracefs copy: no tracefs with raw_syscalls and sched events here\n");
		return harness_report();
	}
	TEST("copy: the event descriptions, byte for byte, root's, read-only to others") {
		const char *src = source();
		char a[16384], b[16384], p[512], q[512];
		struct stat st;

		CHECK_EQ_INT(rc, RBP_OK);
		CHECK(dir != NULL && src != NULL);
		for (size_t i = 0; dir && src && i < sizeof(files) / sizeof(*files); i++) {
			snprintf(p, sizeof(p), "%s/events/%s", dir, files[i]);
			snprintf(q, sizeof(q), "%s/events/%s", src, files[i]);
			CHECK(!slurp(p, a, sizeof(a)) && !slurp(q, b, sizeof(b)));
			CHECK(a[0] != 0);
			CHECK_EQ_STR(a, b);
			CHECK(!lstat(p, &st) && S_ISREG(st.st_mode) && st.st_uid == 0 && (st.st_mode & 0777) == 0644);
			*strrchr(p, '/') = 0;   /* the event's directory */
			CHECK(!lstat(p, &st) && S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 0777) == 0755);
		}
		CHECK(dir && !lstat(dir, &st) && st.st_uid == 0 && (st.st_mode & 0777) == 0755);
	}
	TEST("remove: nothing left; NULL is fine") {
		char *copy = dir ? strdup(dir) : NULL;
		struct stat st;

		rbp_tracefs_remove(dir);
		CHECK(copy && stat(copy, &st) != 0);
		free(copy);
		rbp_tracefs_remove(NULL);
	}
	return harness_report();
}
