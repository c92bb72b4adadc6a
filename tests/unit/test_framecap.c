/*
 * test_framecap.c - the in-kernel frame copy (src/proc/framecap.c) on a
 * real child process with interpreter-like structures of its own: a
 * "thread" pointing to an "execution context" with a VM stack whose top
 * holds control frames, and a function probed with a uprobe.  Before each
 * call the child writes the call's number into its innermost frame and
 * passes it as the argument: every record must carry frames whose first
 * pc equals its argument (the copy is of the moment of the call, not
 * later).  Calls alternate between two contexts, as a fiber switch does
 * (th->ec changes): a shallow one, and one deeper than the copy's limit
 * (truncated).  Each frame's environment words must come along.
 *
 * Needs root and a kernel with uprobes and BPF events; otherwise "skip".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "self_probe.h"
#include "proc/framecap.h"
#include "proc/maps.h"
#include "proc/uprobe.h"
#include "util/err.h"

#include <pthread.h>

#define CALLS 400
#define CFP_SIZE 56
#define CFP_EP 32
#define DEEP 300                 /* frames in the deep context (> the copy's limit) */
#define STACK_WORDS 8192

struct fake_ec {
	uint64_t vm_stack, vm_stack_size, cfp, pad[5];
};
struct fake_thread {
	uint64_t pad[2];
	struct fake_ec *ec;           /* offset 16 */
};

static uint64_t stacks[2][STACK_WORDS];
static struct fake_ec ecs[2];
static struct fake_thread th;
static int go_fd[2];
static volatile long sink;

__attribute__((noinline)) long probe_me(long a, long b, long c)
{
	__asm__ volatile("" ::: "memory");
	return a + b + c;
}

/* Context k: n frames at the top of its stack; frame i's ep at word 16 + 4 i. */
static void setup_ec(int k, size_t n)
{
	uint64_t *s = stacks[k];
	uint64_t end = (uint64_t)(uintptr_t)(s + STACK_WORDS);

	ecs[k].vm_stack = (uint64_t)(uintptr_t)s;
	ecs[k].vm_stack_size = STACK_WORDS;
	ecs[k].cfp = end - n * CFP_SIZE;
	for (size_t i = 0; i < n; i++) {
		uint8_t *f = (uint8_t *)(uintptr_t)(ecs[k].cfp + i * CFP_SIZE);
		uint64_t *ep = s + 16 + 4 * i, pc = 1000 + i;
		memcpy(f, &pc, 8);
		memcpy(f + CFP_EP, &ep, 8);
		ep[-2] = 0x100 * (uint64_t)k + i, ep[-1] = 7, ep[0] = 0x5000 + i;
	}
}

static void child(void)
{
	char c;

	if (read(go_fd[0], &c, 1) != 1)
		_exit(1);
	for (long i = 0; i < CALLS; i++) {
		int k = (int)(i & 1);
		th.ec = &ecs[k];   /* a "fiber switch" */
		memcpy((void *)(uintptr_t)ecs[k].cfp, &i, 8);   /* innermost pc = the call's number */
		sink += probe_me(i, 0, 0);
		usleep(1000);   /* the reader drains every 10 ms: do not fill its rings */
	}
	pause();
	_exit(0);
}

struct seen {
	long records, bad_pc, bad_shape, bad_env, truncated, uprobe_samples;
	long lost;   /* records the kernel dropped (a ring full: the reader starved on a busy host) */
	pid_t pid;
};

static int on_record(void *ctx, const struct rbp_framecap_record *r)
{
	struct seen *sn = ctx;
	uint64_t pc0, pc1;
	int k = (int)(r->arg & 1);

	sn->records++;
	memcpy(&pc0, r->frames, 8);
	sn->bad_pc += r->n_frames < 2 || pc0 != r->arg;
	if (r->n_frames >= 2) {
		memcpy(&pc1, r->frames + CFP_SIZE, 8);
		sn->bad_pc += pc1 != 1001;
	}
	sn->bad_shape += r->tid != sn->pid || r->probe != 0 ||
			 r->cfp != ecs[k].cfp || r->n_frames != (k ? RBP_FRAMECAP_MAX_FRAMES : 3) ||
			 r->truncated != k;
	for (size_t i = 0; i < r->n_frames; i++)
		sn->bad_env += r->env[3 * i] != 0x100 * (uint64_t)k + i || r->env[3 * i + 1] != 7 ||
			       r->env[3 * i + 2] != 0x5000 + i;
	sn->truncated += r->truncated;
	return 0;
}

static int on_sample(void *ctx, const struct rbp_uprobe_sample *s)
{
	((struct seen *)ctx)->uprobe_samples++;
	return 0;
}

static void run(const struct rbp_uprobe_spec *spec, uint32_t pick, struct seen *sn)
{
	static const struct rbp_framecap_layout L = {
		.thread_ec = 16, .ec_vm_stack = 0, .ec_vm_stack_size = 8, .ec_cfp = 16,
		.cfp_size = CFP_SIZE, .cfp_ep = CFP_EP,
	};
	static const uint8_t arg_reg[1] = { 0 };
	struct rbp_framecap *c = NULL;
	struct rbp_uprobes *u = NULL;
	char why[512];
	pid_t pid;

	setup_ec(0, 3);          /* the child inherits them; the parent checks against them */
	setup_ec(1, DEEP);
	if (pipe(go_fd))
		return;
	if ((pid = fork()) == 0)
		child();
	sn->pid = pid;
	int err = rbp_framecap_open(&L, arg_reg, 1, 0, &c, why, sizeof(why));
	if (err)
		fprintf(stderr, "framecap: %s\n", why);
	CHECK_EQ_INT(err, RBP_OK);
	CHECK_EQ_INT(rbp_uprobes_open(pid, spec, 1, 1, &u), RBP_OK);
	if (c && u) {
		int fd = rbp_framecap_prog_fd(c, 0);
		uint64_t addr = (uint64_t)(uintptr_t)&th;
		CHECK_EQ_INT(rbp_uprobes_set_bpf(u, &fd), RBP_OK);
		CHECK_EQ_INT(rbp_framecap_set_threads(c, &pid, &addr, 1), RBP_OK);
		CHECK_EQ_INT(rbp_framecap_set_pick(c, pick), RBP_OK);
		CHECK(write(go_fd[1], "g", 1) == 1);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			rbp_uprobes_read(u, 10000, on_sample, sn);
			CHECK_EQ_INT(rbp_framecap_read(c, on_record, sn), RBP_OK);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (sn->uprobe_samples < CALLS && t.tv_sec - t0.tv_sec < 5);
		usleep(50000);
		rbp_framecap_read(c, on_record, sn);
		struct rbp_framecap_stats cs;
		rbp_framecap_stats(c, &cs);
		sn->lost = (long)cs.lost;
	}
	rbp_uprobes_close(u);
	rbp_framecap_close(c);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go_fd[0]), close(go_fd[1]);
}

/* ---- counting: one event for the whole process ------------------------- */

#define COUNT_THREADS 3   /* beside the main thread, each calling with its own argument */

static void *count_thread(void *arg)
{
	for (long i = 0; i < CALLS; i++)
		sink += probe_me((long)(intptr_t)arg, 0, 0);
	return NULL;
}

/* The child: on "go", COUNT_THREADS threads and the main thread call probe_me CALLS times. */
static void count_child(void)
{
	pthread_t t[COUNT_THREADS];
	char c;

	if (read(go_fd[0], &c, 1) != 1)
		_exit(1);
	for (long k = 0; k < COUNT_THREADS; k++)
		pthread_create(&t[k], NULL, count_thread, (void *)(intptr_t)(k + 1));
	count_thread((void *)(intptr_t)100);
	for (int k = 0; k < COUNT_THREADS; k++)
		pthread_join(t[k], NULL);
	pause();
	_exit(0);
}

struct counted {
	uint64_t per[COUNT_THREADS + 1], other;
};

static int on_count(void *ctx, uint64_t arg, uint64_t n)
{
	struct counted *ct = ctx;

	if (arg >= 1 && arg <= COUNT_THREADS)
		ct->per[arg - 1] += n;
	else if (arg == 100)
		ct->per[COUNT_THREADS] += n;
	else
		ct->other += n;
	return 0;
}

static void run_counting(const struct rbp_uprobe_spec *spec)
{
	static const struct rbp_framecap_layout L = {
		.thread_ec = 16, .ec_vm_stack = 0, .ec_vm_stack_size = 8, .ec_cfp = 16,
		.cfp_size = CFP_SIZE, .cfp_ep = CFP_EP,
	};
	static const uint8_t arg_reg[1] = { 0 };
	struct rbp_framecap *c = NULL;
	struct rbp_uprobes *u = NULL;
	struct counted ct = { { 0 }, 0 };
	uint64_t hits = 0, uncounted = 0;
	char why[512];
	pid_t pid;

	if (pipe(go_fd))
		return;
	if ((pid = fork()) == 0)
		count_child();
	int err = rbp_framecap_open(&L, arg_reg, 1, pid, &c, why, sizeof(why));
	if (err)
		fprintf(stderr, "framecap: %s\n", why);
	CHECK_EQ_INT(err, RBP_OK);
	if (c) {
		int fd = rbp_framecap_prog_fd(c, 0);
		CHECK_EQ_INT(rbp_uprobes_open_process(pid, spec, 1, &fd, &u), RBP_OK);
	}
	if (c && u) {
		struct rbp_uprobe_stats us;
		rbp_uprobes_stats(u, &us);
		CHECK_EQ_INT((int)us.events, 1);   /* one event, whatever the threads */
		CHECK(write(go_fd[1], "g", 1) == 1);
		for (int i = 0; i < 500 && hits < (COUNT_THREADS + 1) * CALLS; i++) {
			usleep(10000);
			CHECK_EQ_INT(rbp_framecap_totals(c, &hits, &uncounted), RBP_OK);
		}
		CHECK_EQ_INT(rbp_framecap_stop(c), RBP_OK);
		CHECK_EQ_INT(rbp_framecap_counts(c, on_count, &ct), RBP_OK);
		CHECK_EQ_INT((long)hits, (COUNT_THREADS + 1) * CALLS);
		CHECK_EQ_INT((long)uncounted, 0);
		for (int k = 0; k <= COUNT_THREADS; k++)
			CHECK_EQ_INT((long)ct.per[k], CALLS);   /* every thread's calls, by argument */
		CHECK_EQ_INT((long)ct.other, 0);
	}
	rbp_uprobes_close(u);
	rbp_framecap_close(c);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go_fd[0]), close(go_fd[1]);
}

int main(void)
{
	struct rbp_uprobe_spec spec;
	char exe[4096];

	if (rbp_uprobe_available() || geteuid() != 0) {
		printf("skip: needs root and the kernel's uprobe PMU\n");
		return harness_report();
	}
	if (self_probe_spec((const void *)&probe_me, exe, sizeof(exe), &spec))
		return 1;

	TEST("every call copied at the hit: frames, environments, fiber switch, truncation") {
		struct seen sn = { 0 };
		run(&spec, UINT32_MAX, &sn);
		CHECK_EQ_INT(sn.uprobe_samples, CALLS);   /* the uprobe's own samples still come */
		/* every call copied, or counted as dropped by the kernel; lost ones at most a quarter */
		CHECK(sn.records + sn.lost >= CALLS - 2);
		CHECK(sn.lost <= CALLS / 4);
		CHECK_EQ_INT(sn.bad_pc, 0);
		CHECK_EQ_INT(sn.bad_shape, 0);
		CHECK_EQ_INT(sn.bad_env, 0);
		CHECK(sn.truncated + sn.lost >= CALLS / 2 - 1);
	}
	TEST("pick 0: no copy, counts unchanged") {
		struct seen sn = { 0 };
		run(&spec, 0, &sn);
		CHECK_EQ_INT(sn.uprobe_samples, CALLS);
		CHECK_EQ_INT(sn.records, 0);
	}
	TEST("pick a quarter: about a quarter copied") {
		struct seen sn = { 0 };
		run(&spec, UINT32_MAX / 4, &sn);
		CHECK_EQ_INT(sn.uprobe_samples, CALLS);
		CHECK(sn.records > CALLS / 8 && sn.records < CALLS / 2);
		CHECK_EQ_INT(sn.bad_pc + sn.bad_shape + sn.bad_env, 0);
	}
	TEST("counting: one event for the process counts every thread's calls, by argument") {
		run_counting(&spec);
	}
	return harness_report();
}
