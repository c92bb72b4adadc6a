/*
 * test_ktrace.c - the tracer's kernel streams (ext/rbpeek/ktrace.c) against
 * the real kernel: threads doing known syscalls (nanosleep, write to a pipe,
 * a getppid loop on a pinned CPU, a read woken by another thread) and the
 * events they must produce, every sleep with its wakeup; reset windows; a
 * ring that overflowed; a forked child; and the unprivileged path (a child
 * that dropped root).
 *
 * The sleeper's timer wakeups run in the interrupt, in the context of
 * whatever task the CPU was running.  Some hosts hide tasks of their own
 * from perf, and then a wakeup in such a task's context is not recorded
 * (docs/trace-kernel.md).  So the sleeper and a spinning thread of ours
 * share one CPU under SCHED_FIFO (the spinner below the sleeper): the timer
 * interrupts our spinner, and every wakeup can be required, under load too.
 *
 * Needs root or CAP_PERFMON; without them (or without perf tracepoints) the
 * privileged part prints "skip ..." and only the unprivileged part runs.
 */
#include "harness.h"
#include "../../ext/rbpeek/ktrace.h"
#include "../../ext/rbpeek/syscall_names.h"

#include <errno.h>
#include <grp.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLEEP_NS   20000000LL   /* each nanosleep of the sleeper */
#define NSLEEPS    3
#define NWRITES    100
#define NPPID      1000

struct evs {                    /* what rbk_drain gave */
	struct rbk_event *ev;
	size_t n, cap;
};

static int collect(void *ctx, const struct rbk_event *ev)
{
	struct evs *e = ctx;
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 1024;
		e->ev = realloc(e->ev, e->cap * sizeof(*e->ev));
		if (!e->ev) return -ENOMEM;
	}
	e->ev[e->n++] = *ev;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int gettid_(void) { return (int)syscall(SYS_gettid); }

/* ---- the workers ---------------------------------------------------------- */

struct work {
	int start[2];               /* the sleeper waits for one byte here */
	int sleep_cpu;              /* CPU of the sleeper and the spinner */
	int fifo;                   /* 1: both run SCHED_FIFO there; -1: refused */
	volatile int spin_ready, spin_stop, tid_spin;
	int wake[2];                /* the reader blocks here until main writes */
	int sink[2];                /* the writer writes here */
	volatile int tid_sleep, tid_write, tid_ppid, tid_read;
	int ppid_cpu;               /* CPU the getppid thread pinned itself to */
};

/* Pin the calling thread to cpu and, when w->fifo, make it SCHED_FIFO at prio. */
static void pin_fifo(struct work *w, int prio)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->sleep_cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	struct sched_param sp = { .sched_priority = prio };
	if (w->fifo > 0 && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0)
		w->fifo = -1;
}

static void *sleeper(void *arg)
{
	struct work *w = arg;
	char c;
	pin_fifo(w, 2);
	w->tid_sleep = gettid_();
	if (read(w->start[0], &c, 1) != 1) return NULL;
	for (int i = 0; i < NSLEEPS; i++) {
		struct timespec ts = { 0, SLEEP_NS };
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return NULL;
}

/* Keeps the sleeper's CPU busy with a thread of ours until the sleeps end. */
static void *spinner(void *arg)
{
	struct work *w = arg;
	pin_fifo(w, 1);
	w->tid_spin = gettid_();
	w->spin_ready = 1;
	while (!w->spin_stop) __atomic_thread_fence(__ATOMIC_SEQ_CST);
	return NULL;
}

static void *writer(void *arg)
{
	struct work *w = arg;
	w->tid_write = gettid_();
	for (int i = 0; i < NWRITES; i++)
		if (write(w->sink[1], "x", 1) != 1) break;
	return NULL;
}

static void *ppid_loop(void *arg)
{
	struct work *w = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->ppid_cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	w->tid_ppid = gettid_();
	for (int i = 0; i < NPPID; i++) syscall(SYS_getppid);
	return NULL;
}

static void *reader(void *arg)
{
	struct work *w = arg;
	char c;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->sleep_cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	w->tid_read = gettid_();
	if (read(w->wake[0], &c, 1) != 1) return NULL;
	return NULL;
}

/* ---- checks over the drained events ---------------------------------------- */

/* Count syscalls nr of thread tid whose exit returned ret (any ret when
 * any_ret), with enter/exit pairs in order on one thread. */
static int count_calls(const struct evs *e, int tid, long nr, long ret, int any_ret)
{
	int n = 0, open = 0;
	for (size_t i = 0; i < e->n; i++) {
		const struct rbk_event *v = &e->ev[i];
		if (v->tid != tid) continue;
		if (v->kind == RBK_SYS_ENTER) open = v->nr_or_ret == nr;
		else if (v->kind == RBK_SYS_EXIT && open) {
			n += any_ret || v->nr_or_ret == ret;
			open = 0;
		}
	}
	return n;
}

/* Each nanosleep of the sleeper: enter, switched out sleeping, woken (by
 * the timer interrupting our spinner), switched in, exit at least SLEEP_NS
 * after enter.  Every one of them, under load too. */
static void check_sleeps(const struct evs *e, const struct work *w)
{
	int done = 0, step = 0, waker_ok = 1;
	uint64_t t_enter = 0;
	for (size_t i = 0; i < e->n; i++) {
		const struct rbk_event *v = &e->ev[i];
		if (v->tid != w->tid_sleep) continue;
		if (v->kind == RBK_SYS_ENTER && v->nr_or_ret == SYS_nanosleep) {
			step = 1;
			t_enter = v->ts_ns;
		} else if (step == 1 && v->kind == RBK_SCHED_SWITCH_OUT && v->state == RBK_SLEEPING) {
			step = 2;
		} else if (step == 2 && v->kind == RBK_SCHED_WAKEUP) {
			step = 3;
			waker_ok &= w->fifo < 0 || v->nr_or_ret == w->tid_spin;
		} else if (step == 3 && v->kind == RBK_SCHED_SWITCH_IN) {
			step = 4;
		} else if (step == 4 && v->kind == RBK_SYS_EXIT) {
			CHECK(v->ts_ns - t_enter >= (uint64_t)SLEEP_NS);
			CHECK_EQ_INT(v->nr_or_ret, 0);
			done++;
			step = 0;
		}
	}
	CHECK_EQ_INT(done, NSLEEPS);
	CHECK(waker_ok);
}

static int event_cpu_ok(const struct rbk_event *v, long ncpu) { return v->cpu >= 0 && v->cpu < ncpu; }

static void check_window(const struct evs *e, const struct work *w, int tid_main, uint64_t t0, uint64_t t1)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int ours = 1, ordered = 1, in_time = 1, cpus = 1, pinned = 1, kinds[8] = { 0 };
	for (size_t i = 0; i < e->n; i++) {
		const struct rbk_event *v = &e->ev[i];
		int tid = v->tid;
		ours &= tid == tid_main || tid == w->tid_sleep || tid == w->tid_write ||
		        tid == w->tid_ppid || tid == w->tid_read || tid == w->tid_spin;
		ordered &= i == 0 || e->ev[i - 1].ts_ns <= v->ts_ns;
		in_time &= v->ts_ns >= t0 && v->ts_ns <= t1;
		cpus &= event_cpu_ok(v, ncpu);
		if (tid == w->tid_ppid && (v->kind == RBK_SYS_ENTER || v->kind == RBK_SYS_EXIT) &&
		    e->ev[i].nr_or_ret == SYS_getppid)
			pinned &= v->cpu == w->ppid_cpu;
		if (v->kind < 8) kinds[v->kind]++;
	}
	TEST("events: only this process's threads") CHECK(ours);
	TEST("events: in time order, CLOCK_MONOTONIC") { CHECK(ordered); CHECK(in_time); }
	TEST("events: CPU numbers (the pinned thread's syscalls on its CPU)") { CHECK(cpus); CHECK(pinned); }
	TEST("events: every kind present") {
		for (int k = RBK_SYS_ENTER; k <= RBK_SCHED_WAKEUP; k++) CHECK(kinds[k] > 0);
	}
	TEST("syscalls: getppid loop, name and return value") {
		CHECK_EQ_INT(count_calls(e, w->tid_ppid, SYS_getppid, getppid(), 0), NPPID);
		CHECK_EQ_STR(rbk_syscall_name(SYS_getppid), "getppid");
	}
	TEST("syscalls: writes to a pipe by a thread created after open") {
		CHECK_EQ_INT(count_calls(e, w->tid_write, SYS_write, 1, 0), NWRITES);
	}
	if (w->fifo < 0)
		printf("note: SCHED_FIFO refused; the sleeper's timer wakeups may run in a task hidden from perf\n");
	TEST("sched: every nanosleep = sleeping, woken, switched in; duration >= the sleep")
		check_sleeps(e, w);
	TEST("sched: a read that slept, woken by the writing thread, switched in") {
		int step = 0;
		for (size_t i = 0; i < e->n; i++) {
			const struct rbk_event *v = &e->ev[i];
			if (v->tid != w->tid_read) continue;
			if (step == 0 && v->kind == RBK_SCHED_SWITCH_OUT && v->state == RBK_SLEEPING) step = 1;
			else if (step == 1 && v->kind == RBK_SCHED_WAKEUP && v->nr_or_ret == tid_main) step = 2;
			else if (step == 2 && v->kind == RBK_SCHED_SWITCH_IN) step = 3;
		}
		CHECK_EQ_INT(step, 3);
		CHECK_EQ_INT(count_calls(e, w->tid_read, SYS_read, 1, 0), 1);
	}
}

/* ---- the scenarios --------------------------------------------------------- */

/* Wait until thread tid is blocked in syscall nr (up to 5 s); 0 when it is. */
static int wait_blocked(int tid, long nr)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		long cur = -2;
		if (f) {
			if (fgets(buf, sizeof(buf), f)) cur = strtol(buf, NULL, 10);
			fclose(f);
		}
		if (cur == nr) return 0;
		usleep(1000);
	}
	return -1;
}

/* The reader sits on the sleeper's CPU and main wakes it from another CPU
 * (a remote wakeup: when the reader's CPU is idle the kernel completes it
 * there, in whatever context runs on that CPU; the event must still name
 * main as the waker).  Then the spinner takes that CPU and the sleeper
 * sleeps. */
static void run_threads(struct rbk_trace *t, struct work *w, pthread_t *th, uint64_t *t1)
{
	cpu_set_t old, other;
	/* the sleeper existed before open; the others are created after it */
	pthread_create(&th[1], NULL, writer, w);
	pthread_create(&th[2], NULL, ppid_loop, w);
	pthread_create(&th[3], NULL, reader, w);
	while (!w->tid_read || !w->tid_write || !w->tid_ppid) usleep(1000);
	CHECK_EQ_INT(rbk_update_threads(t), 0);    /* the reader's wakeups from now */
	CHECK_EQ_INT(wait_blocked(w->tid_read, SYS_read), 0);
	sched_getaffinity(0, sizeof(old), &old);
	CPU_ZERO(&other);
	CPU_SET(w->ppid_cpu, &other);
	sched_setaffinity(0, sizeof(other), &other);
	if (write(w->wake[1], "w", 1) != 1) CHECK(0);
	pthread_join(th[3], NULL);
	sched_setaffinity(0, sizeof(old), &old);
	pthread_create(&th[4], NULL, spinner, w);
	while (!w->spin_ready) usleep(1000);
	if (write(w->start[1], "s", 1) != 1) CHECK(0);
	pthread_join(th[0], NULL);
	w->spin_stop = 1;
	for (int i = 1; i < 5; i++)
		if (i != 3) pthread_join(th[i], NULL);
	*t1 = now_ns();
}

static void test_streams(struct rbk_trace *t, struct work *w, pthread_t *th, uint64_t t0)
{
	struct evs e = { 0 };
	uint64_t t1 = 0;
	TEST("threads run while traced; drain") {
		run_threads(t, w, th, &t1);
		CHECK_EQ_INT(rbk_drain(t, collect, &e), 0);
	}
	check_window(&e, w, gettid_(), t0, t1 + 1000000000u);
	free(e.ev);
}

static void test_reset(struct rbk_trace *t)
{
	struct evs e = { 0 };
	usleep(1000);
	uint64_t t0 = now_ns();
	rbk_reset(t);
	for (int i = 0; i < 7; i++) syscall(SYS_getppid);
	TEST("reset: the window starts at rbk_reset") {
		CHECK_EQ_INT(rbk_drain(t, collect, &e), 0);
		CHECK_EQ_INT(count_calls(&e, gettid_(), SYS_getppid, 0, 1), 7);
		for (size_t i = 0; i < e.n; i++) CHECK(e.ev[i].ts_ns >= t0);
	}
	free(e.ev);
}

/* A one-page ring keeps only the newest events: complete pairs, the last
 * getppid calls, nothing older than what fits. */
static void test_overflow(void)
{
	struct rbk_trace *t;
	char why[256];
	struct evs e = { 0 };
	TEST("overflow: a tiny ring keeps the newest events") {
		CHECK_EQ_INT(rbk_open(&t, 1, why, sizeof(why)), 0);
		if (!t) break;
		cpu_set_t set, old;
		sched_getaffinity(0, sizeof(old), &old);
		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof(set), &set);
		for (int i = 0; i < 20000; i++) syscall(SYS_getppid);
		uint64_t late = now_ns();
		for (int i = 0; i < 5; i++) syscall(SYS_getppid);
		sched_setaffinity(0, sizeof(old), &old);
		CHECK_EQ_INT(rbk_drain(t, collect, &e), 0);
		int n = count_calls(&e, gettid_(), SYS_getppid, 0, 1), newest = 0;
		for (size_t i = 0; i < e.n; i++)
			newest += e.ev[i].kind == RBK_SYS_EXIT && e.ev[i].ts_ns >= late;
		CHECK(n > 5 && n < 200);
		CHECK(newest >= 5);
		rbk_close(t);
	}
	free(e.ev);
}

/* After fork the child's handle refuses to drain, and the child's syscalls
 * do not reach the parent's rings (inherit_thread). */
static void test_fork(struct rbk_trace *t)
{
	struct evs e = { 0 };
	rbk_reset(t);
	pid_t pid = fork();
	if (pid == 0) {
		int rc = rbk_drain(t, collect, &e);
		for (int i = 0; i < 50; i++) syscall(SYS_getppid);
		_exit(rc == -ECHILD ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	TEST("fork: the child cannot drain; its syscalls are not traced") {
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK_EQ_INT(rbk_drain(t, collect, &e), 0);
		for (size_t i = 0; i < e.n; i++)
			if (e.ev[i].kind != RBK_SCHED_WAKEUP) CHECK(e.ev[i].tid != pid);
	}
	free(e.ev);
}

/* A child drops root (uid/gid nobody, so no capabilities): open fails with
 * a message naming what is missing, and the rest keeps working. */
static void test_unprivileged(void)
{
	long par = 2;
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	if (f) { if (fscanf(f, "%ld", &par) != 1) par = 2; fclose(f); }
	if (getuid() != 0 || par <= -1) {
		printf("skip unprivileged: %s\n", getuid() ? "not root, cannot drop privilege" :
		       "perf_event_paranoid is -1, so no privilege is needed");
		return;
	}
	int p[2];
	if (pipe(p) != 0) return;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		struct rbk_trace *t = NULL;
		char why[512] = "", c = 0;
		int ok = setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0;
		int rc = rbk_open(&t, 0, why, sizeof(why));
		int pipe_ok = write(p[1], why, strlen(why) + 1) > 0;
		c = (char)(ok && pipe_ok && rc == -EACCES && !t && rbk_syscall_name(SYS_read) != NULL);
		_exit(c ? 0 : 1);
	}
	close(p[1]);
	char why[512] = "";
	ssize_t n = read(p[0], why, sizeof(why) - 1);
	why[n > 0 ? n : 0] = 0;
	close(p[0]);
	int st = -1;
	waitpid(pid, &st, 0);
	TEST("unprivileged: -EACCES, a message naming what is missing") {
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK(strstr(why, "CAP_PERFMON") != NULL);
		CHECK(strstr(why, "perf_event_paranoid") != NULL);
		CHECK(strstr(why, "CAP_BPF") != NULL);
		CHECK(strchr(why, '\n') == NULL);
	}
}

/* Remote handles (sudo rbpeek trace): this process opens the streams of a
 * child and serves them; the child, with no privilege, reads its own
 * syscalls through the socket named in $RBPEEK_TRACE_KFD. */
static void test_remote(void)
{
	int sv[2], gate[2];
	if (getuid() != 0) {
		printf("skip remote: not root\n");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(gate)) return;
	pid_t pid = fork();
	if (pid == 0) {
		struct rbk_trace *t = NULL;
		struct evs e = { 0 };
		char why[512] = "", env[48], c;
		close(sv[0]);
		close(gate[1]);
		int ok = setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0;
		ok = ok && read(gate[0], &c, 1) >= 0;
		snprintf(env, sizeof(env), "%d:%d", sv[1], (int)getpid());
		setenv("RBPEEK_TRACE_KFD", env, 1);
		int rc = rbk_open(&t, 0, why, sizeof(why));
		for (int i = 0; i < 50; i++) syscall(SYS_getppid);
		int drc = t ? rbk_drain(t, collect, &e) : -1;
		int calls = count_calls(&e, gettid_(), SYS_getppid, 0, 1), others = 0, wakers = 0;
		for (size_t i = 0; i < e.n; i++) {
			others += e.ev[i].kind != RBK_SCHED_WAKEUP && e.ev[i].tid != gettid_();
			wakers += e.ev[i].kind == RBK_SCHED_WAKEUP && e.ev[i].nr_or_ret != 0;
		}
		rbk_close(t);
		_exit(!ok ? 1 : rc ? 2 : drc ? 3 : calls < 50 ? 4 : others ? 5 : wakers ? 6 : 0);
	}
	close(sv[1]);
	close(gate[0]);
	struct rbk_trace *t = NULL;
	char why[512] = "";
	int rc = rbk_open_pid(&t, pid, 0, why, sizeof(why)), st = -1, served = 0;
	close(gate[1]);
	for (;;) {
		if (waitpid(pid, &st, WNOHANG) == pid) break;
		struct pollfd pf = { sv[0], POLLIN, 0 };
		if (poll(&pf, 1, 50) > 0 && rbk_serve(t, rc, why, sv[0]) == 0) served++;
	}
	close(sv[0]);
	rbk_close(t);
	TEST("remote: a child without privilege reads its own syscalls through rbpeek") {
		CHECK_EQ_INT(rc, 0);
		CHECK(WIFEXITED(st));
		CHECK_EQ_INT(WEXITSTATUS(st), 0);   /* 2 open, 3 drain, 4 calls missing, 5 others', 6 waker */
		CHECK(served >= 2);                 /* open, drain */
	}
}

static void test_names(void)
{
	TEST("syscall names from the kernel headers") {
		CHECK_EQ_STR(rbk_syscall_name(SYS_read), "read");
		CHECK_EQ_STR(rbk_syscall_name(SYS_write), "write");
		CHECK_EQ_STR(rbk_syscall_name(SYS_futex), "futex");
		CHECK_EQ_STR(rbk_syscall_name(SYS_clock_nanosleep), "clock_nanosleep");
		CHECK(rbk_syscall_name(-1) == NULL);
		CHECK(rbk_syscall_name(100000) == NULL);
	}
}

/* The flag set by its bit is the header's field (these headers have it),
 * and nothing else moves. */
static void test_inherit_thread_bit(void)
{
	TEST("inherit_thread set through its bit, as with old headers") {
		struct perf_event_attr a, zero;
		memset(&a, 0, sizeof(a));
		memset(&zero, 0, sizeof(zero));
		rbk_attr_inherit_thread(&a, 1);
		CHECK_EQ_INT(a.inherit_thread, 1);
		a.inherit_thread = 0;
		CHECK(memcmp(&a, &zero, sizeof(a)) == 0);
		a.inherit = a.disabled = a.write_backward = 1;
		rbk_attr_inherit_thread(&a, 1);
		rbk_attr_inherit_thread(&a, 0);
		CHECK_EQ_INT(a.inherit_thread, 0);
		CHECK(a.inherit && a.disabled && a.write_backward);
	}
}

int main(void)
{
	test_names();
	test_inherit_thread_bit();
	test_unprivileged();
	test_remote();

	struct work w = { 0 };
	pthread_t th[5];
	if (pipe(w.start) || pipe(w.wake) || pipe(w.sink)) return 1;
	cpu_set_t allowed;
	sched_getaffinity(0, sizeof(allowed), &allowed);
	w.sleep_cpu = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed)) {
			w.ppid_cpu = c;                          /* the last allowed CPU */
			if (w.sleep_cpu < 0) w.sleep_cpu = c;    /* the first */
		}
	/* FIFO only with another CPU left for the rest (and only as root) */
	w.fifo = w.sleep_cpu != w.ppid_cpu && getuid() == 0 ? 1 : -1;
	pthread_create(&th[0], NULL, sleeper, &w);
	while (!w.tid_sleep) usleep(1000);

	struct rbk_trace *t = NULL;
	char why[512];
	uint64_t t0 = now_ns();
	int rc = rbk_open(&t, 1 << 20, why, sizeof(why));
	if (rc == -EACCES || rc == -ENOENT || rc == -ENOSYS || rc == -ENODEV) {
		printf("skip kernel streams: %s\n", why);
		if (write(w.start[1], "s", 1) != 1) return 1;
		pthread_join(th[0], NULL);
		return harness_report();
	}
	TEST("open (root)") {
		CHECK_EQ_INT(rc, 0);
		if (rc) fprintf(stderr, "rbk_open: %s\n", why);
	}
	if (!t) return harness_report();
	test_streams(t, &w, th, t0);
	test_reset(t);
	test_fork(t);
	rbk_close(t);
	test_overflow();
	return harness_report();
}
