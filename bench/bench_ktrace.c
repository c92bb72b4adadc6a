/*
 * bench_ktrace.c - what the tracer's kernel streams (ext/rbpeek/ktrace.c)
 * cost the traced process: syscalls per second of a getppid loop, and
 * round trips per second of two threads ping-ponging a byte over pipes
 * (each trip: 2 writes, 2 reads, 2 sleeps, 2 wakeups, 4 switches), with the
 * streams off and on.  Off and on alternate in one run and each figure is
 * the best of ROUNDS, so the ratio stays meaningful on a noisy machine.
 * Also: the time rbk_drain takes to decode a full 1 MiB-per-CPU window.
 *
 *   build/bench_ktrace            (needs root or CAP_PERFMON)
 */
#include "../ext/rbpeek/ktrace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS   5
#define NCALLS   400000
#define NTRIPS   20000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double getppid_rate(void)
{
	double t0 = now_s();
	for (int i = 0; i < NCALLS; i++) syscall(SYS_getppid);
	return NCALLS / (now_s() - t0);
}

static int ping[2], pong[2];

static void *ponger(void *arg)
{
	char c;
	(void)arg;
	for (int i = 0; i < NTRIPS; i++)
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) break;
	return NULL;
}

static double pingpong_rate(void)
{
	pthread_t th;
	char c = 'x';
	pthread_create(&th, NULL, ponger, NULL);
	double t0 = now_s();
	for (int i = 0; i < NTRIPS; i++)
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) break;
	double rate = NTRIPS / (now_s() - t0);
	pthread_join(th, NULL);
	return rate;
}

static int count(void *ctx, const struct rbk_event *ev)
{
	(void)ev;
	++*(long *)ctx;
	return 0;
}

static double best(double a, double b) { return a > b ? a : b; }

int main(void)
{
	struct rbk_trace *t;
	char why[512];
	if (pipe(ping) || pipe(pong)) return 1;
	double off_s = 0, on_s = 0, off_p = 0, on_p = 0;
	for (int r = 0; r < ROUNDS; r++) {
		off_s = best(off_s, getppid_rate());
		off_p = best(off_p, pingpong_rate());
		int rc = rbk_open(&t, 1 << 20, why, sizeof(why));
		if (rc) {
			printf("skip kernel streams: %s\n", why);
			return 0;
		}
		on_s = best(on_s, getppid_rate());
		on_p = best(on_p, pingpong_rate());
		if (r < ROUNDS - 1) rbk_close(t);
	}
	printf("== kernel streams: cost to the traced process (best of %d, off/on alternating)\n", ROUNDS);
	printf("%-34s %12s %12s %8s %12s\n", "workload", "off /s", "on /s", "on/off", "+ns each");
	printf("%-34s %12.0f %12.0f %8.2f %12.0f\n", "getppid loop (syscalls)", off_s, on_s, on_s / off_s,
	       1e9 / on_s - 1e9 / off_s);
	printf("%-34s %12.0f %12.0f %8.2f %12.0f\n", "pipe ping-pong (round trips)", off_p, on_p, on_p / off_p,
	       1e9 / on_p - 1e9 / off_p);

	long n = 0;
	double t0 = now_s();
	int rc = rbk_drain(t, count, &n);
	double dt = now_s() - t0;
	printf("drain of the last window: %ld events in %.1f ms (%.0f ns/event), rc %d\n",
	       n, dt * 1e3, n ? dt * 1e9 / (double)n : 0.0, rc);
	rbk_close(t);
	return 0;
}
