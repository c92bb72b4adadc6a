/*
 * subject.c - the process or core file a command reads (see subject.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profile/subject.h"
#include "proc/native.h"
#include "proc/target.h"
#include "util/err.h"

int rbp_subject_open(struct rbp_subject *s, int pid, const char *core, const char *sysroot,
		     struct rbp_vm_opts *vo)
{
	int err = core ? rbp_target_open_core(core, sysroot, &s->t) : rbp_target_open_pid(pid, &s->t);

	return err ? err : rbp_vm_attach(s->t, vo, &s->vm);
}

int rbp_subject_open_process(struct rbp_subject *s, int pid)
{
	return rbp_target_open_pid(pid, &s->t);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Ruby is recognisable as soon as the dynamic loader has mapped libruby, a
 * few milliseconds after its exec; the wait restarts at each exec, so
 * wrappers that exec Ruby (env, rbenv shims, sh -c 'exec ruby') pass.
 * Half a second (RBP_SUBJECT_NOT_RUBY_NS) leaves room for a loaded machine.
 */
int rbp_subject_wait_ruby(struct rbp_subject *s, int pid, int starting, struct rbp_vm_opts *vo,
			  int (*should_stop)(void *ctx), int (*gone)(void *ctx), void *ctx)
{
	struct timespec pause = { 0, 5 * 1000 * 1000 };
	char exe[4096] = "", now[4096];
	uint64_t since = mono_ns();
	int err;

	for (;;) {
		if (!(err = rbp_subject_open(s, pid, NULL, NULL, vo)))
			return RBP_OK;
		rbp_subject_close(s);
		if (err == RBP_ENOTRUBY) {
			rbp_proc_exe(pid, now, sizeof(now));
			if (strcmp(now, exe)) {   /* it exec'd: wait afresh */
				snprintf(exe, sizeof(exe), "%s", now);
				since = mono_ns();
			}
		}
		/* a process starting up may have no Ruby frame to validate a layout with yet */
		int retry = err == RBP_ENOTREADY || err == RBP_ENOVM || err == RBP_ECORRUPT ||
			    err == RBP_EFAULT ||
			    ((err == RBP_ENOTRUBY || err == RBP_ELAYOUT) &&
			     mono_ns() - since < RBP_SUBJECT_NOT_RUBY_NS);
		if (!starting || !retry || (should_stop && should_stop(ctx)) || (gone && gone(ctx)))
			return gone && gone(ctx) ? RBP_ENOPROC : err;
		nanosleep(&pause, NULL);
	}
}

/* 1 when process pid started less than ns ago (0 when that cannot be read). */
static int younger_than(int pid, uint64_t ns)
{
	struct timespec boot;
	pid_t ppid;
	uint64_t start;
	long hz = sysconf(_SC_CLK_TCK);

	if (rbp_proc_parent(pid, &ppid, &start) || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot))
		return 0;
	uint64_t now = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec;
	uint64_t started = start * (1000000000ull / (uint64_t)hz);
	return now < started + ns;
}

/*
 * Not ready: the VM-open code says so (RBP_ENOTREADY), or the process is
 * not Ruby yet but started less than RBP_SUBJECT_NOT_RUBY_NS ago (it may
 * be an exec away from Ruby, or the loader may not have mapped libruby
 * yet; a program that is not Ruby is said so after that, without more).
 */
/*
 * A VM that Ruby is still setting up can also read as half made (its main
 * Ractor's thread count not sane yet): after a "not ready", or in a process
 * younger than the bound, a layout that does not fit yet is waited on too
 * (a wrong one is still refused, at the bound).
 */
static int not_ready(int err, int pid, int seen_not_ready)
{
	return err == RBP_ENOTREADY ||
	       (err == RBP_ENOTRUBY && younger_than(pid, RBP_SUBJECT_NOT_RUBY_NS)) ||
	       ((err == RBP_ELAYOUT || err == RBP_ECORRUPT) &&
		(seen_not_ready || younger_than(pid, RBP_SUBJECT_READY_NS)));
}

int rbp_subject_wait_ready(struct rbp_subject *s, int pid, struct rbp_vm_opts *vo, uint64_t bound_ns,
			   void (*waiting)(void *ctx), int (*should_stop)(void *ctx), void *ctx)
{
	struct timespec pause = { 0, 2 * 1000 * 1000 };
	uint64_t since = mono_ns();
	int err = rbp_subject_open(s, pid, NULL, NULL, vo), said = 0, seen = 0;

	while (not_ready(err, pid, seen |= (err == RBP_ENOTREADY)) && mono_ns() - since < bound_ns &&
	       !(should_stop && should_stop(ctx))) {
		if (err == RBP_ENOTREADY && !said++ && waiting)
			waiting(ctx);
		rbp_subject_close(s);
		nanosleep(&pause, NULL);
		err = rbp_subject_open(s, pid, NULL, NULL, vo);
	}
	return err;
}

int rbp_subject_native(struct rbp_subject *s)
{
	return rbp_native_open(s->t, &s->native);
}

int rbp_subject_native_available(void)
{
	return rbp_native_available();
}

void rbp_subject_native_stats(const struct rbp_subject *s, const struct rbp_procset *procs,
			      struct rbp_native_stats *out)
{
	rbp_native_stats(s->native, out);
	if (procs)
		rbp_procset_native_stats(procs, out);
}

void rbp_subject_close(struct rbp_subject *s)
{
	if (!s)
		return;
	rbp_native_close(s->native);
	rbp_vm_free(s->vm);
	rbp_target_close(s->t);
	memset(s, 0, sizeof(*s));
}

int rbp_subject_opened(const struct rbp_subject *s)
{
	return s->t != NULL;
}

int rbp_subject_read_stacks(struct rbp_subject *s, struct rbp_stacks *out)
{
	return rbp_vm_read_stacks(s->vm, out);
}

int rbp_subject_pid(const struct rbp_subject *s)
{
	return (int)s->t->pid;
}

int rbp_subject_is_core(const struct rbp_subject *s)
{
	return s->t->is_core;
}

int rbp_subject_snapshot(struct rbp_subject *s, int native, int nonblocking,
			 struct rbp_stacks *out, struct rbp_os_threads *ot)
{
	int err;

	memset(ot, 0, sizeof(*ot));
	if (!s->t->is_core)
		rbp_os_threads_read(s->t->pid, ot);
	if (native)
		return (err = s->native ? RBP_OK : rbp_subject_native(s)) ? err :
		       rbp_vm_read_stacks_native(s->vm, s->native, out);
	return rbp_vm_read_stacks_paused(s->vm, nonblocking ? RBP_PAUSE_NONE : RBP_PAUSE_ALL, out);
}

int rbp_subject_procset(struct rbp_subject *s, const struct rbp_vm_opts *vo,
			struct rbp_procset **out)
{
	return rbp_procset_new(s->t, s->vm, vo, out);
}

int rbp_member_snapshot(struct rbp_procset_member *m, int native, int nonblocking,
			struct rbp_stacks *out, struct rbp_os_threads *ot)
{
	/* borrowed: the unwinder stays the member's, whose frames name its symbols */
	struct rbp_subject sub = { .t = m->t, .vm = m->vm, .native = m->native };
	int err = rbp_subject_snapshot(&sub, native, nonblocking, out, ot);

	m->native = sub.native;   /* closed with the member (rbp_procset_free) */
	return err;
}

/* Whether pid descends from root (ppid chain through /proc/PID/stat). */
static int descends_from(int pid, int root)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		char path[64], buf[512];
		FILE *f;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "r")))
			return 0;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		char *rp = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
		if (!rp || sscanf(rp + 1, " %*c %d", &pid) != 1)
			return 0;
		if (pid == root)
			return 1;
	}
	return 0;
}

size_t rbp_descendants(int root, int *pids, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	while (d && n < max && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid > 0 && pid != root && descends_from(pid, root))
			pids[n++] = pid;
	}
	if (d)
		closedir(d);
	return n;
}

int rbp_ruby_descendant(int root, const struct rbp_vm_opts *vo, char *name, size_t n)
{
	struct rbp_vm_opts o = *vo;   /* the attach writes what it found */
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		struct rbp_subject s = { 0 };
		if (pid <= 0 || pid == root || !descends_from(pid, root) ||
		    rbp_subject_open_process(&s, pid))
			continue;
		int err = rbp_vm_attach(s.t, &o, &s.vm);
		if (err != RBP_ENOTRUBY && err != RBP_ENOPROC && err != RBP_EPERM) {
			found = pid;
			rbp_proc_exe(pid, name, n);
		}
		rbp_subject_close(&s);
	}
	if (d)
		closedir(d);
	return found;
}

char *rbp_process_cmdline(pid_t pid, char *buf, size_t n)
{
	return rbp_proc_cmdline(pid, buf, n);
}

char *rbp_process_exe(pid_t pid, char *buf, size_t n)
{
	return rbp_proc_exe(pid, buf, n);
}

void rbp_os_threads_read(pid_t pid, struct rbp_os_threads *ot)
{
	memset(ot, 0, sizeof(*ot));
	if (rbp_task_list(pid, &ot->tids, &ot->n))
		return;
	if (!(ot->info = calloc(ot->n + 1, sizeof(*ot->info)))) {
		ot->n = 0;
		return;
	}
	for (size_t i = 0; i < ot->n; i++) {
		struct rbp_task_info ti;
		if (!rbp_task_info(pid, ot->tids[i], &ti)) {
			ot->info[i].state = ti.state;
			memcpy(ot->info[i].comm, ti.comm, sizeof(ot->info[i].comm));
		}
	}
}

void rbp_os_threads_free(struct rbp_os_threads *ot)
{
	free(ot->tids);
	free(ot->info);
	memset(ot, 0, sizeof(*ot));
}
