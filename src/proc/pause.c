/*
 * pause.c - stop every thread of a live process, and let it go again.
 *
 * PTRACE_SEIZE attaches without sending SIGSTOP, and PTRACE_INTERRUPT
 * then traps the thread in a PTRACE_EVENT_STOP that waitpid(__WALL)
 * reports.  Threads are stopped in rounds: list /proc/PID/task, seize and
 * interrupt every thread not yet held, wait until each is stopped, then
 * list again.  A stopped thread cannot create threads, so a listing taken
 * while every held thread is stopped that shows no new thread is final.
 *
 * A thread that was about to take a signal may report a signal-delivery
 * stop instead of the event stop; it is just as stopped, and the signal is
 * handed back at detach so the target never loses one.  Should the tracer
 * die, the kernel detaches its tracees and (with SEIZE) they run on.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/target.h"
#include "util/vec.h"
#include "util/err.h"

#define PAUSE_TIMEOUT_NS 2000000000LL  /* per round, to see every thread stop */
#define PAUSE_MAX_ROUNDS 64            /* threads keep appearing: give up */

struct pause_task {
	pid_t tid;
	int stopped;  /* 1 once waitpid reported the ptrace-stop */
	int sig;      /* signal to hand back at detach (signal-delivery-stop) */
	int running;  /* 1 running, 0 blocked in a system call, -1 unknown */
};

struct rbp_pause {
	pid_t pid;
	struct pause_task *v;  /* threads held */
	size_t n, cap;
	pid_t *dead;           /* held threads that died: to collect at resume */
	size_t n_dead, cap_dead;
};

/* Remember a held thread that died, for reap_dead(). */
static void note_dead(struct rbp_pause *p, pid_t tid)
{
	if (!rbp_grow(&p->dead, &p->cap_dead, p->n_dead + 1, sizeof(*p->dead)))
		p->dead[p->n_dead++] = tid;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int held(const struct rbp_pause *p, pid_t tid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].tid == tid)
			return 1;
	return 0;
}

/* TracerPid of a thread from /proc; 0 when unknown or untraced. */
static long tracer_of(pid_t pid, pid_t tid)
{
	char path[64], buf[2048], *s;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	s = strstr(buf, "\nTracerPid:");
	return s ? strtol(s + 11, NULL, 10) : 0;
}

/*
 * Why SEIZE failed with EPERM: 1 when the thread is exiting (skip it),
 * else RBP_EPTRACE when a debugger holds it, else RBP_EPERM.
 */
static int classify_eperm(pid_t pid, pid_t tid)
{
	struct rbp_task_info ti;

	if (rbp_task_info(pid, tid, &ti) || ti.state == 'Z' || ti.state == 'X')
		return 1;
	return tracer_of(pid, tid) ? RBP_EPTRACE : RBP_EPERM;
}

/* Seize and interrupt tid, holding it in p; 1 when it vanished first. */
static int seize_one(struct rbp_pause *p, pid_t tid)
{
	if (rbp_grow(&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return RBP_ENOMEM;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
		if (errno == ESRCH)
			return 1;
		return errno == EPERM ? classify_eperm(p->pid, tid) : RBP_EPTRACE;
	}
	p->v[p->n++] = (struct pause_task){ .tid = tid };
	/* ESRCH here means it is exiting; waitpid will report that. */
	ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
	return RBP_OK;
}

/*
 * Whether a thread that just stopped had been running or was blocked in a
 * system call: interrupted there, its registers hold the call's number in
 * orig_rax and one of the kernel's "restart" codes (or -EINTR) in rax; a
 * thread stopped in user code has orig_rax == -1.  Reading this at the stop
 * is exact, unlike /proc's state, which our own pauses perturb (a sleeping
 * thread we detach is briefly runnable while it re-enters its call).
 */
static int was_running(pid_t tid)
{
#if defined(__x86_64__)
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, tid, NULL, &regs))
		return -1;
	long long rax = (long long)regs.rax;
	if ((long long)regs.orig_rax < 0)
		return 1;
	return !(rax == -4 /* EINTR */ || rax == -512 /* ERESTARTSYS */ ||
		 rax == -513 /* ERESTARTNOINTR */ || rax == -514 /* ERESTARTNOHAND */ ||
		 rax == -516 /* ERESTART_RESTARTBLOCK */);
#else
	(void)tid;
	return -1;
#endif
}

/* Poll one running thread; drops it from p when it has exited. */
static void poll_one(struct rbp_pause *p, size_t i)
{
	struct pause_task *t = &p->v[i];
	int st;
	pid_t r;

	do
		r = waitpid(t->tid, &st, __WALL | WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;
	if (r == t->tid && WIFSTOPPED(st)) {
		t->stopped = 1;
		t->running = was_running(t->tid);
		if ((st >> 16) == 0)  /* signal-delivery-stop, not an event */
			t->sig = WSTOPSIG(st);
		return;
	}
	p->v[i] = p->v[--p->n];  /* exited, killed, or not ours (ECHILD) */
}

/*
 * Drop held threads that are zombies: a group leader that exited while
 * other threads live is never reported by waitpid until they exit too.
 */
static void drop_zombies(struct rbp_pause *p)
{
	for (size_t i = p->n; i-- > 0;) {
		struct rbp_task_info ti;

		if (p->v[i].stopped)
			continue;
		if (rbp_task_info(p->pid, p->v[i].tid, &ti) ||
		    ti.state == 'Z' || ti.state == 'X') {
			note_dead(p, p->v[i].tid);
			p->v[i] = p->v[--p->n];
		}
	}
}

/* Wait until every held thread is stopped or gone; RBP_EPTRACE on timeout. */
static int wait_stopped(struct rbp_pause *p, long long timeout_ns)
{
	long long deadline = now_ns() + timeout_ns;
	unsigned spins = 0;

	for (;;) {
		size_t running = 0;

		for (size_t i = p->n; i-- > 0;)
			if (!p->v[i].stopped)
				poll_one(p, i);
		for (size_t i = 0; i < p->n; i++)
			running += !p->v[i].stopped;
		if (!running)
			return RBP_OK;
		if (now_ns() > deadline)
			return RBP_EPTRACE;
		/*
		 * A thread takes a few microseconds to stop (longer when it has
		 * to be scheduled first): yield once, so that it can run on our
		 * CPU, then sleep in growing steps rather than spin on waitpid.
		 */
		if (++spins == 1) {
			sched_yield();
		} else {
			long step = spins < 8 ? 5000L << spins : 500000L;
			struct timespec ts = { 0, step };

			if (spins % 16 == 0)
				drop_zombies(p);
			nanosleep(&ts, NULL);
		}
	}
}

/* One round: hold every listed thread not yet held; *added counts them. */
static int pause_round(struct rbp_pause *p, size_t *added)
{
	pid_t *tids;
	size_t n;
	int err = rbp_task_list(p->pid, &tids, &n);

	*added = 0;
	if (err)
		return err;
	for (size_t i = 0; i < n && !err; i++) {
		if (held(p, tids[i]))
			continue;
		err = seize_one(p, tids[i]);
		if (err == RBP_OK)
			(*added)++;
		else if (err == 1)
			err = RBP_OK;
	}
	free(tids);
	if (!err)
		err = wait_stopped(p, PAUSE_TIMEOUT_NS);
	return err;
}

/* On success *out is owned by the caller, who must rbp_resume() it. */
int rbp_pause(pid_t pid, struct rbp_pause **out)
{
	struct rbp_pause *p;
	size_t added = 1;
	int err = RBP_OK;

	*out = NULL;
	if (pid <= 0 || pid == getpid())
		return RBP_EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return RBP_ENOMEM;
	p->pid = pid;
	for (int round = 0; added && !err; round++)
		err = round < PAUSE_MAX_ROUNDS ? pause_round(p, &added) :
		      RBP_EPTRACE;
	if (!err && p->n == 0)
		err = RBP_ENOPROC;
	if (err) {
		/* Threads still running cannot be detached: let them stop. */
		wait_stopped(p, PAUSE_TIMEOUT_NS);
		rbp_resume(p);
		return err;
	}
	*out = p;
	return RBP_OK;
}

/* Number of threads held by a successful pause. */
size_t rbp_pause_nthreads(const struct rbp_pause *p)
{
	return p ? p->n : 0;
}

int rbp_pause_running(const struct rbp_pause *p, pid_t tid)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (p->v[i].tid == tid)
			return p->v[i].stopped ? p->v[i].running : -1;
	return -1;
}

/*
 * A held thread that was killed while paused (SIGKILL ends a ptrace-stop)
 * cannot be detached: it is a zombie (or about to be) whose exit the kernel
 * reports to us, its tracer, first.  Its real parent (a server's master
 * waiting for a worker) learns of the exit only once we collect it, so
 * collect it, waiting a little for a thread still on its way out.
 */
static void reap_dead(pid_t *dead, size_t n)
{
	struct timespec ts = { 0, 100000 };
	int st;

	/* in rounds: a group leader is reported only after its other threads */
	for (int round = 0; n && round < 200; round++) {
		for (size_t k = n; k-- > 0;) {
			pid_t r = waitpid(dead[k], &st, __WALL | WNOHANG);
			if (r == 0 || (r < 0 && errno == EINTR))
				continue;
			/* alive after all (it had not stopped yet): it has now, let it go */
			if (r == dead[k] && WIFSTOPPED(st) &&
			    ptrace(PTRACE_DETACH, dead[k], NULL, NULL) && errno == ESRCH)
				continue;
			dead[k] = dead[--n];   /* collected, or not ours to collect */
		}
		if (n)
			nanosleep(&ts, NULL);
	}
}

/* Detach every held thread, handing back any intercepted signal; frees p. */
void rbp_resume(struct rbp_pause *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		if (ptrace(PTRACE_DETACH, p->v[i].tid, NULL, (void *)(long)p->v[i].sig) &&
		    errno == ESRCH)
			note_dead(p, p->v[i].tid);
	reap_dead(p->dead, p->n_dead);
	free(p->dead);
	free(p->v);
	free(p);
}
