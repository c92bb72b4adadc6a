/*
 * test_uprobe.c - the uprobe perf plumbing (src/proc/uprobe.c) on a real
 * child process: every call reported with its arguments and thread, every
 * Nth with a period, a thread started later picked up by refresh, and the
 * probed instruction restored when the probes are closed.
 *
 * Needs root (or CAP_PERFMON) and a kernel with the uprobe PMU; otherwise
 * it says "skip" and runs nothing.
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
#include "proc/arch.h"
#include "self_probe.h"
#include "proc/maps.h"
#include "proc/uprobe.h"
#include "util/err.h"

#define CALLS 500

__attribute__((noinline)) long probe_me(long a, long b, long c)
{
	__asm__ volatile("" ::: "memory");
	return a + b + c;
}

static int go_fd[2], thread_fd[2];
static volatile long sink;

static void *thread_main(void *arg)
{
	char c;
	if (read(thread_fd[0], &c, 1) == 1)
		sink += probe_me(-1, -2, -3);
	return arg;
}

/* The child: wait for "go", call probe_me CALLS times, then once from a thread. */
static void child(void)
{
	char c;
	pthread_t th;

	if (read(go_fd[0], &c, 1) != 1)
		_exit(1);
	for (long i = 0; i < CALLS; i++)
		sink += probe_me(i, 1000 + i, 7);
	pthread_create(&th, NULL, thread_main, NULL);
	pthread_join(th, NULL);
	pause();
	_exit(0);
}

struct seen {
	long n, bad_args, bad_tid, thread_calls;
	pid_t pid;
};

static int on_sample(void *ctx, const struct rbp_uprobe_sample *s)
{
	struct seen *sn = ctx;

	if (s->args[0] == (uint64_t)-1) {
		sn->thread_calls += s->tid != sn->pid && s->args[1] == (uint64_t)-2;
		return 0;
	}
	sn->bad_args += s->args[1] != s->args[0] + 1000 || s->args[2] != 7;
	sn->bad_tid += s->tid != sn->pid;
	sn->n++;
	return 0;
}

/* Read until want main-thread samples (or 5 s). */
static void collect(struct rbp_uprobes *u, struct seen *sn, long want, long want_thread)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		rbp_uprobes_read(u, 10000, on_sample, sn);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((sn->n < want || sn->thread_calls < want_thread) && t.tv_sec - t0.tv_sec < 5);
}

static int mem_byte(pid_t pid, uint64_t addr)
{
	char path[64];
	unsigned char b;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	if (!(f = fopen(path, "rb")))
		return -1;
	int ok = !fseeko(f, (off_t)addr, SEEK_SET) && fread(&b, 1, 1, f) == 1;
	fclose(f);
	return ok ? b : -1;
}

/* Run the child with probe_me probed at period; check what arrives. */
static void run(uint64_t period, const struct rbp_uprobe_spec *spec, uint64_t addr)
{
	struct rbp_uprobes *u = NULL;
	struct seen sn = { 0 };
	pid_t pid;

	if (pipe(go_fd) || pipe(thread_fd))
		return;
	if ((pid = fork()) == 0)
		child();
	sn.pid = pid;
	CHECK_EQ_INT(rbp_uprobes_open(pid, spec, 1, period, &u), RBP_OK);
	if (u) {
		CHECK_EQ_INT(mem_byte(pid, addr), RBP_ARCH_UPROBE_BYTE);   /* the breakpoint is in place */
		CHECK(write(go_fd[1], "g", 1) == 1);
		collect(u, &sn, CALLS / (long)period, 0);
		CHECK_EQ_INT(sn.n, CALLS / (long)period);
		CHECK_EQ_INT(sn.bad_args, 0);
		CHECK_EQ_INT(sn.bad_tid, 0);
		if (period == 1) {
			usleep(100000);   /* the thread exists now, waiting */
			CHECK_EQ_INT(rbp_uprobes_refresh(u), RBP_OK);
			CHECK(write(thread_fd[1], "t", 1) == 1);
			collect(u, &sn, 0, 1);
			CHECK_EQ_INT(sn.thread_calls, 1);
		} else {
			CHECK(write(thread_fd[1], "t", 1) == 1);
		}
		rbp_uprobes_close(u);
		/* closed: the instruction is the program's own again */
		CHECK_EQ_INT(mem_byte(pid, addr), *(const unsigned char *)(uintptr_t)addr);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go_fd[0]), close(go_fd[1]), close(thread_fd[0]), close(thread_fd[1]);
}

int main(void)
{
	uint64_t addr = (uint64_t)(uintptr_t)&probe_me;
	struct rbp_uprobe_spec spec;
	char exe[4096];

	if (rbp_uprobe_available() || geteuid() != 0) {
		printf("skip: uprobes need root and the kernel's uprobe PMU\n");
		return harness_report();
	}
	if (self_probe_spec((const void *)&probe_me, exe, sizeof(exe), &spec))
		return 1;

	TEST("every call, its arguments and thread; a later thread; breakpoint removed")
		run(1, &spec, addr);
	TEST("every 10th call with period 10")
		run(10, &spec, addr);
	TEST("a bad offset is refused") {
		struct rbp_uprobes *u = NULL;
		struct rbp_uprobe_spec bad = { exe, 1ull << 40 };
		CHECK(rbp_uprobes_open(getpid(), &bad, 1, 1, &u) != RBP_OK);
		CHECK(u == NULL);
	}
	TEST("no such process") {
		struct rbp_uprobes *u = NULL;
		CHECK_EQ_INT(rbp_uprobes_open(0x3fffffff, &spec, 1, 1, &u), RBP_ENOPROC);
	}
	return harness_report();
}
