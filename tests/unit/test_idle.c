/*
 * Which samples are of threads waiting for work (left out unless --idle):
 * the waits where servers idle, Kernel#sleep only shallow and off the main
 * thread, and threads that never worked; and the view without them.
 */
#include "harness.h"
#include "profile/profile.h"

int main(void)
{
	struct rbp_profile p, v;
	uint32_t f, node, a, b, c;
	size_t dropped = 0;

	TEST("pool and server waits are idle; request waits are not") {
		CHECK(rbp_waiting_for_work("Thread::Mutex#sleep", "Object#caller", 5, 0));
		CHECK(rbp_waiting_for_work("IO.select", "Object#caller", 3, 1));
		CHECK(rbp_waiting_for_work("NIO::Selector#select", "Object#caller", 9, 0));
		CHECK(!rbp_waiting_for_work("Thread#join", "Object#caller", 9, 0));   /* a request's parallel calls */
		/* the main thread joining its workers (puma's worker, after booting) */
		CHECK(rbp_waiting_for_work("Thread#join", "Object#caller", 9, 1));
		CHECK(rbp_waiting_for_work("Thread#value", "Object#caller", 2, 1));
		CHECK(!rbp_waiting_for_work("Process.wait", "Object#caller", 9, 0));
		CHECK(!rbp_waiting_for_work("IO#wait_readable", "Object#caller", 3, 0));
		/* puma's keep-alive wait for a connection's next request */
		CHECK(rbp_waiting_for_work("IO#wait_readable", "Puma::Client#reset", 12, 0));
		CHECK(!rbp_waiting_for_work("IO#wait_readable", NULL, 1, 0));
		CHECK(!rbp_waiting_for_work("IO#wait_readable", "Net::Protocol#rbuf_fill", 30, 0));
		CHECK(!rbp_waiting_for_work("Monitor#wait_for_cond", "Object#caller", 3, 0));
		CHECK(!rbp_waiting_for_work("PG::Connection#exec", "Object#caller", 40, 0));
	}
	TEST("Kernel#sleep: idle shallow in a background thread, not in a request or main") {
		CHECK(rbp_waiting_for_work("Kernel#sleep", "Object#caller", 2, 0));
		CHECK(rbp_waiting_for_work("Kernel#sleep", "Object#caller", 4, 0));
		CHECK(!rbp_waiting_for_work("Kernel#sleep", "Object#caller", 5, 0));
		CHECK(!rbp_waiting_for_work("Kernel#sleep", "Object#caller", 2, 1));
	}
	if (rbp_profile_init(&p))
		return 1;
	TEST("a thread that never worked is idle whole; one that worked keeps its waits") {
		CHECK(rbp_profile_frame(&p, "x", "/a.rb", 1, 1, RBP_PFRAME_RUBY, &f) == 0);
		CHECK(rbp_profile_child(&p, 0, f, &node) == 0);
		CHECK(rbp_profile_thread(&p, 1, 1, "worker", &a) == 0);
		CHECK(rbp_profile_thread(&p, 1, 2, "waiter", &b) == 0);
		CHECK(rbp_profile_thread(&p, 1, 3, "pool", &c) == 0);
		CHECK(rbp_profile_add(&p, 1, a, node, RBP_SAMPLE_GVL) == 0);
		CHECK(rbp_profile_add(&p, 2, a, node, 0) == 0);             /* its sleep: kept */
		CHECK(rbp_profile_add(&p, 1, b, node, 0) == 0);
		CHECK(rbp_profile_add(&p, 2, b, node, 0) == 0);
		CHECK(rbp_profile_add(&p, 1, c, node, RBP_SAMPLE_ONCPU) == 0);
		CHECK(rbp_profile_add(&p, 2, c, node, RBP_SAMPLE_IDLE) == 0); /* a pool wait */
		CHECK(rbp_profile_mark_idle_threads(&p) == 3);
		CHECK(!(p.sample_flags[1] & RBP_SAMPLE_IDLE));
		CHECK((p.sample_flags[2] & RBP_SAMPLE_IDLE) && (p.sample_flags[3] & RBP_SAMPLE_IDLE));
	}
	TEST("the view without idle samples shares the tree, not the samples") {
		CHECK(rbp_profile_view_without(&p, RBP_SAMPLE_IDLE, &v, &dropped) == 0);
		CHECK(dropped == 3 && v.n_samples == 3 && p.n_samples == 6);
		CHECK(v.nodes == p.nodes && v.samples != p.samples);
		CHECK(v.samples[0].thread == a && v.samples[1].thread == a && v.samples[2].thread == c);
		rbp_profile_view_free(&v);
	}
	rbp_profile_free(&p);
	if (rbp_profile_init(&p))
		return 1;
	TEST("a master that woke in 1 of 100 samples is a waiter, wake-up included; a 10 % worker is not") {
		uint32_t m, w, f_work, n_work;
		CHECK(rbp_profile_frame(&p, "IO#wait_readable", "<cfunc>", 0, 0, RBP_PFRAME_CFUNC, &f) == 0);
		CHECK(rbp_profile_child(&p, 0, f, &node) == 0);
		CHECK(rbp_profile_frame(&p, "PostsController#index", "/app.rb", 3, 1, RBP_PFRAME_RUBY, &f_work) == 0);
		CHECK(rbp_profile_child(&p, 0, f_work, &n_work) == 0);
		CHECK(rbp_profile_thread(&p, 1, 1, "master", &m) == 0);
		CHECK(rbp_profile_thread(&p, 1, 2, "worker", &w) == 0);
		for (int i = 0; i < 100; i++) {
			/* the master caught once at its wake-up (the old rule: never idle then) */
			CHECK(rbp_profile_add(&p, (uint64_t)i, m, node, i == 50 ? RBP_SAMPLE_GVL : 0) == 0);
			CHECK(rbp_profile_add(&p, (uint64_t)i, w, i % 10 ? node : n_work,
					      i % 10 ? 0 : RBP_SAMPLE_ONCPU) == 0);
		}
		uint8_t waiter[2] = { 9, 9 };
		CHECK(rbp_profile_waiters(&p, p.n_samples, waiter) == 0);
		CHECK(waiter[m] == 1 && waiter[w] == 0);
		CHECK(rbp_profile_mark_idle_threads(&p) == 100);   /* the master whole */
		CHECK(p.sample_flags[100] & RBP_SAMPLE_IDLE);      /* its wake-up (sample 2 x 50) too */
		for (size_t i = 1; i < p.n_samples; i += 2)
			CHECK(!(p.sample_flags[i] & RBP_SAMPLE_IDLE));   /* the worker's waits are work */
	}
	rbp_profile_free(&p);
	if (rbp_profile_init(&p))
		return 1;
	TEST("runnable in a wait (woken, waiting for a CPU) is not work; runnable elsewhere is") {
		uint32_t n_sleep, n_calc, f2, napper, cruncher;
		CHECK(rbp_profile_frame(&p, "Kernel#sleep", "", 0, 0, RBP_PFRAME_CFUNC, &f) == 0);
		CHECK(rbp_profile_child(&p, 0, f, &n_sleep) == 0);
		CHECK(rbp_profile_frame(&p, "BCrypt::Engine.__bc_crypt", "", 0, 0, RBP_PFRAME_CFUNC, &f2) == 0);
		CHECK(rbp_profile_child(&p, 0, f2, &n_calc) == 0);
		CHECK(rbp_profile_thread(&p, 1, 1, "napper", &napper) == 0);
		CHECK(rbp_profile_thread(&p, 1, 2, "cruncher", &cruncher) == 0);
		for (int i = 0; i < 100; i++) {
			/* on a loaded machine a woken napper is runnable a fifth of the time */
			CHECK(rbp_profile_add(&p, (uint64_t)i, napper, n_sleep, i % 5 ? 0 : RBP_SAMPLE_ONCPU) == 0);
			/* C work without the GVL */
			CHECK(rbp_profile_add(&p, (uint64_t)i, cruncher, n_calc, i % 5 ? 0 : RBP_SAMPLE_ONCPU) == 0);
		}
		uint8_t waiter[2] = { 9, 9 };
		CHECK(rbp_profile_waiters(&p, p.n_samples, waiter) == 0);
		CHECK(waiter[napper] == 1 && waiter[cruncher] == 0);
		CHECK(rbp_blocking_wait("IO#wait_readable") && !rbp_blocking_wait("PG::Connection#exec"));
	}
	rbp_profile_free(&p);
	return harness_report();
}
