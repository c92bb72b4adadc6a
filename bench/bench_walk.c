/*
 * bench_walk.c - the CPU cost of one sample, without the sampler's timer:
 * attach to a live Ruby process and read every thread's stack N times in a
 * row, the way record does on each tick: with the GVL's holder stopped
 * around each read (record's default), every thread stopped (--all: what
 * top, --on-cpu and --native do), or none (--nonblocking).  Prints CPU
 * microseconds per sample (this thread's user + system time,
 * CLOCK_THREAD_CPUTIME_ID), reads (system calls into the target's memory)
 * per sample, and the frames seen.
 *
 *   build/bench_walk PID N [--nonblocking | --all]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc/target.h"
#include "ruby/vm.h"
#include "util/err.h"

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct rbp_target *t;
	struct rbp_vm *vm;
	struct rbp_stacks st = { 0 };
	struct rbp_vm_stats s0, s1;
	int err;
	enum rbp_pause_mode mode = argc <= 3 ? RBP_PAUSE_GVL :
				   !strcmp(argv[3], "--nonblocking") ? RBP_PAUSE_NONE :
				   !strcmp(argv[3], "--all") ? RBP_PAUSE_ALL : (enum rbp_pause_mode)-1;
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (n <= 0 || (int)mode < 0) {
		fprintf(stderr, "usage: bench_walk PID N [--nonblocking | --all]\n");
		return 2;
	}
	if ((err = rbp_target_open_pid(atoi(argv[1]), &t)) || (err = rbp_vm_attach(t, NULL, &vm))) {
		fprintf(stderr, "bench_walk: %s\n", rbp_strerror(err));
		return 1;
	}
	/* warm the caches (labels, lines) as a recording does after its first ticks */
	for (int i = 0; i < 20; i++)
		rbp_vm_read_stacks_paused(vm, mode, &st);
	rbp_vm_stats(vm, &s0);
	double c0 = cpu_now();
	long fails = 0;
	for (long i = 0; i < n; i++)
		fails += rbp_vm_read_stacks_paused(vm, mode, &st) != 0;
	double c1 = cpu_now();
	rbp_vm_stats(vm, &s1);
	printf("%.1f us/sample, %.1f reads/sample, %zu threads, %zu frames, %ld failed\n",
	       (c1 - c0) * 1e6 / (double)n, (double)(s1.reads - s0.reads) / (double)n, st.n_threads,
	       st.n_frames, fails);
	rbp_stacks_free(&st);
	rbp_vm_free(vm);
	rbp_target_close(t);
	return 0;
}
