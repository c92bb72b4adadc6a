/*
 * trace_write.c - the tracer's records turned into slices on tracks, written
 * as Perfetto protobuf or Chrome JSON.
 *
 * Records of one thread are in time order; the writer replays them against
 * one stack per fiber.  A return closes the topmost frame of its kind
 * (RETURN a Ruby method, C_RETURN the C method of that id, B_RETURN a
 * block), closing whatever sits above it first: a frame whose return event
 * never came (should the VM skip one) ends there instead of corrupting the
 * rest.  A return with no frame of its kind on the stack belongs to a frame
 * entered before the window (before the reset, or overwritten in the ring):
 * a first pass collects those per fiber, and the second pass opens them at
 * the start of the window, outermost first.  Frames still open at the end
 * are closed at the save time.  So every slice is balanced, whatever the
 * window cut.
 *
 * Tracks (Perfetto track uuids; JSON tids, synthetic ones for non-thread
 * tracks):
 *   the process;  GC phases (child of the process: "GC marking" from
 *   GC_START to GC_END_MARK, "GC sweeping" to GC_END_SWEEP);
 *   per thread: its track (methods, blocks, and GC steps as slices nested
 *   under the frame that triggered them), one child track per other fiber,
 *   and a "GVL" child track of states (3.2+).
 *
 * The events' names and their encoding are trace_emit.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ktrace.h"
#include "trace_emit.h"
#include "trace_write.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/pb.h"
#include "util/vec.h"

/* --- GC phases ----------------------------------------------------------- */

static int gc_cmp(const void *a, const void *b)
{
	const struct gc_mark *x = a, *y = b;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int collect_gc(struct writer *wr)
{
	for (size_t i = 0; i < wr->tr->nthreads; i++) {
		const struct rbt_thread_window *w = &wr->tr->threads[i];
		for (size_t j = 0; j < w->n; j++) {
			unsigned k = RBT_KIND(w->recs[j].v);
			if (k != RBT_GC_START && k != RBT_GC_END_MARK && k != RBT_GC_END_SWEEP)
				continue;
			if (rbp_grow(&wr->gc, &wr->capgc, wr->ngc + 1, sizeof(*wr->gc)))
				return -1;
			wr->gc[wr->ngc++] = (struct gc_mark){ w->recs[j].t, k };
		}
	}
	if (wr->ngc)   /* qsort(NULL, 0, ...) is undefined */
		qsort(wr->gc, wr->ngc, sizeof(*wr->gc), gc_cmp);
	return 0;
}

/* Phase at ts: the last transition at or before it (0: none seen). */
static unsigned gc_phase_at(const struct writer *wr, uint64_t ts)
{
	size_t lo = 0, hi = wr->ngc;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (wr->gc[mid].ts <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? wr->gc[lo - 1].kind : 0;
}

/* The name of the GC step starting at record i: what it did. */
static uint64_t gc_step_iid(const struct writer *wr, const struct rbt_thread_window *w, size_t i)
{
	unsigned before = gc_phase_at(wr, w->recs[i].t);
	int mark = before == RBT_GC_START, sweep = before == RBT_GC_END_MARK;

	for (size_t j = i + 1; j < w->n; j++) {
		unsigned k = RBT_KIND(w->recs[j].v);
		if (k == RBT_GC_START || k == RBT_GC_END_MARK)
			mark = 1;
		else if (k == RBT_GC_END_SWEEP)
			sweep = 1;
		else
			break;
	}
	return (mark ? N_GC_MARK : sweep ? N_GC_SWEEP : N_GC) + 1;
}

static void emit_gc_track(struct writer *wr)
{
	struct track t = { .uuid = wr->next_uuid++, .jtid = -1 };
	unsigned open = 0;  /* N_GC_MARKING, N_GC_SWEEPING, or 0 */

	if (!wr->ngc)
		return;
	rbt_emit_track(wr, &t, 1, 0, "GC");
	for (size_t i = 0; i < wr->ngc; i++) {
		uint64_t ts = wr->gc[i].ts;
		unsigned k = wr->gc[i].kind;
		if (k == RBT_GC_START) {
			if (open)
				rbt_emit(wr, &t, ts, EV_END, 0, NULL);
			rbt_emit(wr, &t, ts, EV_BEGIN, N_GC_MARKING + 1, NULL);
			open = N_GC_MARKING;
		} else if (k == RBT_GC_END_MARK) {
			if (open)
				rbt_emit(wr, &t, ts, EV_END, 0, NULL);
			else {
				rbt_emit(wr, &t, wr->tr->start_ns, EV_BEGIN, N_GC_MARKING + 1, NULL);
				rbt_emit(wr, &t, ts, EV_END, 0, NULL);
			}
			rbt_emit(wr, &t, ts, EV_BEGIN, N_GC_SWEEPING + 1, NULL);
			open = N_GC_SWEEPING;
		} else {
			if (!open)
				rbt_emit(wr, &t, wr->tr->start_ns, EV_BEGIN, N_GC_SWEEPING + 1, NULL);
			rbt_emit(wr, &t, ts, EV_END, 0, NULL);
			open = 0;
		}
	}
	if (open)
		rbt_emit(wr, &t, wr->tr->end_ns, EV_END, 0, NULL);
}

/* --- replaying one thread ---------------------------------------------- */

static struct fiber *fiber_of(struct writer *wr, uint64_t key)
{
	uint64_t idx;

	if (rbp_hmap_get(&wr->fiber_idx, key ? key : 1, &idx))
		return &wr->fibers[idx - 1];
	if (rbp_grow(&wr->fibers, &wr->capfibers, wr->nfibers + 1, sizeof(*wr->fibers)) ||
	    rbp_hmap_put(&wr->fiber_idx, key ? key : 1, wr->nfibers + 1)) {
		wr->err = ENOMEM;
		return NULL;
	}
	struct fiber *f = &wr->fibers[wr->nfibers++];
	memset(f, 0, sizeof(*f));
	f->key = key;
	return f;
}

static void fibers_free(struct writer *wr)
{
	for (size_t i = 0; i < wr->nfibers; i++) {
		free(wr->fibers[i].st);
		free(wr->fibers[i].pre);
	}
	free(wr->fibers);
	wr->fibers = NULL;
	wr->nfibers = wr->capfibers = 0;
	rbp_hmap_clear(&wr->fiber_idx);
}

/* The fiber's track, described on first use. */
static struct track *fiber_track(struct writer *wr, struct fiber *f)
{
	if (f->key == wr->w->root_fiber)
		return &wr->thread_tr;
	if (!f->tr.written) {
		char name[96];
		f->tr.uuid = wr->next_uuid++;
		f->tr.jtid = -(int64_t)f->tr.uuid;
		snprintf(name, sizeof(name), "fiber %" PRIu64 " (thread %d)", f->key, (int)wr->w->tid);
		rbt_emit_track(wr, &f->tr, wr->thread_tr.uuid, 0, name);
	}
	return &f->tr;
}

static int push_frame(struct writer *wr, struct frame **st, size_t *n, size_t *cap, struct frame fr)
{
	if (rbp_grow(st, cap, *n + 1, sizeof(**st))) {
		wr->err = ENOMEM;
		return -1;
	}
	(*st)[(*n)++] = fr;
	return 0;
}

/*
 * A return of frame kind `kind` (and for C frames, iid) at ts: close
 * frames down to the matching one.  None on the stack: a frame entered
 * before the window; pass 1 remembers it.
 */
static void pop_frame(struct writer *wr, struct fiber *f, uint64_t ts, struct frame want, int out)
{
	size_t i = f->n;

	while (i > 0) {
		const struct frame *fr = &f->st[i - 1];
		if (fr->kind == want.kind && (want.kind != F_CFUNC || fr->iid == want.iid))
			break;
		i--;
	}
	if (!i) {
		if (!out)
			push_frame(wr, &f->pre, &f->npre, &f->cappre, want);
		i = 1;  /* close all */
		if (!f->n)
			return;
	}
	while (f->n >= i) {
		if (out)
			rbt_emit(wr, fiber_track(wr, f), ts, EV_END, 0, NULL);
		f->n--;
		if (!f->n)
			break;
	}
}

static uint64_t frame_iid(struct writer *wr, unsigned k, uint64_t id)
{
	return k == RBT_B_CALL || k == RBT_B_RETURN ? block_iid(wr, id) : method_iid(wr, id);
}

/* GVL state changes (3.2+) on the thread's GVL track. */
static void gvl_event(struct writer *wr, unsigned k, uint64_t ts, int *open)
{
	uint64_t iid = (k == RBT_GVL_READY ? N_GVL_WAIT : k == RBT_GVL_RESUMED ? N_GVL_RUN : N_GVL_RELEASED) + 1;

	if (!wr->gvl_tr.written) {
		wr->gvl_tr.uuid = wr->next_uuid++;
		wr->gvl_tr.jtid = -(int64_t)wr->gvl_tr.uuid;
		char name[64];
		snprintf(name, sizeof(name), "GVL (thread %d)", (int)wr->w->tid);
		rbt_emit_track(wr, &wr->gvl_tr, wr->thread_tr.uuid, 0, name);
	}
	if (*open)
		rbt_emit(wr, &wr->gvl_tr, ts, EV_END, 0, NULL);
	rbt_emit(wr, &wr->gvl_tr, ts, EV_BEGIN, iid, NULL);
	*open = 1;
}

/* The scheduler state a kernel event puts the thread in (an iid). */
static uint64_t sched_iid(const struct writer *wr, const struct rbk_event *ev)
{
	static const int of_state[] = {
		[RBK_STATE_NONE] = N_SWITCHED_OUT, [RBK_RUNNABLE] = N_RUNNABLE, [RBK_SLEEPING] = N_SLEEPING,
		[RBK_BLOCKED] = N_BLOCKED, [RBK_STOPPED] = N_STOPPED, [RBK_DEAD] = N_DEAD,
	};

	if (ev->kind == RBK_SCHED_SWITCH_IN)
		return cpu_iid(wr, ev->cpu);
	if (ev->kind == RBK_SCHED_WAKEUP)
		return N_RUNNABLE + 1;
	return (uint64_t)(ev->state < sizeof(of_state) / sizeof(of_state[0]) ? of_state[ev->state] : N_SWITCHED_OUT) + 1;
}

/*
 * A scheduler event: the thread's "sched" track changes state.  *woken
 * remembers a wakeup that came while the thread still ran: the kernel's
 * wakeup event (sched_waking) can precede the switch-out of a thread that
 * was woken while going to sleep, and then that switch-out starts
 * "runnable", not "sleeping".  Any syscall event or switch-in forgets it.
 */
static void sched_event(struct writer *wr, const struct rbk_event *ev, uint64_t *state, int *woken)
{
	uint64_t iid = sched_iid(wr, ev);

	if (ev->kind == RBK_SCHED_WAKEUP && *state >= cpu_iid(wr, 0)) {
		*woken = 1;
		return;  /* a wakeup of a running thread: no change yet */
	}
	if (ev->kind == RBK_SCHED_SWITCH_OUT && *woken && (ev->state == RBK_SLEEPING || ev->state == RBK_BLOCKED))
		iid = N_RUNNABLE + 1;
	*woken = 0;
	if (iid == *state)
		return;
	if (!wr->sched_tr.written) {
		char name[64];
		wr->sched_tr.uuid = wr->next_uuid++;
		wr->sched_tr.jtid = -(int64_t)wr->sched_tr.uuid;
		snprintf(name, sizeof(name), "sched (thread %d)", (int)wr->w->tid);
		rbt_emit_track(wr, &wr->sched_tr, wr->thread_tr.uuid, 0, name);
	}
	if (*state)
		rbt_emit(wr, &wr->sched_tr, ev->ts_ns, EV_END, 0, NULL);
	rbt_emit(wr, &wr->sched_tr, ev->ts_ns, EV_BEGIN, iid, NULL);
	*state = iid;
}

/* A syscall enter or exit: a slice on the current fiber's track, nested by time. */
static void syscall_event(struct writer *wr, struct fiber *f, const struct rbk_event *ev, int out)
{
	if (ev->kind == RBK_SYS_ENTER) {
		struct frame fr = { F_SYSCALL, sys_iid(wr, ev->nr_or_ret) };
		wr->used[fr.iid] = 1;
		if (!push_frame(wr, &f->st, &f->n, &f->cap, fr) && out)
			rbt_emit(wr, fiber_track(wr, f), ev->ts_ns, EV_BEGIN, fr.iid, NULL);
		return;
	}
	for (size_t i = f->n; i > 0; i--)
		if (f->st[i - 1].kind == F_SYSCALL) {
			for (; f->n >= i && f->n; f->n--)
				if (out)
					rbt_emit(wr, fiber_track(wr, f), ev->ts_ns, EV_END, 0,
					     f->n == i ? &(struct ev_arg){ "ret", ev->nr_or_ret } : NULL);
			return;
		}
	/* an exit whose enter was before the window: left out */
}

/*
 * The kernel events of window w: [*lo, *hi) of wr->kidx, those of its
 * thread id between the window's start and the thread's end.  One native
 * thread may have run several Ruby threads (Ruby caches native threads), so
 * a thread id alone does not say which window an event belongs to.
 */
static void kernel_range(const struct writer *wr, const struct rbt_thread_window *w, uint64_t start,
			 size_t *lo, size_t *hi)
{
	const struct rbk_event *kev = wr->tr->kev;
	uint64_t end = UINT64_MAX;
	pid_t tid = w->tid;
	size_t a = 0, b = wr->tr->nkev;

	for (size_t i = w->n; i-- > 0;)
		if (RBT_KIND(w->recs[i].v) == RBT_THREAD_END) {
			end = w->recs[i].t;
			break;
		}

	while (a < b) {
		size_t m = (a + b) / 2;
		if (kev[wr->kidx[m]].tid < tid)
			a = m + 1;
		else
			b = m;
	}
	while (a < wr->tr->nkev && kev[wr->kidx[a]].tid == tid && kev[wr->kidx[a]].ts_ns < start)
		a++;
	*lo = a;
	while (a < wr->tr->nkev && kev[wr->kidx[a]].tid == tid && kev[wr->kidx[a]].ts_ns <= end)
		a++;
	*hi = a;
}

/*
 * Replay thread window w: out == 0 is pass 1 (frames entered before the
 * window, names used), out == 1 writes the events.
 */
static void replay(struct writer *wr, const struct rbt_thread_window *w, int out)
{
	struct fiber *cur = fiber_of(wr, w->root_fiber);
	uint64_t start = w->lost && w->n ? w->recs[0].t : wr->tr->start_ns, end = wr->tr->end_ns;
	uint64_t sched = 0;
	int gvl_open = 0, woken = 0;
	size_t kj, khi;

	if (!cur)
		return;
	kernel_range(wr, w, start, &kj, &khi);
	if (out) {
		if (w->n && w->recs[w->n - 1].t > end)
			end = w->recs[w->n - 1].t;
		if (w->lost)
			rbt_emit(wr, &wr->thread_tr, start, EV_INSTANT, N_LOST + 1, &(struct ev_arg){ "lost", (int64_t)w->lost });
		/* frames entered before the window, outermost first */
		for (size_t i = 0; i < wr->nfibers; i++) {
			struct fiber *f = &wr->fibers[i];
			for (size_t j = f->npre; j-- > 0;) {
				if (push_frame(wr, &f->st, &f->n, &f->cap, f->pre[j]))
					return;
				rbt_emit(wr, fiber_track(wr, f), start, EV_BEGIN, f->pre[j].iid, NULL);
			}
		}
	}
	for (size_t i = 0; (i < w->n || kj < khi) && !wr->err; i++) {
		/* the kernel's events of this thread merged in by time */
		if (kj < khi && (i >= w->n || wr->tr->kev[wr->kidx[kj]].ts_ns < w->recs[i].t)) {
			const struct rbk_event *ev = &wr->tr->kev[wr->kidx[kj++]];
			if (ev->kind == RBK_SYS_ENTER || ev->kind == RBK_SYS_EXIT) {
				syscall_event(wr, cur, ev, out);
				woken = 0;
			} else if (out)
				sched_event(wr, ev, &sched, &woken);
			else
				wr->used[sched_iid(wr, ev)] = 1;
			if (ev->ts_ns > end)
				end = ev->ts_ns;
			i--;
			continue;
		}
		uint64_t ts = w->recs[i].t, arg = RBT_ARG(w->recs[i].v);
		unsigned k = RBT_KIND(w->recs[i].v);
		struct frame fr = { F_METHOD, 0 };
		switch (k) {
		case RBT_CALL: case RBT_C_CALL: case RBT_B_CALL: case RBT_GC_ENTER:
			fr.kind = k == RBT_CALL ? F_METHOD : k == RBT_C_CALL ? F_CFUNC : k == RBT_B_CALL ? F_BLOCK : F_GC;
			fr.iid = k == RBT_GC_ENTER ? gc_step_iid(wr, w, i) : frame_iid(wr, k, arg);
			wr->used[fr.iid] = 1;
			if (push_frame(wr, &cur->st, &cur->n, &cur->cap, fr))
				return;
			if (out)
				rbt_emit(wr, fiber_track(wr, cur), ts, EV_BEGIN, fr.iid, NULL);
			break;
		case RBT_RETURN: case RBT_C_RETURN: case RBT_B_RETURN: case RBT_GC_EXIT:
			fr.kind = k == RBT_RETURN ? F_METHOD : k == RBT_C_RETURN ? F_CFUNC : k == RBT_B_RETURN ? F_BLOCK : F_GC;
			fr.iid = k == RBT_GC_EXIT ? N_GC + 1 : frame_iid(wr, k, arg);
			wr->used[fr.iid] = 1;
			pop_frame(wr, cur, ts, fr, out);
			break;
		case RBT_FIBER:
			if (!(cur = fiber_of(wr, arg)))
				return;
			break;
		case RBT_THREAD_END:
			end = ts;
			break;
		case RBT_GVL_READY: case RBT_GVL_RESUMED: case RBT_GVL_SUSPENDED:
			if (out)
				gvl_event(wr, k, ts, &gvl_open);
			break;
		default:
			break;
		}
	}
	if (!out) {
		/* pass 2 starts again from empty stacks (plus the frames before) */
		for (size_t i = 0; i < wr->nfibers; i++)
			wr->fibers[i].n = 0;
		return;
	}
	for (size_t i = 0; i < wr->nfibers; i++) {
		struct fiber *f = &wr->fibers[i];
		for (; f->n; f->n--)
			rbt_emit(wr, fiber_track(wr, f), end, EV_END, 0, NULL);
	}
	if (gvl_open)
		rbt_emit(wr, &wr->gvl_tr, end, EV_END, 0, NULL);
	if (sched)
		rbt_emit(wr, &wr->sched_tr, end, EV_END, 0, NULL);
}

static void thread_tracks(struct writer *wr, const struct rbt_thread_window *w)
{
	memset(&wr->thread_tr, 0, sizeof(wr->thread_tr));
	memset(&wr->gvl_tr, 0, sizeof(wr->gvl_tr));
	memset(&wr->sched_tr, 0, sizeof(wr->sched_tr));
	wr->thread_tr.uuid = wr->next_uuid++;
	wr->thread_tr.jtid = w->tid;
	wr->w = w;
}

/* Order of kernel events: by thread, then by time (their index). */
static const struct rbk_event *kev_sort;

static int kidx_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	pid_t tx = kev_sort[x].tid, ty = kev_sort[y].tid;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x < y ? -1 : x > y;
}

int rbt_write(FILE *f, const struct rbt_trace *tr, enum rbt_format fmt)
{
	struct writer wr = { .f = f, .fmt = fmt, .tr = tr, .next_uuid = 2 };
	int err;

	wr.niids = NFIXED + 2 * tr->nlabels + 1 + NSYS + NCPU;
	wr.used = calloc(wr.niids + 1, 1);
	wr.block_names = calloc(tr->nlabels + 1, sizeof(char *));
	wr.kidx = malloc((tr->nkev + 1) * sizeof(size_t));
	wr.json_names = calloc(wr.niids + 1, sizeof(char *));
	if (!wr.used || !wr.block_names || !wr.kidx || !wr.json_names || collect_gc(&wr)) {
		wr.err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < NFIXED; i++)
		wr.used[i + 1] = 1;
	for (size_t i = 0; i < tr->nkev; i++)
		wr.kidx[i] = i;
	kev_sort = tr->kev;
	qsort(wr.kidx, tr->nkev, sizeof(size_t), kidx_cmp);
	/* pass 1 over every thread: names used (for the interned data) */
	for (size_t i = 0; i < tr->nthreads; i++) {
		thread_tracks(&wr, &tr->threads[i]);
		replay(&wr, &tr->threads[i], 0);
		fibers_free(&wr);
	}
	rbt_emit_header(&wr);
	wr.next_uuid = 2;
	emit_gc_track(&wr);
	for (size_t i = 0; i < tr->nthreads && !wr.err; i++) {
		const struct rbt_thread_window *w = &tr->threads[i];
		const char *name = w->name ? w->name : w->main ? "main" : NULL;
		thread_tracks(&wr, w);
		rbt_emit_track(&wr, &wr.thread_tr, 0, w->tid, name ? name : "thread");
		replay(&wr, w, 0);
		replay(&wr, w, 1);
		fibers_free(&wr);
	}
	if (fmt == RBT_JSON)
		rbt_out_str(&wr, "\n]}\n");
	rbt_out_flush(&wr, 1);
	if (!wr.err && fflush(f))
		wr.err = errno ? errno : EIO;
out:
	err = wr.err;
	free(wr.used);
	if (wr.block_names)
		for (size_t i = 0; i <= tr->nlabels; i++)
			free(wr.block_names[i]);
	free(wr.block_names);
	for (size_t i = 0; i < NSYS + NCPU; i++)
		free(wr.num_names[i]);
	free(wr.kidx);
	if (wr.json_names)
		for (size_t i = 0; i <= wr.niids; i++)
			free(wr.json_names[i]);
	free(wr.json_names);
	free(wr.gc);
	rbp_pb_free(&wr.out);
	rbp_pb_free(&wr.pk);
	rbp_pb_free(&wr.te);
	rbp_pb_free(&wr.da);
	fibers_free(&wr);
	if (err) {
		errno = err;   /* why writing failed, for the caller's words */
		return err == ENOMEM ? RBP_ENOMEM : RBP_EIO;
	}
	return RBP_OK;
}
