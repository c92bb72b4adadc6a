/*
 * test_pause.c - stopping every thread of a multi-threaded child with
 * ptrace, resuming it, and the guarantee that matters most: a target is
 * never left stopped, even when the process that paused it is SIGKILLed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "proc/reader.h"
#include "proc/target.h"
#include "util/err.h"

#define NSPIN 4

static volatile unsigned long spins[NSPIN];

static void *spin(void *arg)
{
	size_t i = (size_t)arg;
	char name[16];

	snprintf(name, sizeof(name), "sp (in) %zu)", i);
	pthread_setname_np(pthread_self(), name);
	for (;;)
		spins[i]++;
	return NULL;
}

static void *quick(void *arg)
{
	return arg;
}

static volatile int lingering;

/* A thread that lives a few milliseconds, asleep: caught or missed, it shows. */
static void *linger(void *arg)
{
	struct timespec ts = { 0, 3000000 };

	nanosleep(&ts, NULL);
	__atomic_sub_fetch(&lingering, 1, __ATOMIC_SEQ_CST);
	return arg;
}

/*
 * Child body: NSPIN spinning threads, and then (churn 1) endless
 * short-lived threads, or (churn 2) threads that live 3 ms, up to 64 at
 * a time, started as fast as possible.
 */
static void child(int fd, int churn)
{
	pthread_t th;
	char c = 0;

	for (size_t i = 0; i < NSPIN; i++)
		pthread_create(&th, NULL, spin, (void *)i);
	for (size_t i = 0; i < NSPIN; i++)
		while (spins[i] == 0)
			;
	if (write(fd, &c, 1) != 1)
		_exit(1);
	for (;;) {
		if (!churn) {
			pause();
			continue;
		}
		if (churn == 2) {
			pthread_attr_t a;

			if (lingering >= 64)
				continue;
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			__atomic_add_fetch(&lingering, 1, __ATOMIC_SEQ_CST);
			if (pthread_create(&th, &a, linger, NULL))
				__atomic_sub_fetch(&lingering, 1, __ATOMIC_SEQ_CST);
			pthread_attr_destroy(&a);
			continue;
		}
		if (pthread_create(&th, NULL, quick, NULL) == 0)
			pthread_join(th, NULL);
	}
}

static pid_t spawn(int churn)
{
	int fds[2];
	pid_t pid;
	char c;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		child(fds[1], churn);
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		pid = -1;
	close(fds[0]);
	/* the main thread goes on to pause() after writing: wait until it sleeps there */
	for (int i = 0; pid > 0 && !churn && i < 2000; i++) {
		struct rbp_task_info ti;
		struct timespec ts = { 0, 1000000 };
		if (!rbp_task_info(pid, pid, &ti) && ti.state == 'S')
			break;
		nanosleep(&ts, NULL);
	}
	return pid;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * How many threads of pid are in state st; *total gets the thread count,
 * *live (when not NULL) the threads that can still run: listed, readable,
 * neither zombie nor dead.
 */
static size_t count_tasks(pid_t pid, char st, size_t *total, size_t *live)
{
	pid_t *tids;
	size_t n, hits = 0, can_run = 0;

	*total = 0;
	if (live)
		*live = 0;
	if (rbp_task_list(pid, &tids, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct rbp_task_info ti;

		if (rbp_task_info(pid, tids[i], &ti))
			continue;
		hits += ti.state == st;
		can_run += ti.state != 'Z' && ti.state != 'X';
	}
	free(tids);
	*total = n;
	if (live)
		*live = can_run;
	return hits;
}

static size_t count_state(pid_t pid, char st, size_t *total)
{
	return count_tasks(pid, st, total, NULL);
}

/* Counter of spinner i read from the child. */
static unsigned long counter(struct rbp_reader *r, size_t i)
{
	unsigned long v = 0;

	rbp_read(r, (uintptr_t)&spins[i], &v, sizeof(v));
	return v;
}

/* 1 when spinner i makes progress within two seconds. */
static int runs(struct rbp_reader *r, size_t i)
{
	unsigned long a = counter(r, i);

	for (int n = 0; n < 400; n++) {
		sleep_ms(5);
		if (counter(r, i) != a)
			return 1;
	}
	return 0;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_tasks(pid_t pid)
{
	pid_t *tids;
	size_t n, named = 0;

	TEST("task list and info") {
		CHECK_EQ_INT(rbp_task_list(pid, &tids, &n), RBP_OK);
		CHECK_EQ_INT(n, NSPIN + 1);
		CHECK_EQ_INT(tids[0], pid);
		for (size_t i = 0; i < n; i++) {
			struct rbp_task_info ti;

			CHECK(i == 0 || tids[i] > tids[i - 1]);
			CHECK_EQ_INT(rbp_task_info(pid, tids[i], &ti), RBP_OK);
			CHECK(i == 0 || ti.state == 'R' || ti.state == 'S');
			named += !strncmp(ti.comm, "sp (in) ", 8) && ti.comm[9] == ')';
		}
		CHECK_EQ_INT(named, NSPIN);
		free(tids);
		CHECK_EQ_INT(rbp_task_list(0x7ffffff0, &tids, &n), RBP_ENOPROC);
	}
}

static void test_pause_resume(pid_t pid)
{
	struct rbp_pause *p = NULL, *p2 = NULL;
	struct rbp_reader *r;
	unsigned long a, b;
	size_t total;

	rbp_reader_open_pid(pid, &r);
	TEST("pause stops every thread") {
		CHECK_EQ_INT(rbp_pause(pid, &p), RBP_OK);
		CHECK_EQ_INT(rbp_pause_nthreads(p), NSPIN + 1);
		CHECK_EQ_INT(count_state(pid, 't', &total), NSPIN + 1);
		CHECK_EQ_INT(total, NSPIN + 1);
		a = counter(r, 0);
		sleep_ms(20);
		b = counter(r, 0);
		CHECK(a == b);
	}
	TEST("what each thread was doing when paused") {
		/* the child's main thread waits in pause(); the others spin */
		pid_t *tids = NULL;
		size_t n = 0, running = 0;
		CHECK_EQ_INT(rbp_pause_running(p, pid), 0);
		CHECK_EQ_INT(rbp_task_list(pid, &tids, &n), RBP_OK);
		for (size_t i = 0; i < n; i++)
			running += tids[i] != pid && rbp_pause_running(p, tids[i]) == 1;
		CHECK_EQ_INT(running, NSPIN);
		CHECK_EQ_INT(rbp_pause_running(p, 1), -1);
		free(tids);
	}
	TEST("pausing twice: already traced") {
		CHECK_EQ_INT(rbp_pause(pid, &p2), RBP_EPTRACE);
		CHECK(p2 == NULL);
		CHECK_EQ_INT(count_state(pid, 't', &total), NSPIN + 1);
	}
	TEST("resume lets every thread run") {
		rbp_resume(p);
		sleep_ms(20);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
		for (size_t i = 0; i < NSPIN; i++)
			CHECK(runs(r, i));
		rbp_resume(NULL);
	}
	TEST("pause/resume many times") {
		for (int i = 0; i < 50; i++) {
			CHECK_EQ_INT(rbp_pause(pid, &p), RBP_OK);
			CHECK_EQ_INT(rbp_pause_nthreads(p), NSPIN + 1);
			rbp_resume(p);
		}
		sleep_ms(10);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
	}
	TEST("a blocked thread held back to back is never taken as running") {
		/*
		 * The main thread waits in pause().  Each release makes it restart
		 * the call; held again at once, it has usually not re-entered it
		 * yet (rax == orig_rax at its syscall instruction): still blocked.
		 */
		int wrong = 0, rc = rbp_pause_open(pid, &p);
		CHECK_EQ_INT(rc, RBP_OK);
		for (int i = 0; !rc && i < 100; i++) {
			if ((rc = rbp_pause_hold(p)))
				break;
			wrong += rbp_pause_running(p, pid) != 0;
			rbp_pause_release(p);
		}
		CHECK_EQ_INT(rc, RBP_OK);
		CHECK_EQ_INT(wrong, 0);
		rbp_pause_close(p);
		p = NULL;
		sleep_ms(10);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
	}
	rbp_reader_close(r);
}

/* A helper process pauses pid, reports, and is SIGKILLed while holding it. */
static void test_tracer_killed(pid_t pid)
{
	struct rbp_reader *r;
	int fds[2];
	pid_t helper;
	size_t total;
	char c = 0;

	rbp_reader_open_pid(pid, &r);
	TEST("tracer SIGKILLed while paused: target runs on") {
		CHECK(pipe(fds) == 0);
		helper = fork();
		if (helper == 0) {
			struct rbp_pause *p;

			c = rbp_pause(pid, &p) == RBP_OK ? 'y' : 'n';
			if (write(fds[1], &c, 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		close(fds[1]);
		CHECK(read(fds[0], &c, 1) == 1 && c == 'y');
		close(fds[0]);
		CHECK_EQ_INT(count_state(pid, 't', &total), NSPIN + 1);
		reap(helper);
		sleep_ms(50);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
		CHECK_EQ_INT(total, NSPIN + 1);
		for (size_t i = 0; i < NSPIN; i++)
			CHECK(runs(r, i));
	}
	rbp_reader_close(r);
}

/*
 * Held the way a sampler holds: one pause opened once, held and released
 * per sample.  A hold ends on the thread count (/proc/PID/stat) when it
 * agrees, so threads created and gone meanwhile must never slip through.
 */
static void test_churn(int kind)
{
	pid_t pid = spawn(kind);
	struct rbp_pause *p = NULL;
	size_t total;

	TEST(kind == 1 ? "pause while threads come and go" :
		 "pause while threads that live 3 ms start as fast as they can") {
		CHECK(pid > 0);
		CHECK_EQ_INT(rbp_pause_open(pid, &p), RBP_OK);
		for (int i = 0; i < 600; i++) {
			size_t stopped, live;

			CHECK_EQ_INT(rbp_pause_hold(p), RBP_OK);
			/*
			 * Every thread that can run is stopped.  A 3 ms thread
			 * that exited during the hold may still be listed as a
			 * zombie until it is collected: it cannot run, and it is
			 * not held.
			 */
			stopped = count_tasks(pid, 't', &total, &live);
			CHECK(stopped == live && live >= NSPIN + 1);
			CHECK_EQ_INT(rbp_pause_nthreads(p), live);
			if (i == 0)
				CHECK_EQ_INT(rbp_pause_hold(p), RBP_EINVAL);
			rbp_pause_release(p);
			CHECK_EQ_INT(rbp_pause_nthreads(p), 0);
			if (i % 20 == 0)
				sleep_ms(2);
		}
		rbp_pause_close(p);
		sleep_ms(20);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
	}
	reap(pid);
}

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* A child that starts one more (sleeping) thread for each byte on *cmd. */
static pid_t spawn_grower(int *cmd)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		pthread_t th;
		char c;

		close(fds[1]);
		while (read(fds[0], &c, 1) == 1)
			pthread_create(&th, NULL, idle, NULL);
		_exit(0);
	}
	close(fds[0]);
	*cmd = fds[1];
	return pid;
}

/* As a sampler pauses: a thread created between two pauses is held too. */
static void test_new_thread_between(void)
{
	int cmd = -1;
	pid_t pid = spawn_grower(&cmd);
	size_t total;

	TEST("a thread created since the last pause is held by the next") {
		struct rbp_pause *p = NULL;

		CHECK(pid > 0);
		CHECK_EQ_INT(rbp_pause_open(pid, &p), RBP_OK);
		for (int i = 0; i < 5; i++) {
			char c = 'x';

			CHECK_EQ_INT(rbp_pause_hold(p), RBP_OK);
			CHECK_EQ_INT(rbp_pause_nthreads(p), (size_t)i + 1);
			CHECK_EQ_INT(count_state(pid, 't', &total), (size_t)i + 1);
			CHECK_EQ_INT(total, (size_t)i + 1);
			rbp_pause_release(p);
			/* one more thread, then wait until it shows */
			CHECK(write(cmd, &c, 1) == 1);
			for (int w = 0; w < 2000 && (count_state(pid, 't', &total), total) < (size_t)i + 2; w++)
				sleep_ms(1);
		}
		close(cmd);
		cmd = -1;
		/* the process exits: the kept /proc files must say so */
		for (int w = 0; w < 2000 && !kill(pid, 0) && waitpid(pid, NULL, WNOHANG) == 0; w++)
			sleep_ms(1);
		CHECK_EQ_INT(rbp_pause_hold(p), RBP_ENOPROC);
		rbp_pause_close(p);
		sleep_ms(20);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
	}
	if (cmd >= 0)
		close(cmd);
	reap(pid);
}

static void test_stopped_target(pid_t pid)
{
	struct rbp_pause *p;
	size_t total;
	int i;

	TEST("a SIGSTOPped target stays stopped") {
		kill(pid, SIGSTOP);
		for (i = 0; i < 100 && count_state(pid, 'T', &total) != total; i++)
			sleep_ms(2);
		CHECK_EQ_INT(count_state(pid, 'T', &total), NSPIN + 1);
		CHECK_EQ_INT(rbp_pause(pid, &p), RBP_OK);
		rbp_resume(p);
		sleep_ms(20);
		CHECK_EQ_INT(count_state(pid, 'T', &total), NSPIN + 1);
		kill(pid, SIGCONT);
		sleep_ms(20);
		CHECK_EQ_INT(count_state(pid, 'T', &total), 0);
		CHECK_EQ_INT(count_state(pid, 't', &total), 0);
	}
}

int main(void)
{
	pid_t pid = spawn(0);
	struct rbp_pause *p = NULL;

	if (pid <= 0)
		return 1;
	test_tasks(pid);
	test_pause_resume(pid);
	test_tracer_killed(pid);
	test_stopped_target(pid);
	test_churn(1);
	test_churn(2);
	test_new_thread_between();
	TEST("bad pids") {
		CHECK_EQ_INT(rbp_pause(getpid(), &p), RBP_EINVAL);
		reap(pid);
		CHECK_EQ_INT(rbp_pause(pid, &p), RBP_ENOPROC);
		CHECK(p == NULL);
	}
	return harness_report();
}
