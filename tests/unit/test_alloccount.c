/*
 * test_alloccount.c - what `rbpeek alloc` makes of allocation reports
 * (src/profile/alloccount.c), through the reader seam: a Ruby VM over a
 * memory image of a real process (tests/unit/images, see image_vm.h)
 * stands for the target, as test_labels does.
 *
 *  - approximate sites: a report's thread stack, read through the reader,
 *    becomes a sample whose stack is that thread's, with the class leaf on
 *    top; a thread that is not there gives the class leaf alone;
 *  - exact sites: the frames a kernel copy would hold (the same reads the
 *    eBPF program makes: th->ec, ec->cfp, the frames up to the stack's end
 *    and each frame's ep[-2..0]) decode to the same stack;
 *  - the sampling policy: pick follows the allocation rate (adapt_pick),
 *    the random draws follow pick, the token bucket (refill) bounds the
 *    stacks read, a copy without a token is dropped;
 *  - the tables: classes by exact count, sites with their main class.
 *
 * Run from the top of the tree (tests/run does).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "image_vm.h"
#include "profile/alloccount.h"
#include "util/err.h"

#define START 1000000000ull

/* The labels of a sample's stack, outermost first, '\n'-joined. */
static void sample_labels(const struct rbp_profile *p, size_t i, char *buf, size_t n)
{
	uint32_t ids[512];
	size_t depth = rbp_profile_stack(p, p->samples[i].node, ids, 512), at = 0;

	buf[0] = 0;
	for (size_t k = 0; k < depth && k < 512; k++)
		at += (size_t)snprintf(buf + at, at < n ? n - at : 0, "%s\n", p->frames[ids[k]].label);
}

/* The labels of thread th of st, outermost first, '\n'-joined, and leaf. */
static void thread_labels(const struct rbp_stacks *st, const struct rbp_thread *th,
			  const char *leaf, char *buf, size_t n)
{
	size_t at = 0;

	buf[0] = 0;
	for (size_t i = th->n_frames; i-- > 0;)
		at += (size_t)snprintf(buf + at, at < n ? n - at : 0, "%s\n",
				       st->frames[th->first_frame + i].label);
	snprintf(buf + at, at < n ? n - at : 0, "%s\n", leaf);
}

/* The deepest thread (the one with the most to compare). */
static const struct rbp_thread *deepest(const struct rbp_stacks *st)
{
	const struct rbp_thread *best = NULL;

	for (size_t i = 0; i < st->n_threads; i++)
		if (!st->threads[i].err &&
		    (!best || st->threads[i].n_frames > best->n_frames))
			best = &st->threads[i];
	return best;
}

static uint64_t rd64(struct rbp_reader *r, uint64_t addr, int *ok)
{
	uint64_t v = 0;
	if (rbp_read(r, addr, &v, 8))
		*ok = 0;
	return v;
}

/*
 * What the kernel's program copies at an allocation in thread th: its
 * control frames from ec->cfp to the stack's end (at most 256) and each
 * frame's three environment words, 0 where unreadable.  0 or -1.
 */
static int kernel_copy(struct image_vm *iv, uint64_t thread, uint8_t **frames, uint64_t **env,
		       size_t *n)
{
	struct rbp_framecap_layout L;
	struct rbp_reader *r = iv->t.mem;
	int ok = 1;

	rbp_vm_framecap_layout(iv->vm, &L);
	uint64_t ec = L.ec_embedded ? thread + (uint64_t)L.thread_ec :
		      rd64(r, thread + (uint64_t)L.thread_ec, &ok);
	uint64_t cfp = rd64(r, ec + (uint64_t)L.ec_cfp, &ok);
	uint64_t stack = rd64(r, ec + (uint64_t)L.ec_vm_stack, &ok);
	uint64_t size = rd64(r, ec + (uint64_t)L.ec_vm_stack_size, &ok);
	uint64_t end = stack + size * 8;

	if (!ok || cfp >= end || !L.cfp_size)
		return -1;
	*n = (size_t)((end - cfp) / L.cfp_size);
	if (*n > 256)
		*n = 256;
	*frames = calloc(*n, L.cfp_size);
	*env = calloc(*n * 3, 8);
	if (!*frames || !*env || rbp_read(r, cfp, *frames, *n * L.cfp_size))
		return -1;
	for (size_t i = 0; i < *n; i++) {
		uint64_t ep, w[3];
		memcpy(&ep, *frames + i * L.cfp_size + L.cfp_ep, 8);
		if (ep >= 16 && !rbp_read(r, ep - 16, w, sizeof(w)))
			memcpy(*env + 3 * i, w, sizeof(w));
	}
	return 0;
}

/* Both ways of taking a site, on one image. */
static void check_image(const char *file)
{
	static struct image_vm iv;
	struct rbp_stacks all = { 0 };
	struct rbp_alloc_count c;
	struct rbp_profile p;
	char path[200], name[200], want[8192], got[8192];
	size_t size;
	uint8_t *data;

	snprintf(path, sizeof(path), IMAGES "/%.100s", file);
	data = image_slurp(path, &size);
	snprintf(name, sizeof(name), "%.40s: loads, a thread with frames", file);
	const struct rbp_thread *th = NULL;
	TEST(name) {
		CHECK(data && !image_vm_open(&iv, data, size));
		CHECK(iv.vm && !rbp_vm_read_stacks(iv.vm, &all));
		CHECK((th = deepest(&all)) && th->n_frames > 2);
	}
	if (!th || rbp_profile_init(&p)) {
		rbp_stacks_free(&all);
		image_vm_close(&iv);
		free(data);
		return;
	}
	rbp_alloc_count_init(&c, iv.vm, &p, iv.t.pid, 1000);
	rbp_alloc_count_begin(&c, START);

	snprintf(name, sizeof(name), "%.40s: exact: a kernel-made copy decodes to the same stack", file);
	TEST(name) {
		uint8_t *frames = NULL;
		uint64_t *env = NULL;
		size_t n = 0;
		uint64_t samples = c.samples, allocs = c.allocs;
		CHECK(!kernel_copy(&iv, th->addr, &frames, &env, &n));
		struct rbp_frame_copy fc = { th->tid, frames, env, n };
		c.tokens = 1;
		CHECK_EQ_INT(rbp_alloc_count_copy(&c, &fc, START + 8000, 0, 0), RBP_OK);
		CHECK_EQ_INT(c.samples, samples + 1);
		CHECK_EQ_INT(c.allocs, allocs);   /* copies count no allocation: reports do */
		CHECK_EQ_INT(c.no_stack, 0);
		thread_labels(&all, th, "(hidden)", want, sizeof(want));
		got[0] = 0;
		if (p.n_samples)
			sample_labels(&p, p.n_samples - 1, got, sizeof(got));
		CHECK_EQ_STR(got, want);
		/* without a token the copy is dropped */
		CHECK_EQ_INT(rbp_alloc_count_copy(&c, &fc, START + 9000, 0, 1), RBP_OK);
		CHECK_EQ_INT(c.samples, samples + 1);
		CHECK_EQ_INT(c.truncated, 0);
		free(frames);
		free(env);
	}
	if (!th->tid) {   /* 2.7 keeps pthread_t only: its tid needs the C library's layout */
		printf("note: %s: no thread ids in the image: approximate sites not checked\n", file);
		goto done;
	}
	snprintf(name, sizeof(name), "%.40s: approximate: the report's stack read through the reader",
		 file);
	TEST(name) {
		c.tokens = 1;
		CHECK_EQ_INT(rbp_alloc_count_report(&c, th->tid, START + 5000, 0, 1), RBP_OK);
		CHECK_EQ_INT(c.allocs, 1);
		CHECK_EQ_INT(c.samples, 2);
		CHECK_EQ_INT(c.no_stack, 0);
		CHECK_EQ_INT(p.n_samples, 2);
		CHECK_EQ_INT(p.samples[1].t_ns, 5000);
		thread_labels(&all, th, "(hidden)", want, sizeof(want));
		sample_labels(&p, 1, got, sizeof(got));
		CHECK_EQ_STR(got, want);
		CHECK(c.tokens < 1);   /* the one token went */
	}

	snprintf(name, sizeof(name), "%.40s: no token, no stack; the class counted all the same", file);
	TEST(name) {
		CHECK_EQ_INT(rbp_alloc_count_report(&c, th->tid, START + 6000, 0, 1), RBP_OK);
		CHECK_EQ_INT(c.allocs, 2);
		CHECK_EQ_INT(c.samples, 2);
	}

	snprintf(name, sizeof(name), "%.40s: a thread that is not there: the class leaf alone", file);
	TEST(name) {
		c.tokens = 1;
		CHECK_EQ_INT(rbp_alloc_count_report(&c, 999999, START + 7000, 0x10, 1), RBP_OK);
		CHECK_EQ_INT(c.samples, 3);
		CHECK_EQ_INT(c.no_stack, 1);
		sample_labels(&p, 2, got, sizeof(got));
		CHECK_EQ_STR(got, "(anonymous)\n");
	}

	snprintf(name, sizeof(name), "%.40s: tables: classes by count, sites with their class", file);
	TEST(name) {
		struct rbp_alloc_tally *t = NULL;
		size_t n = 0;
		/* 3 more of 0x10: (anonymous) 4, (hidden) 2 */
		for (int i = 0; i < 3; i++)
			CHECK_EQ_INT(rbp_alloc_count_report(&c, th->tid, START, 0x10, 0), RBP_OK);
		CHECK_EQ_INT(rbp_alloc_tally_classes(&c, &t, &n), RBP_OK);
		CHECK_EQ_INT(n, 2);
		if (t && n == 2) {
			CHECK_EQ_STR(p.frames[t[0].key].label, "(anonymous)");
			CHECK_EQ_INT(t[0].n, 4);
			CHECK_EQ_STR(p.frames[t[1].key].label, "(hidden)");
			CHECK_EQ_INT(t[1].n, 2);
		}
		free(t);
		t = NULL;
		CHECK_EQ_INT(rbp_alloc_tally_sites(&c, &t, &n), RBP_OK);
		CHECK_EQ_INT(n, 2);   /* the thread's innermost frame (2 samples), none (1) */
		if (t && n == 2) {
			CHECK_EQ_STR(p.frames[t[0].key].label, all.frames[th->first_frame].label);
			CHECK_EQ_INT(t[0].n, 2);
			CHECK_EQ_STR(p.frames[t[0].cls].label, "(hidden)");
			CHECK_EQ_INT(t[0].cls_n, 2);
			CHECK_EQ_INT(t[1].key, UINT32_MAX);
			CHECK_EQ_STR(p.frames[t[1].cls].label, "(anonymous)");
		}
		free(t);
	}

	snprintf(name, sizeof(name), "%.40s: the random draws follow pick", file);
	TEST(name) {
		uint64_t before = c.samples;
		c.pick = 0;          /* never */
		c.tokens = 1e9;
		for (int i = 0; i < 1000; i++)
			rbp_alloc_count_report(&c, th->tid, START, 0, 1);
		CHECK_EQ_INT(c.samples, before);
		c.pick = UINT32_MAX / 4;   /* a quarter */
		for (int i = 0; i < 4000; i++)
			rbp_alloc_count_report(&c, th->tid, START, 0, 1);
		CHECK(c.samples - before > 850 && c.samples - before < 1150);
		CHECK_EQ_INT(c.read_errors, 0);
	}
done:
	rbp_alloc_count_free(&c);
	rbp_profile_free(&p);
	rbp_stacks_free(&all);
	image_vm_close(&iv);
	free(data);
}

/* The policy alone: no VM needed. */
static void check_policy(void)
{
	struct rbp_alloc_count c;

	TEST("adapt_pick: about rate stacks a second at the allocation rate") {
		rbp_alloc_count_init(&c, NULL, NULL, 1, 1000);
		rbp_alloc_count_begin(&c, START);
		CHECK_EQ_INT(c.pick, UINT32_MAX);   /* every stack until the rate is known */
		c.allocs = 100000;                  /* 100,000 a second: 1 in 100 */
		CHECK_EQ_INT(rbp_alloc_adapt_pick(&c, START + 1000000000ull),
			     (uint32_t)(0.01 * 4294967295.0));
		CHECK_EQ_INT(c.allocs_at_adapt, 100000);
		CHECK_EQ_INT(c.adapt_time, START + 1000000000ull);
		c.allocs += 10000;                  /* 10,000 in 100 ms: the same rate */
		CHECK_EQ_INT(rbp_alloc_adapt_pick(&c, START + 1100000000ull),
			     (uint32_t)(0.01 * 4294967295.0));
		c.allocs += 50;                     /* 500 a second: below the rate, every one */
		CHECK_EQ_INT(rbp_alloc_adapt_pick(&c, START + 1200000000ull), UINT32_MAX);
		CHECK_EQ_INT(rbp_alloc_adapt_pick(&c, START + 1200000000ull), UINT32_MAX);  /* no time */
		CHECK_EQ_INT(rbp_alloc_pick_for(1000, 200000.0), (uint32_t)(0.005 * 4294967295.0));
		CHECK_EQ_INT(rbp_alloc_pick_for(100000, 50000.0), UINT32_MAX);
		rbp_alloc_count_free(&c);
	}
	TEST("refill: rate tokens a second, at most a tenth of a second's worth") {
		rbp_alloc_count_init(&c, NULL, NULL, 1, 1000);
		rbp_alloc_count_begin(&c, START);
		CHECK(c.tokens == 1);
		c.tokens = 0;
		rbp_alloc_refill(&c, START + 5000000ull);   /* 5 ms at 1000/s */
		CHECK(c.tokens > 4.99 && c.tokens < 5.01);
		rbp_alloc_refill(&c, START + 10000000000ull);   /* 10 s: capped at 100 */
		CHECK(c.tokens == 100);
		CHECK_EQ_INT(c.token_time, START + 10000000000ull);
		rbp_alloc_count_free(&c);
		rbp_alloc_count_init(&c, NULL, NULL, 1, 5);   /* 5/s: the cap is 1, not 0.5 */
		rbp_alloc_count_begin(&c, START);
		rbp_alloc_refill(&c, START + 10000000000ull);
		CHECK(c.tokens == 1);
		rbp_alloc_count_free(&c);
	}
}

int main(void)
{
	static const char *const images[] = {
		"labels-2.7.img", "labels-3.1.img", "labels-3.2.11.img", "labels-3.3.img",
		"labels-3.4.img", "labels-4.0.img",
	};

	check_policy();
	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++)
		check_image(images[i]);
	return harness_report();
}
