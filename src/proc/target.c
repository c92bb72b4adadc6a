/*
 * target.c - a live process as a target.  (Core files are opened in
 * corefile.c; rbp_target_close serves both.  The /proc files it reads about
 * tasks and processes are procfs.c's.)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/target.h"
#include "util/err.h"
#include "util/vec.h"

/* *out owned by the caller (rbp_target_close). */
/*
 * The last number of the NSpid line of /proc/PID/task/TID/status: the id
 * in the innermost PID namespace; tid itself when there is no such line.
 */
static pid_t ns_last(pid_t pid, pid_t tid)
{
	char path[64], line[256];
	pid_t last = tid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (!(f = fopen(path, "r")))
		return tid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *p = line + 6, *end;
		for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
			last = (pid_t)v;
		break;
	}
	fclose(f);
	return last;
}

/* Rebuild t->ns_map from the NSpid lines of every task. */
static void load_ns_map(struct rbp_target *t)
{
	pid_t *tids = NULL;
	size_t n = 0;

	free(t->ns_map);
	t->ns_map = NULL;
	t->n_ns_map = 0;
	if (rbp_task_list(t->pid, &tids, &n) || !(t->ns_map = calloc(2 * n + 2, sizeof(pid_t)))) {
		free(tids);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		t->ns_map[2 * i] = tids[i];
		t->ns_map[2 * i + 1] = ns_last(t->pid, tids[i]);
	}
	t->n_ns_map = n;
	free(tids);
}

pid_t rbp_target_our_tid(struct rbp_target *t, pid_t ns_tid)
{
	if (t->is_core || t->ns_pid == t->pid || ns_tid <= 0)
		return ns_tid;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < t->n_ns_map; i++)
			if (t->ns_map[2 * i + 1] == ns_tid)
				return t->ns_map[2 * i];
		if (!pass)
			load_ns_map(t);   /* a thread created since the last look */
	}
	return 0;
}

int rbp_target_open_pid(pid_t pid, struct rbp_target **out)
{
	struct rbp_target *t;
	char path[32];
	struct stat st;
	int err;

	*out = NULL;
	if (pid <= 0)
		return RBP_EINVAL;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st))
		return rbp_proc_errno(errno);
	/* a zombie has exited: it has no memory left to read (but see rbp_live_task) */
	pid_t live = rbp_live_task(pid);
	if (!live)
		return RBP_ENOPROC;
	t = calloc(1, sizeof(*t));
	if (!t)
		return RBP_ENOMEM;
	t->pid = pid;
	t->ns_pid = ns_last(pid, pid);
	if (live == pid)
		snprintf(t->root, sizeof(t->root), "/proc/%d/root", (int)pid);
	else
		snprintf(t->root, sizeof(t->root), "/proc/%d/task/%d/root", (int)pid, (int)live);
	ssize_t k = readlink(t->root, t->root_dir, sizeof(t->root_dir) - 1);
	/* "/" (not chroot'ed), unreadable or too long: nothing to drop */
	t->root_dir[k > 1 && (size_t)k < sizeof(t->root_dir) - 1 ? k : 0] = '\0';
	err = rbp_maps_read_pid(pid, &t->maps);
	if (!err)
		err = rbp_reader_open_pid(pid, &t->mem);
	if (err) {
		rbp_target_close(t);
		return err;
	}
	*out = t;
	return RBP_OK;
}

/* Frees everything t owns, and t.  NULL-safe. */
void rbp_target_close(struct rbp_target *t)
{
	if (!t)
		return;
	free(t->ns_map);
	rbp_reader_close(t->mem);
	rbp_maps_free(&t->maps);
	free(t->core_tids);
	free(t);
}

int rbp_target_path(const struct rbp_target *t, const char *path, char *buf,
		    size_t n)
{
	size_t k = strlen(t->root_dir);

	if (k && !strncmp(path, t->root_dir, k) && path[k] == '/')
		path += k;
	int len = snprintf(buf, n, "%s%s", t->root, path);

	if (len < 0 || (size_t)len >= n)
		return RBP_EINVAL;
	return RBP_OK;
}
