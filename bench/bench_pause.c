/*
 * bench_pause.c - where the CPU of a blocking sample goes: each ptrace step
 * of stopping and restarting one thread, timed on this thread's CPU clock
 * (user + system), N times, against a live process's main thread:
 *
 *   list     listing /proc/PID/task (rbp_task_list)
 *   detach:  SEIZE, INTERRUPT, waitpid (blocking) for the stop, GETREGS,
 *            DETACH -- what rbp_pause/rbp_resume do per thread
 *   kept:    INTERRUPT, waitpid, CONT on a thread kept seized throughout
 *            (the alternative of staying attached between samples)
 *
 * and the same steps with this thread pinned to the target's CPU and to
 * another one (sched_setaffinity), since the cost of the stop and of the
 * wake-up depends on whether the kernel must interrupt another CPU.
 *
 *   build/bench_pause PID [N]
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "proc/arch.h"
#include "proc/target.h"

static double cpu_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Blocking wait for tid's ptrace-stop; 0 when it stopped. */
static int wait_stop(pid_t tid)
{
	int st;
	pid_t r;

	do
		r = waitpid(tid, &st, __WALL);
	while (r < 0 && errno == EINTR);
	return r == tid && WIFSTOPPED(st) ? 0 : -1;
}

/* The CPU tid last ran on (/proc stat field 39), -1 unknown. */
static int cpu_of(pid_t pid)
{
	char path[64], buf[1024];
	FILE *f;
	int cpu = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	if (fgets(buf, sizeof(buf), f)) {
		char *s = strrchr(buf, ')');
		for (int field = 2; s && field < 39; field++)
			s = strchr(s + 1, ' ');
		if (s)
			cpu = atoi(s + 1);
	}
	fclose(f);
	return cpu;
}

static void steps_detach(pid_t pid, long n)
{
	double t[5] = { 0 }, w0 = wall_us(), a, b, c, d, e, f;
	for (long i = 0; i < n; i++) {
		a = cpu_us();
		ptrace(PTRACE_SEIZE, pid, NULL, NULL);
		b = cpu_us();
		ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
		c = cpu_us();
		if (wait_stop(pid))
			exit(1);
		d = cpu_us();
		rbp_arch_was_running(pid);   /* the registers read at each stop */
		e = cpu_us();
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
		f = cpu_us();
		t[0] += b - a, t[1] += c - b, t[2] += d - c, t[3] += e - d, t[4] += f - e;
	}
	printf("  detach: seize %.1f  interrupt %.1f  wait %.1f  getregs %.1f  detach %.1f  = %.1f us CPU"
	       " (%.1f us wall)\n", t[0] / n, t[1] / n, t[2] / n, t[3] / n, t[4] / n,
	       (t[0] + t[1] + t[2] + t[3] + t[4]) / n, (wall_us() - w0) / n);
}

static void steps_kept(pid_t pid, long n)
{
	double t[3] = { 0 }, w0, a, b, c, d;

	if (ptrace(PTRACE_SEIZE, pid, NULL, NULL))
		return;
	w0 = wall_us();
	for (long i = 0; i < n; i++) {
		a = cpu_us();
		ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
		b = cpu_us();
		if (wait_stop(pid))
			exit(1);
		c = cpu_us();
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		d = cpu_us();
		t[0] += b - a, t[1] += c - b, t[2] += d - c;
	}
	printf("  kept:   interrupt %.1f  wait %.1f  cont %.1f  = %.1f us CPU (%.1f us wall)\n",
	       t[0] / n, t[1] / n, t[2] / n, (t[0] + t[1] + t[2]) / n, (wall_us() - w0) / n);
	ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
	wait_stop(pid);
	ptrace(PTRACE_DETACH, pid, NULL, NULL);
}

/* Every step, with this thread allowed on `cpu` only (-1: anywhere). */
static void run_all(pid_t pid, long n, int cpu)
{
	cpu_set_t set;
	pid_t *tids;
	size_t nt;

	CPU_ZERO(&set);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (cpu < 0 || i == cpu)
			CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
	sched_yield();
	double a = cpu_us();
	for (long i = 0; i < n; i++)
		if (!rbp_task_list(pid, &tids, &nt))
			free(tids);
	printf("  list:   %.1f us CPU\n", (cpu_us() - a) / n);
	steps_detach(pid, n);
	steps_kept(pid, n);
}

int main(int argc, char **argv)
{
	pid_t pid = argc > 1 ? atoi(argv[1]) : 0;
	long n = argc > 2 ? atol(argv[2]) : 2000;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (pid <= 0 || n <= 0) {
		fprintf(stderr, "usage: bench_pause PID [N]\n");
		return 2;
	}
	printf("per step, mean of %ld (thread %d):\n", n, (int)pid);
	printf(" anywhere (the scheduler's choice):\n");
	run_all(pid, n, -1);
	int cpu = cpu_of(pid);
	if (cpu >= 0 && ncpu > 1) {
		printf(" on the target's CPU (%d):\n", cpu);
		run_all(pid, n, cpu);
		printf(" on another CPU (%d; the target was last on %d):\n", (cpu + 1) % ncpu, cpu_of(pid));
		run_all(pid, n, (cpu + 1) % ncpu);
	}
	return 0;
}
