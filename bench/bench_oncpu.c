/*
 * bench_oncpu.c - the in-kernel sampler (profile/bpfsampler.h) watching
 * several Ruby processes at once, as `rbpeek agent` will: one engine, one
 * program per CPU clock tick, whatever the number of processes.  Run by
 * bench/sampler_bpf.rb, which compares it with the ptrace sampler.
 *
 *   bench_oncpu SECONDS RATE_HZ PID...
 *
 * Prints one line: samples decoded, decode errors, the kernel's count of
 * ticks on watched threads, the program's runs and time in them (the
 * kernel's own statistics, BPF_ENABLE_STATS), this process's user and
 * system CPU seconds, and of those the sampling loop's (load and attach
 * left out).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "profile/bpfsampler.h"
#include "util/err.h"

static int on_sample(void *ctx, const struct rbp_bpf_sample *smp)
{
	(*(uint64_t *)ctx) += smp->th != NULL;
	return 0;
}

static double secs(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	struct rbp_bpf_sampler *s = NULL;
	struct rbp_stacks stacks = { 0 };
	struct rbp_bpf_sampler_stats st;
	struct rusage ru;
	char why[1024];
	uint64_t samples = 0;
	int n = argc - 3, err;

	if (n < 1) {
		fprintf(stderr, "usage: bench_oncpu SECONDS RATE_HZ PID...\n");
		return 2;
	}
	struct rbp_target **t = calloc((size_t)n, sizeof(*t));
	struct rbp_vm **vm = calloc((size_t)n, sizeof(*vm));
	if (!t || !vm)
		return 1;
	if ((err = rbp_bpf_sampler_open((uint32_t)atoi(argv[2]), &s, why, sizeof(why)))) {
		fprintf(stderr, "bench_oncpu: %s\n", why);
		return 1;
	}
	rbp_bpf_sampler_enable_stats(s);
	for (int i = 0; i < n; i++)
		if ((err = rbp_target_open_pid(atoi(argv[3 + i]), &t[i])) ||
		    (err = rbp_vm_attach(t[i], NULL, &vm[i])) ||
		    (err = rbp_bpf_sampler_watch(s, t[i], vm[i]))) {
			fprintf(stderr, "bench_oncpu: pid %s: %s\n", argv[3 + i], rbp_strerror(err));
			return 1;
		}
	struct rusage ru0;
	getrusage(RUSAGE_SELF, &ru0);   /* the sampling's own CPU from here */
	/* as rbp_sample_loop does: read every 50 ms, refresh threads every 250 ms */
	struct timespec period = { 0, 50 * 1000000L };
	long reads = (long)(atof(argv[1]) * 20);
	for (long i = 0; i < reads; i++) {
		nanosleep(&period, NULL);
		if (i % 5 == 4)
			rbp_bpf_sampler_refresh(s);
		rbp_bpf_sampler_read(s, &stacks, on_sample, &samples);
	}
	rbp_bpf_sampler_stats(s, &st);
	getrusage(RUSAGE_SELF, &ru);
	printf("samples %llu errors %llu watched %llu dropped %llu runs %llu run_ns %llu user %.3f sys %.3f "
	       "loop_cpu %.3f\n",
	       (unsigned long long)samples, (unsigned long long)st.decode_errors,
	       (unsigned long long)st.k.watched, (unsigned long long)st.k.dropped,
	       (unsigned long long)st.k.runs, (unsigned long long)st.k.run_ns, secs(ru.ru_utime),
	       secs(ru.ru_stime), secs(ru.ru_utime) + secs(ru.ru_stime) - secs(ru0.ru_utime) -
	       secs(ru0.ru_stime));
	rbp_bpf_sampler_close(s);
	rbp_stacks_free(&stacks);
	for (int i = 0; i < n; i++) {
		rbp_vm_free(vm[i]);
		rbp_target_close(t[i]);
	}
	free(t);
	free(vm);
	return 0;
}
