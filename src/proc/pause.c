/*
 * pause.c - stop every thread of a live process, and let it go again.
 *
 * PTRACE_SEIZE attaches without sending SIGSTOP, and PTRACE_INTERRUPT
 * then traps the thread in a PTRACE_EVENT_STOP that waitpid(__WALL)
 * reports.  Threads are stopped in rounds: list /proc/PID/task, seize and
 * interrupt every thread not yet held, wait until each is stopped, then
 * check for threads not held.  A stopped thread cannot create threads, so
 * a check made while every held thread is stopped that finds none is
 * final.  The check is the thread count in /proc/PID/stat: a held thread
 * stays counted until we collect it, even killed, so a count equal to the
 * number held means no other thread exists; any other count lists again.
 *
 * A pause is opened once per process and held and released at every
 * sample, its /proc/PID/task and /proc/PID/stat kept open.  It can also
 * hold chosen threads only (rbp_pause_hold_tids: the sampler's GVL holder).
 * Each system call costs about a microsecond in a virtual machine, so the
 * wait for a stop polls before it sleeps (see spin_learn()).
 *
 * A hold can be bounded (rbp_pause_set_budget): when some threads have
 * still not stopped that long after the first one did, the hold is given
 * up (RBP_PAUSE_OVER): the threads already stopped are let go at once,
 * and each of the others as soon as it stops (a thread we interrupted
 * cannot be let go before it stops).  Under load the last threads to stop
 * are those waiting for a CPU, and without the bound every thread already
 * stopped would wait for them: 100+ ms at load 20 (bench/README.md).
 *
 * A thread that was about to take a signal may report a signal-delivery
 * stop instead of the event stop; it is just as stopped, and the signal is
 * handed back at detach so the target never loses one.  Should the tracer
 * die, the kernel detaches its tracees and (with SEIZE) they run on.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include "proc/arch.h"
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/target.h"
#include "util/vec.h"
#include "util/err.h"

/* Whether tid is a process (not a thread) whose parent is us. */
static int our_child_process(pid_t tid)
{
	char path[64], buf[1024];
	long tgid = -1, ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(buf, sizeof(buf), f)) {
		if (!strncmp(buf, "Tgid:", 5))
			tgid = atol(buf + 5);
		else if (!strncmp(buf, "PPid:", 5))
			ppid = atol(buf + 5);
	}
	fclose(f);
	return tgid == tid && ppid == getpid();
}

/*
 * waitpid(tid, st, __WALL | WNOHANG) for a held thread, except that the
 * exit of a process we started ourselves (record -- CMD) is left for its
 * parent's waitpid (ours, elsewhere): as its tracer we would otherwise
 * collect the exit status the program's caller wants passed on.  Then
 * -1 with ECHILD, as for a task that is not ours to collect.  Only the
 * process's leader (tid == pid) can be that: other threads cost nothing more.
 */
static pid_t wait_task(pid_t pid, pid_t tid, int *st)
{
	siginfo_t si;

	if (tid != pid)
		return waitpid(tid, st, __WALL | WNOHANG);
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)tid, &si, WEXITED | __WALL | WNOHANG | WNOWAIT) < 0)
		return -1;
	if (si.si_pid == 0)
		return 0;
	if ((si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) &&
	    our_child_process(tid)) {
		errno = ECHILD;
		return -1;
	}
	return waitpid(tid, st, __WALL | WNOHANG);
}

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
	DIR *task_dir;         /* /proc/PID/task, kept open (NULL until first used) */
	int stat_fd;           /* /proc/PID/stat, for the thread count (-1 until then) */
	pid_t *tids;           /* the last listing */
	size_t n_tids, cap_tids;
	struct pause_task *v;  /* threads held */
	size_t n, cap;
	size_t n_last;         /* after a release: v[0..n_last) is the last hold's */
	long long budget_ns;   /* give a hold up this long after its first stop (0: never) */
	int no_state;          /* this hold does not read what threads were doing */
	int tids_state;        /* rbp_pause_hold_tids() reads it (rbp_pause_tids_state) */
	long long spin_ns;     /* poll this long for a stop before sleeping */
	unsigned spin_tried, spin_failed;  /* polls in this window; ended by sleeping */
	unsigned spin_off;     /* holds left without polling */
	long long first_stop;  /* when the current hold's first thread stopped, 0 none yet */
	long long held_ns;     /* the last hold: first stop to release */
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
 * system call, from its registers (how, per architecture: arch_*.c; on
 * x86-64 an interrupted call leaves its number in orig_rax and one of the
 * kernel's "restart" codes (or -EINTR) in rax; a thread stopped in user
 * code has orig_rax == -1).  Reading this at the stop is exact, unlike /proc's state, which our own pauses perturb (a sleeping
 * thread we detach is briefly runnable while it re-enters its call).
 *
 * That re-entry is the one case the codes alone get wrong: a blocked
 * thread that our previous stop interrupted restarts its call on release
 * (the kernel puts the call's number back in rax and moves rip back onto
 * the `syscall` instruction); on a busy machine it may still be waiting
 * for a CPU to re-enter when the next tick stops it, and then shows the
 * call's number in rax at a `syscall` instruction, with orig_rax either
 * the same number or -1 (stopped on its way back to user mode) -- no
 * restart code, yet it has not run an instruction of its own.  Seen at
 * 1000 Hz --on-cpu on a loaded machine: 0.3-2.5 % of a sleeping thread's
 * ticks.  Such a thread is taken as blocked: one PTRACE_PEEKTEXT, only
 * when rax holds a plausible system call number (0-511).
 */
static int was_running(pid_t tid)
{
	return rbp_arch_was_running(tid);   /* the registers: arch_*.c */
}

/* Poll one running thread; drops it from p when it has exited. */
static void poll_one(struct rbp_pause *p, size_t i)
{
	struct pause_task *t = &p->v[i];
	int st;
	pid_t r;

	do
		r = wait_task(p->pid, t->tid, &st);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;
	if (r == t->tid && WIFSTOPPED(st)) {
		t->stopped = 1;
		if (!p->first_stop)
			p->first_stop = now_ns();
		t->running = p->no_state ? -1 : was_running(t->tid);
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

/*
 * How long to poll for the stop before sleeping, learnt per process: a
 * thread on another CPU stops in 10-40 us in a virtual machine (the
 * interrupt that stops it exits to the hypervisor), and sleeping through
 * that costs more than polling -- our own CPU halts, and waking it is one
 * more trip through the hypervisor (bench/README.md).  The budget follows
 * an upper envelope of the stops seen while polling.  A thread on our own
 * CPU stops only once we let it run, which a real-time caller's
 * sched_yield() does not: when over a quarter of a window's polls end
 * without the stop, polling is off for the next SPIN_OFF_HOLDS holds.
 */
#define SPIN_START_NS 50000LL
#define SPIN_MAX_NS 100000LL
#define SPIN_WINDOW 32
#define SPIN_OFF_HOLDS 256

static void spin_learn(struct rbp_pause *p, int in_spin, long long took)
{
	if (in_spin) {
		long long want = took + took / 2;
		p->spin_ns -= p->spin_ns / 64;
		if (want > p->spin_ns)
			p->spin_ns = want < SPIN_MAX_NS ? want : SPIN_MAX_NS;
	}
	p->spin_failed += !in_spin;
	if (++p->spin_tried == SPIN_WINDOW) {
		if (p->spin_failed * 4 > SPIN_WINDOW)
			p->spin_off = SPIN_OFF_HOLDS;
		p->spin_tried = p->spin_failed = 0;
	}
}

/* Wait until every held thread is stopped or gone; RBP_EPTRACE on timeout. */
static int wait_stopped(struct rbp_pause *p, long long timeout_ns)
{
	long long start = now_ns(), deadline = start + timeout_ns, now = start;
	long long spin = p->spin_off ? 0 : p->spin_ns;
	unsigned spins = 0;

	p->spin_off -= p->spin_off > 0;
	for (;;) {
		size_t running = 0;

		for (size_t i = p->n; i-- > 0;)
			if (!p->v[i].stopped)
				poll_one(p, i);
		for (size_t i = 0; i < p->n; i++)
			running += !p->v[i].stopped;
		if (spins || p->first_stop)
			now = now_ns();
		if (!running) {
			if (spins && spin)
				spin_learn(p, spins == 1, now - start);
			return RBP_OK;
		}
		if (now > deadline)
			return RBP_EPTRACE;
		if (p->budget_ns && p->first_stop && now - p->first_stop > p->budget_ns)
			return RBP_PAUSE_OVER;
		/*
		 * Yield once, so that a thread on our CPU can run and stop;
		 * poll while the budget lasts; then sleep in growing steps.
		 */
		if (!spins) {
			spins = 1;
			sched_yield();
		} else if (spins == 1 && now - start < spin) {
			continue;
		} else {
			long step = ++spins < 8 ? 5000L << spins : 500000L;
			/* threads are held meanwhile: look again well within the bound */
			if (p->budget_ns && p->first_stop && step > p->budget_ns / 4)
				step = p->budget_ns / 4 > 2000 ? (long)(p->budget_ns / 4) : 2000L;
			struct timespec ts = { 0, step };

			if (spins % 16 == 0)
				drop_zombies(p);
			nanosleep(&ts, NULL);
		}
	}
}

/* List the threads into p->tids through the kept /proc/PID/task. */
static int list_tasks(struct rbp_pause *p)
{
	char path[48];
	int err;

	if (!p->task_dir) {
		snprintf(path, sizeof(path), "/proc/%d/task", (int)p->pid);
		if (!(p->task_dir = opendir(path)))
			return rbp_proc_errno(errno);
	}
	if ((err = rbp_task_collect(p->task_dir, &p->tids, &p->n_tids, &p->cap_tids)))
		return err;
	return p->n_tids ? RBP_OK : RBP_ENOPROC;   /* a zombie lists no tasks */
}

/* The process's thread count (/proc/PID/stat field 20); -1 when unknown. */
static long thread_count(struct rbp_pause *p)
{
	char buf[1024], *s;
	ssize_t n;

	if (p->stat_fd < 0) {
		snprintf(buf, sizeof(buf), "/proc/%d/stat", (int)p->pid);
		if ((p->stat_fd = open(buf, O_RDONLY | O_CLOEXEC)) < 0)
			return -1;
	}
	n = pread(p->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!(s = strrchr(buf, ')')))
		return -1;
	for (int field = 2; field < 20; field++)   /* ")" ends field 2 */
		if (!(s = strchr(s + 1, ' ')))
			return -1;
	return strtol(s + 1, NULL, 10);
}

/* One round: hold every listed thread not yet held; *added counts them. */
static int pause_round(struct rbp_pause *p, size_t *added)
{
	int err = list_tasks(p);

	*added = 0;
	for (size_t i = 0; i < p->n_tids && !err; i++) {
		if (held(p, p->tids[i]))
			continue;
		err = seize_one(p, p->tids[i]);
		if (err == RBP_OK)
			(*added)++;
		else if (err == 1)
			err = RBP_OK;
	}
	if (!err)
		err = wait_stopped(p, PAUSE_TIMEOUT_NS);
	return err;
}

int rbp_pause_open(pid_t pid, struct rbp_pause **out)
{
	struct rbp_pause *p;

	*out = NULL;
	if (pid <= 0 || pid == getpid())
		return RBP_EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return RBP_ENOMEM;
	p->pid = pid;
	p->stat_fd = -1;
	p->spin_ns = SPIN_START_NS;
	*out = p;
	return RBP_OK;
}

void rbp_pause_close(struct rbp_pause *p)
{
	if (!p)
		return;
	rbp_pause_release(p);
	if (p->task_dir)
		closedir(p->task_dir);
	if (p->stat_fd >= 0)
		close(p->stat_fd);
	free(p->tids);
	free(p->dead);
	free(p->v);
	free(p);
}

/* A hold failed: let what was seized stop (a running thread cannot be detached), release it. */
static int give_up(struct rbp_pause *p, int err)
{
	long long budget = p->budget_ns;

	p->budget_ns = 0;   /* every thread must stop before it can be let go */
	wait_stopped(p, PAUSE_TIMEOUT_NS);
	p->budget_ns = budget;
	rbp_pause_release(p);
	return err;
}

void rbp_pause_release(struct rbp_pause *p);

/*
 * The hold ran over its budget: let every stopped thread go now, then
 * each of the others as soon as it stops (or is gone).  Returns
 * RBP_PAUSE_OVER, or the error of a thread that never stopped.
 */
static int release_late(struct rbp_pause *p)
{
	long long deadline = now_ns() + PAUSE_TIMEOUT_NS;
	size_t n = p->n, k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!p->v[i].stopped) {
			p->v[k++] = p->v[i];
			continue;
		}
		if (ptrace(PTRACE_DETACH, p->v[i].tid, NULL, (void *)(long)p->v[i].sig) &&
		    errno == ESRCH)
			note_dead(p, p->v[i].tid);
	}
	p->held_ns = p->first_stop ? now_ns() - p->first_stop : 0;
	p->first_stop = 0;   /* the late ones: held from their stop to our next look */
	p->n = k;
	for (unsigned polls = 1; p->n; polls++) {
		for (size_t i = p->n; i-- > 0;) {
			poll_one(p, i);
			if (i < p->n && p->v[i].stopped) {
				if (ptrace(PTRACE_DETACH, p->v[i].tid, NULL, (void *)(long)p->v[i].sig) &&
				    errno == ESRCH)
					note_dead(p, p->v[i].tid);
				p->v[i] = p->v[--p->n];
			}
		}
		if (!p->n || now_ns() > deadline)
			break;
		/* a late thread is held from its stop until we look: look twice per bound */
		struct timespec ts = { 0, p->budget_ns / 2 > 5000 ? (long)(p->budget_ns / 2) : 5000L };
		nanosleep(&ts, NULL);
		if (polls % 16 == 0)
			drop_zombies(p);
	}
	int err = p->n ? RBP_EPTRACE : RBP_PAUSE_OVER;
	long long held = p->held_ns;
	rbp_pause_release(p);   /* what never stopped, and the dead */
	p->held_ns = held;
	p->n_last = 0;          /* nothing read: what threads were doing is unknown */
	return err;
}

void rbp_pause_tids_state(struct rbp_pause *p, int on)
{
	p->tids_state = on;
}

void rbp_pause_set_budget(struct rbp_pause *p, long long ns)
{
	p->budget_ns = ns > 0 ? ns : 0;
}

long long rbp_pause_holding_ns(const struct rbp_pause *p)
{
	return p && p->n && p->first_stop ? now_ns() - p->first_stop : 0;
}

int rbp_pause_hold(struct rbp_pause *p)
{
	size_t added = 1;
	int err = RBP_OK;

	if (p->n)
		return RBP_EINVAL;   /* already holding */
	p->no_state = 0;
	p->n_last = 0;
	for (int round = 0; added && !err; round++) {
		err = round < PAUSE_MAX_ROUNDS ? pause_round(p, &added) : RBP_EPTRACE;
		/* every held thread stopped: none unheld when the count agrees */
		if (!err && added && thread_count(p) == (long)p->n)
			break;
	}
	if (!err && p->n == 0)
		err = RBP_ENOPROC;
	if (err == RBP_PAUSE_OVER)
		return release_late(p);
	return err ? give_up(p, err) : RBP_OK;
}

int rbp_pause_hold_tids(struct rbp_pause *p, const pid_t *tids, size_t n)
{
	int err = RBP_OK;

	if (p->n)
		return RBP_EINVAL;   /* already holding */
	p->no_state = !p->tids_state;
	p->n_last = 0;
	for (size_t i = 0; i < n && !err; i++) {
		/* a thread of this process still?  its tid may be reused */
		if (syscall(SYS_tgkill, p->pid, tids[i], 0))
			continue;
		if ((err = seize_one(p, tids[i])) == 1)
			err = RBP_OK;
	}
	if (!err)
		err = wait_stopped(p, PAUSE_TIMEOUT_NS);
	if (err == RBP_PAUSE_OVER)
		return release_late(p);
	return err ? give_up(p, err) : RBP_OK;
}

/* On success *out is owned by the caller, who must rbp_resume() it. */
int rbp_pause(pid_t pid, struct rbp_pause **out)
{
	int err = rbp_pause_open(pid, out);

	if (!err && (err = rbp_pause_hold(*out))) {
		rbp_pause_close(*out);
		*out = NULL;
	}
	return err;
}

long long rbp_pause_held_ns(const struct rbp_pause *p)
{
	return p ? p->held_ns : 0;
}

/* Number of threads held by a successful pause. */
size_t rbp_pause_nthreads(const struct rbp_pause *p)
{
	return p ? p->n : 0;
}

int rbp_pause_running(const struct rbp_pause *p, pid_t tid)
{
	size_t n = p ? (p->n ? p->n : p->n_last) : 0;

	for (size_t i = 0; i < n; i++)
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
static void reap_dead(pid_t pid, pid_t *dead, size_t n)
{
	struct timespec ts = { 0, 100000 };
	int st;

	/* in rounds: a group leader is reported only after its other threads */
	for (int round = 0; n && round < 200; round++) {
		for (size_t k = n; k-- > 0;) {
			pid_t r = wait_task(pid, dead[k], &st);
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

/* Detach every held thread, handing back any intercepted signal. */
void rbp_pause_release(struct rbp_pause *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		if (ptrace(PTRACE_DETACH, p->v[i].tid, NULL, (void *)(long)p->v[i].sig) &&
		    errno == ESRCH)
			note_dead(p, p->v[i].tid);
	p->held_ns = p->first_stop ? now_ns() - p->first_stop : 0;
	p->first_stop = 0;
	p->n_last = p->n;
	p->n = 0;
	reap_dead(p->pid, p->dead, p->n_dead);
	p->n_dead = 0;
}

void rbp_resume(struct rbp_pause *p)
{
	rbp_pause_close(p);
}
