/*
 * tracepoints.h - the kernel tracepoints behind the tracer's kernel streams
 * (ktrace.c): whether this process may sample them, where tracefs is, and
 * each tracepoint's id and payload layout, read from its `format` file at
 * open time and never hard-coded (see ktrace.h for the design).
 *
 * Plain C11 + Linux headers, no Ruby headers.
 */
#ifndef RBK_TRACEPOINTS_H
#define RBK_TRACEPOINTS_H

#include <stddef.h>

enum { TP_ENTER, TP_EXIT, TP_SWITCH, TP_WAKEUP, NTP };

/* Where a payload field lives, from the tracepoint's format file. */
struct rbk_field {
	int off;     /* byte offset in the raw record */
	int size;    /* 1, 2, 4 or 8 */
	int sign;    /* signed:1 */
};

struct rbk_tp {
	const char *path;          /* under events/ in tracefs */
	const char *alt;           /* used when path is missing (NULL: none) */
	const char *fname[2];      /* the payload fields we read */
	int id;                    /* tracepoint id == common_type */
	struct rbk_field f[2];
};

/*
 * 0 when the kernel will let this process sample tracepoints, else -EACCES
 * and a one-line reason in why.  refused (or NULL): the kernel's refusal
 * already met (e.g. "perf_event_open: Permission denied"), quoted in why.
 */
int rbk_check_privilege(char *why, size_t why_len, const char *refused);

/*
 * Fill tp[TP_*] from tracefs: /sys/kernel/tracing or
 * /sys/kernel/debug/tracing, mounting the first when neither is mounted and
 * the process may.  0, or -errno and why.  (Under `sudo rbpeek trace` the
 * program reads no tracefs: rbpeek, as root, reads it and the streams for
 * it; ktrace.h, remote handles.)
 */
int rbk_tp_load(struct rbk_tp tp[NTP], char *why, size_t why_len);

#endif
