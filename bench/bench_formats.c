/*
 * bench_formats.c - time to write each output format for a profile of
 * 1,000,000 samples (10,000 distinct stacks, depth 10 to 60, 4 threads),
 * built synthetically so the figure does not depend on a target.
 * Consecutive samples of a thread keep their stack 80 % of the time, as in
 * real programs (this matters for the chrome timeline).  Output goes to a
 * counting stream, not to disk.  Prints: format, CPU seconds, bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "output/output.h"
#include "profile/profile.h"

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static ssize_t count_write(void *cookie, const char *buf, size_t n)
{
	*(long *)cookie += (long)n;
	return (ssize_t)n;
}

static int build(struct rbp_profile *p, size_t n_samples)
{
	uint32_t leaves[10000], threads[4];
	char label[64], path[64];

	if (rbp_profile_init(p))
		return -1;
	srand(42);
	for (int t = 0; t < 4; t++) {
		snprintf(label, sizeof(label), "worker-%d", t);
		if (rbp_profile_thread(p, 1000, 1000 + t, label, &threads[t]))
			return -1;
	}
	for (int s = 0; s < 10000; s++) {
		uint32_t node = 0, id;
		int depth = 10 + rand() % 51;
		for (int d = 0; d < depth; d++) {
			int fn = d < 5 ? d : rand() % 400;
			snprintf(label, sizeof(label), "App::Module%d::Klass%d#method_%d", fn % 7, fn % 13, fn);
			snprintf(path, sizeof(path), "/srv/app/lib/module%d/klass%d.rb", fn % 7, fn % 13);
			if (rbp_profile_frame(p, label, path, 10 + fn % 90, 5, fn % 9 ? 0 : 1, &id) ||
			    rbp_profile_child(p, node, id, &node))
				return -1;
		}
		leaves[s] = node;
	}
	uint32_t cur[4] = { leaves[0], leaves[1], leaves[2], leaves[3] };
	for (size_t i = 0; i < n_samples; i++) {
		if (rand() % 5 == 0)
			cur[i % 4] = leaves[rand() % 10000];
		if (rbp_profile_add(p, i * 2500000ull, threads[i % 4], cur[i % 4], 0))
			return -1;
	}
	p->meta.rate_hz = 100;
	p->meta.duration_ns = n_samples * 10000000ull / 4;
	p->meta.ruby_version = "3.1.2";
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
	struct rbp_profile p;
	struct rbp_output_opts oo = { .title = "bench" };
	double t0 = cpu_now();

	if (build(&p, n)) {
		fprintf(stderr, "bench_formats: out of memory\n");
		return 1;
	}
	printf("%-18s %8.3f s   (%zu samples, %zu nodes, %zu frames)\n", "build profile",
	       cpu_now() - t0, p.n_samples, p.n_nodes, p.n_frames);
	for (const struct rbp_format *f = rbp_formats; f->name; f++) {
		long size = 0;
		cookie_io_functions_t io = { .write = count_write };
		FILE *out = fopencookie(&size, "w", io);
		if (!out)
			return 1;
		t0 = cpu_now();
		int err = f->write(&p, &oo, out);
		fflush(out);
		double dt = cpu_now() - t0;
		fclose(out);
		printf("%-18s %8.3f s   %10ld bytes%s\n", f->name, dt, size, err ? "  (error)" : "");
	}
	rbp_profile_free(&p);
	return 0;
}
