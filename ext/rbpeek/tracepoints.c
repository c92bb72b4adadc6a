/*
 * tracepoints.c - privilege, tracefs and the layout of the tracepoints the
 * kernel streams use (see tracepoints.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* syscall(), O_CLOEXEC; builds outside our Makefile too */
#endif
#include "tracepoints.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct rbk_tp tp_proto[NTP] = {
	[TP_ENTER]  = { "raw_syscalls/sys_enter", NULL, { "id", NULL }, 0, {{0, 0, 0}} },
	[TP_EXIT]   = { "raw_syscalls/sys_exit", NULL, { "ret", NULL }, 0, {{0, 0, 0}} },
	[TP_SWITCH] = { "sched/sched_switch", NULL, { "prev_pid", "prev_state" }, 0, {{0, 0, 0}} },
	/* sched_waking, not sched_wakeup: see open_wakeup (sched_waking is 4.3+) */
	[TP_WAKEUP] = { "sched/sched_waking", "sched/sched_wakeup", { "pid", "target_cpu" }, 0, {{0, 0, 0}} },
};

static const char *const tracefs_dirs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };


static int read_int_file(const char *path, long *v)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n <= 0) return n < 0 ? -e : -EINVAL;
	buf[n] = 0;
	char *end;
	*v = strtol(buf, &end, 10);
	return end == buf ? -EINVAL : 0;
}

static int has_cap(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) != 0) return 0;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

int rbk_check_privilege(char *why, size_t why_len, const char *refused)
{
	long par = 2;
	int have_par = read_int_file("/proc/sys/kernel/perf_event_paranoid", &par) == 0;
	if (!refused && (has_cap(CAP_PERFMON) || has_cap(CAP_SYS_ADMIN) || (have_par && par <= -1)))
		return 0;
	char parbuf[32] = "unreadable";
	if (have_par) snprintf(parbuf, sizeof(parbuf), "%ld", par);
	snprintf(why, why_len, "kernel streams (syscalls, thread states) need CAP_PERFMON or root "
	         "(CAP_BPF alone is not enough), or kernel.perf_event_paranoid=-1 (it is %s)%s%s",
	         parbuf, refused ? "; the kernel refused: " : "; this process has none",
	         refused ? refused : "");
	return -EACCES;
}

/* Find a tracefs with our events; mount it when none is and we may. */
static int find_tracefs(const char **dir, char *why, size_t why_len)
{
	char p[256];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(tracefs_dirs) / sizeof(*tracefs_dirs); i++) {
			snprintf(p, sizeof(p), "%s/events/raw_syscalls/sys_enter/id", tracefs_dirs[i]);
			if (access(p, F_OK) == 0) { *dir = tracefs_dirs[i]; return 0; }
			if (errno == EACCES) {
				snprintf(why, why_len, "kernel streams: cannot read tracefs (%s): %s; a non-root "
				         "user needs its group to: mount -o remount,gid=GROUP %s; chmod 750 %s",
				         tracefs_dirs[i], strerror(errno), tracefs_dirs[i], tracefs_dirs[i]);
				return -EACCES;
			}
		}
		if (pass == 0 && mount("nodev", tracefs_dirs[0], "tracefs", 0, NULL) != 0)
			break;
	}
	snprintf(why, why_len, "kernel streams: tracefs is not mounted (as root: mount -t tracefs "
	         "nodev /sys/kernel/tracing) or the kernel lacks raw_syscalls/sched tracepoints");
	return -ENOENT;
}

/* Parse "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;" lines. */
static int parse_format(const char *text, const char *name, struct rbk_field *f)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(text, "field:"); l; l = strstr(l + 1, "field:")) {
		const char *semi = strchr(l, ';');
		if (!semi) break;
		const char *e = semi;
		const char *br = memchr(l, '[', (size_t)(semi - l));
		if (br) e = br;                                  /* "char comm[16]" */
		if ((size_t)(e - l) < nl + 1 || memcmp(e - nl, name, nl) || (e[-(long)nl - 1] != ' '))
			continue;
		const char *o = strstr(semi, "offset:"), *s = strstr(semi, "size:"), *g = strstr(semi, "signed:");
		if (!o || !s || !g) return -EINVAL;
		f->off = atoi(o + 7);
		f->size = atoi(s + 5);
		f->sign = atoi(g + 7);
		return (f->size == 1 || f->size == 2 || f->size == 4 || f->size == 8) ? 0 : -EINVAL;
	}
	return -ENOENT;
}

static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return -errno;
	size_t got = 0;
	ssize_t n;
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0) got += (size_t)n;
	close(fd);
	buf[got] = 0;
	return 0;
}

int rbk_tp_load(struct rbk_tp tps[NTP], char *why, size_t why_len)
{
	const char *dir;
	int rc = find_tracefs(&dir, why, why_len);
	if (rc) return rc;
	char p[256], *text = malloc(8192);
	if (!text) return -ENOMEM;
	for (int i = 0; i < NTP; i++) {
		struct rbk_tp *tp = &tps[i];
		*tp = tp_proto[i];
		long id;
		snprintf(p, sizeof(p), "%s/events/%s/id", dir, tp->path);
		rc = read_int_file(p, &id);
		if (rc == -ENOENT && tp->alt) {
			tp->path = tp->alt;
			snprintf(p, sizeof(p), "%s/events/%s/id", dir, tp->path);
			rc = read_int_file(p, &id);
		}
		snprintf(p, sizeof(p), "%s/events/%s/format", dir, tp->path);
		if (!rc) rc = read_text(p, text, 8192);
		for (int k = 0; k < 2 && !rc; k++)
			if (tp->fname[k]) rc = parse_format(text, tp->fname[k], &tp->f[k]);
		if (rc) {
			snprintf(why, why_len, "kernel streams: tracepoint %s unusable (%s/events/%s: %s)%s",
			         tp->path, dir, tp->path, strerror(-rc), rc != -EACCES ? "" :
			         "; a non-root user needs tracefs readable by its group (mount -o remount,gid=GROUP)");
			break;
		}
		tp->id = (int)id;
	}
	free(text);
	return rc;
}
