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
		CHECK(rbp_waiting_for_work("Thread::Mutex#sleep", 5, 0));
		CHECK(rbp_waiting_for_work("IO.select", 3, 1));
		CHECK(rbp_waiting_for_work("NIO::Selector#select", 9, 0));
		CHECK(!rbp_waiting_for_work("Thread#join", 9, 0));   /* a request's parallel calls */
		CHECK(!rbp_waiting_for_work("Process.wait", 9, 0));
		CHECK(!rbp_waiting_for_work("IO#wait_readable", 3, 0));
		CHECK(!rbp_waiting_for_work("Monitor#wait_for_cond", 3, 0));
		CHECK(!rbp_waiting_for_work("PG::Connection#exec", 40, 0));
	}
	TEST("Kernel#sleep: idle shallow in a background thread, not in a request or main") {
		CHECK(rbp_waiting_for_work("Kernel#sleep", 2, 0));
		CHECK(rbp_waiting_for_work("Kernel#sleep", 4, 0));
		CHECK(!rbp_waiting_for_work("Kernel#sleep", 5, 0));
		CHECK(!rbp_waiting_for_work("Kernel#sleep", 2, 1));
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
	return harness_report();
}
