/*
 * test_trace_write.c - the tracer's writer (ext/rbpeek/trace_write.c) on
 * hand-made windows: the "sched" track of a thread built from kernel
 * events.  A thread that sleeps is sleeping until its wakeup, runnable
 * until it is switched in, then running; a wakeup that came while the
 * thread was still going to sleep (the kernel's sched_waking can precede
 * the switch-out) makes that switch-out runnable, not sleeping.  And a
 * failed write: RBP_EIO, with errno saying why.
 *
 * The writer comes from the tracer library (build/libtracer.a, not
 * librbpeek); the JSON output is read back.
 */
#include "harness.h"
#include "util/err.h"
#include "../../ext/rbpeek/ktrace.h"
#include "../../ext/rbpeek/trace_write.h"

#include <errno.h>
#include <stdlib.h>

#include <sys/syscall.h>

#define TID 4242

/* The names of the sched track's slices, in order, "|"-separated. */
static void sched_states(const char *json, char *out, size_t len)
{
	size_t at = 0;
	out[0] = 0;
	for (const char *p = strstr(json, "\"ph\":\"B\""); p; p = strstr(p + 1, "\"ph\":\"B\"")) {
		const char *ev = p;
		while (ev > json && *ev != '{') ev--;
		const char *end = strchr(p, '}');
		const char *tid = strstr(ev, "\"tid\":-");      /* synthetic tracks */
		const char *name = strstr(ev, "\"name\":\"");
		if (!end || !tid || tid > end || !name || name > end) continue;
		name += 8;
		const char *q = strchr(name, '"');
		at += (size_t)snprintf(out + at, len - at, "%s%.*s", at ? "|" : "", (int)(q - name), name);
		if (at >= len) break;
	}
}

static void run(const struct rbk_event *kev, size_t n, char *states, size_t len)
{
	struct rbt_rec recs[] = { { 5, RBT_REC(RBT_CALL, 1) }, { 1000, RBT_REC(RBT_RETURN, 1) } };
	const char *labels[] = { NULL, "T.io" };
	struct rbt_thread_window w = { .tid = TID, .main = 1, .recs = recs, .n = 2 };
	struct rbt_trace tr = { .pid = TID, .process_name = "test", .start_ns = 1, .end_ns = 2000,
	                        .threads = &w, .nthreads = 1, .labels = labels, .nlabels = 2,
	                        .kev = kev, .nkev = n };
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	CHECK_EQ_INT(rbt_write(f, &tr, RBT_JSON), RBP_OK);
	fclose(f);
	sched_states(buf ? buf : "", states, len);
	free(buf);
}

#define EV(ts, kind, state, x) { (ts), TID, 0, (kind), (state), (x) }

int main(void)
{
	char s[512];
	TEST("sched: sleeping, woken = runnable, switched in = running") {
		struct rbk_event kev[] = {
			EV(10, RBK_SYS_ENTER, 0, SYS_futex),
			EV(20, RBK_SCHED_SWITCH_OUT, RBK_SLEEPING, 0),
			EV(30, RBK_SCHED_WAKEUP, 0, 77),
			EV(40, RBK_SCHED_SWITCH_IN, 0, 0),
			EV(50, RBK_SYS_EXIT, 0, 0),
		};
		run(kev, 5, s, sizeof(s));
		CHECK_EQ_STR(s, "sleeping|runnable|running on CPU 0");
	}
	TEST("sched: woken while going to sleep = runnable, not sleeping") {
		struct rbk_event kev[] = {
			EV(10, RBK_SCHED_SWITCH_IN, 0, 0),
			EV(20, RBK_SYS_ENTER, 0, SYS_futex),
			EV(30, RBK_SCHED_WAKEUP, 0, 77),
			EV(40, RBK_SCHED_SWITCH_OUT, RBK_SLEEPING, 0),
			EV(50, RBK_SCHED_SWITCH_IN, 0, 0),
			EV(60, RBK_SYS_EXIT, 0, 0),
		};
		run(kev, 6, s, sizeof(s));
		CHECK_EQ_STR(s, "running on CPU 0|runnable|running on CPU 0");
	}
	TEST("sched: an early wakeup is forgotten at the next syscall") {
		struct rbk_event kev[] = {
			EV(10, RBK_SCHED_SWITCH_IN, 0, 0),
			EV(20, RBK_SYS_ENTER, 0, SYS_futex),
			EV(30, RBK_SCHED_WAKEUP, 0, 77),
			EV(40, RBK_SYS_EXIT, 0, 0),
			EV(50, RBK_SYS_ENTER, 0, SYS_futex),
			EV(60, RBK_SCHED_SWITCH_OUT, RBK_SLEEPING, 0),
			EV(70, RBK_SCHED_WAKEUP, 0, 77),
			EV(80, RBK_SCHED_SWITCH_IN, 0, 0),
		};
		run(kev, 8, s, sizeof(s));
		CHECK_EQ_STR(s, "running on CPU 0|sleeping|runnable|running on CPU 0");
	}
	TEST("sched: preempted = runnable") {
		struct rbk_event kev[] = {
			EV(10, RBK_SCHED_SWITCH_IN, 0, 0),
			EV(20, RBK_SCHED_SWITCH_OUT, RBK_RUNNABLE, 0),
			EV(30, RBK_SCHED_SWITCH_IN, 0, 0),
		};
		run(kev, 3, s, sizeof(s));
		CHECK_EQ_STR(s, "running on CPU 0|runnable|running on CPU 0");
	}
	TEST("write errors: RBP_EIO, errno saying why (the save raises that Errno)") {
		struct rbt_rec recs[] = { { 5, RBT_REC(RBT_CALL, 1) }, { 1000, RBT_REC(RBT_RETURN, 1) } };
		const char *labels[] = { NULL, "T.io" };
		struct rbt_thread_window w = { .tid = TID, .main = 1, .recs = recs, .n = 2 };
		struct rbt_trace tr = { .pid = TID, .start_ns = 1, .end_ns = 2000, .threads = &w,
		                        .nthreads = 1, .labels = labels, .nlabels = 2 };
		FILE *f = fopen("/dev/full", "w");
		CHECK(f != NULL);
		for (int fmt = RBT_PERFETTO; f && fmt <= RBT_JSON; fmt++) {
			errno = 0;
			CHECK_EQ_INT(rbt_write(f, &tr, (enum rbt_format)fmt), RBP_EIO);
			CHECK_EQ_INT(errno, ENOSPC);
			clearerr(f);
		}
		if (f)
			fclose(f);
	}
	return harness_report();
}
