/*
 * trace.c - RbPeek::Trace, an in-process flight recorder of every method
 * call, GC step and GVL change of a Ruby process (plus, through ktrace.h,
 * its syscalls and scheduler states).
 *
 * The workload: a hook runs on every call and return (tens of millions a
 * second), a save happens rarely (a slow request).  So the hook does as
 * little as possible and everything else waits for the save:
 *
 *   - one event hook (rb_add_event_hook) for call/return, C call/return
 *     and optionally block call/return; it reads the thread's ring from a
 *     thread-local pointer, turns (owner class, method id) into a small
 *     method id through an open-addressing table (the VM passes both for C
 *     methods; rb_frame_method_id_and_class reads them from the frame for
 *     Ruby methods and blocks), and stores a 16-byte
 *     record {cycle counter, kind | id << 8} at ring[head++ & mask];
 *   - the kind is the bit number of Ruby's event flag (one tzcnt);
 *   - rings are per thread, a power of two of records, and keep the newest
 *     records: a long-running process never grows;
 *   - classes in the method table and the rings' Thread objects are marked
 *     (so pinned: neither freed nor moved by compaction), which makes
 *     symbolizing at save time safe;
 *   - the window is [last reset, save]: reset only remembers each ring's
 *     head and the time, it never touches the hooks;
 *   - timestamps are rdtsc on x86-64 with an invariant TSC, converted to
 *     CLOCK_MONOTONIC at save time by a two-point calibration (start,
 *     save); elsewhere clock_gettime(CLOCK_MONOTONIC).
 *
 * Exceptions: Ruby fires RETURN for every Ruby frame an exception or throw
 * unwinds (before popping it, so the frame still names the method) and
 * C_RETURN for C frames, and the writer rebuilds balanced slices by kind
 * (trace_write.c).  Fibers: a FIBER
 * record (the fiber's object_id) marks each switch, the writer gives each
 * fiber a track.  GC: internal events (no Ruby calls allowed there) only
 * push records into an already attached ring.  GVL (3.2+): the internal
 * thread event hook, which may run without the GVL, again only pushes into
 * the calling thread's own ring.  Kernel streams: opened by start(),
 * reset by reset(), drained at save and merged in by the writer.
 *
 * Threading: everything but the GVL hook runs holding the GVL, so the
 * method table and the ring list need no locks.  A ring belongs to one
 * native thread (its only writer); it is freed only after that thread's
 * THREAD_END cleared its thread-local pointer.  start() bumps a generation
 * number, and a ring from an older generation is reset by its own thread
 * at its next event, so buffer sizes can change between runs.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <ruby.h>
#include <ruby/debug.h>
#include <ruby/thread.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "ktrace.h"
#include "trace_rec.h"
#include "trace_write.h"
#include "util/err.h"

#define RBT_MAX_METHODS (1u << 22)  /* beyond: id 0, "(unknown)" */
#define RBT_MAX_DEAD 16             /* rings of finished threads kept */
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* One thread's ring. */
struct rbt_ring {
	struct rbt_rec *recs;    /* cap records, NULL when released */
	uint64_t mask;           /* cap - 1 */
	uint64_t head;           /* records ever written (next slot: head & mask) */
	uint64_t reset_head;     /* head at the last reset (window start) */
	uint64_t gen;            /* generation (start() call) it was set up in */
	pid_t tid;
	VALUE thread;            /* the Ruby Thread (marked), Qnil when unknown */
	uint64_t root_fiber;     /* fiber key of its first events */
	int dead;                /* its thread ended (thread-local pointer cleared) */
	int main;                /* the main thread */
	struct rbt_ring *next;
};

/* The method table: (owner, id) -> small id, and back. */
struct rbt_slot {
	VALUE klass;             /* owner (Qnil: unknown) */
	ID mid;                  /* method name (0: unknown); method names are immortal IDs */
	uint64_t id;             /* 0: empty slot */
};
struct rbt_method {
	VALUE klass;             /* as in rbt_slot */
	ID mid;
};

static struct {
	int running;
	int use_tsc;             /* timestamps are TSC ticks */
	uint64_t gen;
	uint64_t cap;            /* records per ring (power of two) */
	int c_calls, blocks, gc, gvl;
	int null_hook;           /* benchmark: install a method hook that does nothing */
	struct rbk_trace *kt;    /* kernel streams (syscalls, scheduler), or NULL */
	char kt_why[256];        /* why they are off ("" when on or not asked for) */
	uint64_t reset_t;        /* time of the last reset (raw units) */
	uint64_t cal_t;          /* calibration: raw time ... */
	uint64_t cal_ns;         /* ... and CLOCK_MONOTONIC at start() */
	struct rbt_ring *rings;  /* newest first */
	struct rbt_slot *slots;  /* 1 << slot_bits slots */
	unsigned slot_bits;
	struct rbt_method *methods; /* methods[id - 1] */
	size_t nmethods, capmethods;
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	rb_internal_thread_event_hook_t *gvl_hook;
#endif
} g;

static __thread struct rbt_ring *tls_ring __attribute__((tls_model("initial-exec")));

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t now(void)
{
#if defined(__x86_64__)
	if (LIKELY(g.use_tsc))
		return __rdtsc();
#endif
	return mono_ns();
}

/* Whether the CPU's TSC ticks at a constant rate through sleep states. */
static int tsc_usable(void)
{
#if defined(__x86_64__)
	char line[4096];
	int ok = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5)) {
			ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
			break;
		}
	fclose(f);
	return ok;
#else
	return 0;
#endif
}

/*
 * A (raw time, CLOCK_MONOTONIC) pair read as close together as we can: the
 * tightest of a few tries (a preemption between the reads would put the
 * whole trace off by its length).
 */
static void time_pair(uint64_t *t, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 16; i++) {
		uint64_t a = now(), m = mono_ns(), b = now();
		if (b - a < best) {
			best = b - a;
			*t = a + (b - a) / 2;
			*ns = m;
		}
	}
}

/* --- the method table ------------------------------------------------ */

static inline size_t slot_of(VALUE klass, ID mid)
{
	uint64_t h = ((uint64_t)klass ^ ((uint64_t)mid << 24)) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> (64 - g.slot_bits));
}

static int slots_grow(void)
{
	unsigned bits = g.slot_bits ? g.slot_bits + 1 : 12;
	struct rbt_slot *old = g.slots, *ns = calloc((size_t)1 << bits, sizeof(*ns));
	size_t oldn = g.slot_bits ? (size_t)1 << g.slot_bits : 0;

	if (!ns)
		return -1;
	g.slots = ns;
	g.slot_bits = bits;
	for (size_t i = 0; i < oldn; i++) {
		if (!old[i].id)
			continue;
		size_t j = slot_of(old[i].klass, old[i].mid), m = ((size_t)1 << bits) - 1;
		while (ns[j].id)
			j = (j + 1) & m;
		ns[j] = old[i];
	}
	free(old);
	return 0;
}

static __attribute__((noinline)) uint64_t intern_slow(VALUE klass, ID mid)
{
	if (g.nmethods >= RBT_MAX_METHODS)
		return 0;
	if ((g.nmethods + 1) * 2 > ((size_t)1 << g.slot_bits) && slots_grow())
		return 0;
	if (g.nmethods == g.capmethods) {
		size_t ncap = g.capmethods ? g.capmethods * 2 : 1024;
		struct rbt_method *nm = realloc(g.methods, ncap * sizeof(*nm));
		if (!nm)
			return 0;
		g.methods = nm;
		g.capmethods = ncap;
	}
	g.methods[g.nmethods] = (struct rbt_method){ klass, mid };
	uint64_t id = ++g.nmethods;
	size_t i = slot_of(klass, mid), m = ((size_t)1 << g.slot_bits) - 1;
	while (g.slots[i].id)
		i = (i + 1) & m;
	g.slots[i] = (struct rbt_slot){ klass, mid, id };
	return id;
}

static inline uint64_t intern(VALUE klass, ID mid)
{
	size_t m = ((size_t)1 << g.slot_bits) - 1;

	for (size_t i = slot_of(klass, mid);; i = (i + 1) & m) {
		const struct rbt_slot *s = &g.slots[i];
		if (LIKELY(s->klass == klass && s->mid == mid && s->id))
			return s->id;
		if (!s->id)
			return intern_slow(klass, mid);
	}
}

/* --- rings ------------------------------------------------------------- */

static inline void push_at(struct rbt_ring *r, uint64_t t, unsigned kind, uint64_t arg)
{
	uint64_t h = r->head;
	struct rbt_rec *p = &r->recs[h & r->mask];

	p->t = t;
	p->v = RBT_REC(kind, arg);
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

static inline void push(struct rbt_ring *r, unsigned kind, uint64_t arg)
{
	push_at(r, now(), kind, arg);
}

/* The key of the fiber running now: its object_id, stable and never reused. */
static uint64_t fiber_key(void)
{
	return NUM2ULL(rb_obj_id(rb_fiber_current()));
}

/* Free the recs of finished threads beyond the newest RBT_MAX_DEAD. */
static void prune_dead(void)
{
	int kept = 0;

	for (struct rbt_ring **pp = &g.rings; *pp;) {
		struct rbt_ring *r = *pp;
		if (r->dead && ++kept > RBT_MAX_DEAD) {
			*pp = r->next;
			free(r->recs);
			free(r);
			continue;
		}
		pp = &r->next;
	}
}

/*
 * The calling thread's ring, made or reset for this generation.  Only from
 * normal (not internal) event hooks: it may allocate Ruby objects.
 */
static __attribute__((noinline)) struct rbt_ring *attach(void)
{
	struct rbt_ring *r = tls_ring;

	if (!g.running)
		return NULL;
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return NULL;
		r->thread = Qnil;
		r->next = g.rings;
		g.rings = r;
		tls_ring = r;
	}
	if (!r->recs || r->mask + 1 != g.cap) {
		free(r->recs);
		r->mask = 0;
		if (!(r->recs = malloc(g.cap * sizeof(*r->recs))))
			return NULL;
		r->mask = g.cap - 1;
	}
	r->head = r->reset_head = 0;
	r->tid = (pid_t)syscall(SYS_gettid);
	r->thread = rb_thread_current();
	r->main = r->thread == rb_thread_main();
	r->root_fiber = fiber_key();
	r->gen = g.gen;
	return r;
}

static inline struct rbt_ring *ring(void)
{
	struct rbt_ring *r = tls_ring;

	if (UNLIKELY(!r || r->gen != g.gen))
		return attach();
	return r;
}

/* --- hooks --------------------------------------------------------------- */

/*
 * Method events.  For C methods the VM passes the method's id and owner;
 * for Ruby methods and blocks it passes 0 and rb_frame_method_id_and_class
 * finds them from the current frame (the callee's on a call, the returning
 * one on a return, also when an exception unwinds it).
 *
 * on_call is the fast path: a C method whose (owner, id) sits in its home
 * slot, on a thread whose ring is attached, time from the TSC; it makes no
 * call, so it saves no registers.  Everything else (a Ruby method's frame lookup, a probe
 * past the home slot, a new method, a ring to attach) goes to
 * on_call_slow, a tail call.
 */
static __attribute__((noinline)) void on_call_slow(rb_event_flag_t ev, ID mid, VALUE klass)
{
	struct rbt_ring *r = ring();

	if (UNLIKELY(!r))
		return;
	if (!mid && !rb_frame_method_id_and_class(&mid, &klass))
		mid = 0, klass = Qnil;
	push(r, (unsigned)__builtin_ctz(ev), intern(klass, mid));
}

static void on_call(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
#if defined(__x86_64__)
	struct rbt_ring *r = tls_ring;
	const struct rbt_slot *s;

	if (UNLIKELY(!mid || !r || r->gen != g.gen || !g.use_tsc))
		return on_call_slow(ev, mid, klass);
	s = &g.slots[slot_of(klass, mid)];
	if (UNLIKELY(s->klass != klass || s->mid != mid))   /* mid != 0: never an empty slot */
		return on_call_slow(ev, mid, klass);
	push_at(r, __rdtsc(), (unsigned)__builtin_ctz(ev), s->id);
#else
	on_call_slow(ev, mid, klass);
#endif
}

/* Does nothing: the benchmark's measure of the VM's own cost per event. */
static void on_call_null(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
}

static void on_misc(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	struct rbt_ring *r = ring();

	if (!r)
		return;
	if (ev == RUBY_EVENT_FIBER_SWITCH) {
		push(r, RBT_FIBER, fiber_key());
	} else if (ev == RUBY_EVENT_THREAD_END && !r->main) {
		push(r, RBT_THREAD_END, 0);
		r->dead = 1;
		tls_ring = NULL;
		prune_dead();
	}
}

/* GC: internal events, no Ruby API allowed; only an attached ring. */
static void on_gc(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	struct rbt_ring *r = tls_ring;

	if (r && r->gen == g.gen && g.running)
		push(r, (unsigned)__builtin_ctz(ev), 0);
}

#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
/* GVL changes (3.2+), possibly without the GVL: the thread's own ring only. */
static void on_gvl(rb_event_flag_t ev, const rb_internal_thread_event_data_t *d, void *u)
{
	struct rbt_ring *r = tls_ring;
	unsigned kind = ev == RUBY_INTERNAL_THREAD_EVENT_READY ? RBT_GVL_READY
		: ev == RUBY_INTERNAL_THREAD_EVENT_RESUMED ? RBT_GVL_RESUMED : RBT_GVL_SUSPENDED;

	if (r && r->gen == g.gen && r->recs && g.running)
		push(r, kind, 0);
}
#endif

static void install(void)
{
	rb_event_flag_t ev = RUBY_EVENT_CALL | RUBY_EVENT_RETURN;

	if (g.c_calls)
		ev |= RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN;
	if (g.blocks)
		ev |= RUBY_EVENT_B_CALL | RUBY_EVENT_B_RETURN;
	rb_add_event_hook(g.null_hook ? on_call_null : on_call, ev, Qnil);
	rb_add_event_hook(on_misc, RUBY_EVENT_FIBER_SWITCH | RUBY_EVENT_THREAD_END, Qnil);
	if (g.gc)
		rb_add_event_hook(on_gc, RUBY_INTERNAL_EVENT_GC_START | RUBY_INTERNAL_EVENT_GC_END_MARK |
					 RUBY_INTERNAL_EVENT_GC_END_SWEEP | RUBY_INTERNAL_EVENT_GC_ENTER |
					 RUBY_INTERNAL_EVENT_GC_EXIT, Qnil);
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	if (g.gvl)
		g.gvl_hook = rb_internal_thread_add_event_hook(on_gvl,
			RUBY_INTERNAL_THREAD_EVENT_READY | RUBY_INTERNAL_THREAD_EVENT_RESUMED |
			RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, NULL);
#endif
}

static void uninstall(void)
{
	rb_remove_event_hook(on_call);
	rb_remove_event_hook(on_call_null);
	rb_remove_event_hook(on_misc);
	rb_remove_event_hook(on_gc);
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	if (g.gvl_hook)
		rb_internal_thread_remove_event_hook(g.gvl_hook);
	g.gvl_hook = NULL;
#endif
}

/* After fork only the forking thread exists: the other rings can go. */
static void after_fork_child(void)
{
	for (struct rbt_ring *r = g.rings; r; r = r->next)
		if (r != tls_ring && !r->dead) {
			r->dead = 1;
			free(r->recs);
			r->recs = NULL;
			r->head = r->reset_head = 0;
		}
	g.gen++;  /* the forking thread re-attaches: new tid, empty ring */
	prune_dead();
	rbk_close(g.kt);  /* the parent's kernel streams; the child has none */
	g.kt = NULL;
	snprintf(g.kt_why, sizeof(g.kt_why), "kernel streams are not inherited by a forked child");
}

/* --- GC marking: the classes of the method table and the threads -------- */

static void mark_all(void *p)
{
	for (size_t i = 0; i < g.nmethods; i++) {
		rb_gc_mark(g.methods[i].klass);
	}
	for (struct rbt_ring *r = g.rings; r; r = r->next)
		if (!NIL_P(r->thread))
			rb_gc_mark(r->thread);
}

static const rb_data_type_t marker_type = {
	.wrap_struct_name = "rbpeek_trace_marker",
	.function = { .dmark = mark_all },
	.flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

/* --- Ruby API -------------------------------------------------------------- */

/* Open the kernel streams; without the privilege warn once and go on. */
static void kernel_open(void)
{
	int rc = rbk_open(&g.kt, 0, g.kt_why, sizeof(g.kt_why));

	if (rc) {
		g.kt = NULL;
		if (!*g.kt_why)
			snprintf(g.kt_why, sizeof(g.kt_why), "kernel streams: %s", strerror(-rc));
		rb_warn("rbpeek: no syscalls or scheduler states in the trace: %s", g.kt_why);
	}
}

/*
 * _start(buffer_size, c_calls, blocks, gc, gvl, kernel, null_hook): the
 * Ruby side checked types; null_hook (for bench/trace) installs a method
 * hook that records nothing.
 */
static VALUE t_start(int argc, VALUE *argv, VALUE mod)
{
	VALUE size, c_calls, blocks, gc, gvl, kernel, null_hook;

	rb_scan_args(argc, argv, "7", &size, &c_calls, &blocks, &gc, &gvl, &kernel, &null_hook);
	uint64_t want = NUM2ULL(size), cap = 16;

	if (g.running)
		rb_raise(rb_eRuntimeError, "RbPeek::Trace is already running (stop it first)");
	if (want < 16 || want > (1ull << 32))
		rb_raise(rb_eArgError, "buffer_size must be between 16 and 2**32 events, not %llu",
			 (unsigned long long)want);
	while (cap < want)
		cap *= 2;
	if (!g.slots && slots_grow())
		rb_raise(rb_eNoMemError, "RbPeek::Trace: out of memory");
	g.cap = cap;
	g.c_calls = RTEST(c_calls);
	g.blocks = RTEST(blocks);
	g.gc = RTEST(gc);
	g.gvl = RTEST(gvl);
	g.null_hook = RTEST(null_hook);
	g.kt_why[0] = 0;
	if (RTEST(kernel))
		kernel_open();
	g.gen++;
	time_pair(&g.cal_t, &g.cal_ns);
	g.reset_t = g.cal_t;
	g.running = 1;
	install();
	if (!ring()) {
		g.running = 0;
		uninstall();
		rbk_close(g.kt);
		g.kt = NULL;
		rb_raise(rb_eNoMemError, "RbPeek::Trace: cannot allocate a %llu-event buffer",
			 (unsigned long long)cap);
	}
	return Qtrue;
}

static VALUE t_stop(VALUE mod)
{
	if (!g.running)
		return Qfalse;
	uninstall();
	g.running = 0;
	rbk_close(g.kt);
	g.kt = NULL;
	return Qtrue;
}

/* Mark the start of the window: remember every ring's head and the time. */
static VALUE t_reset(VALUE mod)
{
	g.reset_t = now();
	if (g.kt)
		rbk_reset(g.kt);
	for (struct rbt_ring *r = g.rings; r; r = r->next)
		if (r->gen == g.gen)
			r->reset_head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	return Qnil;
}

/* ns per time stamp (rdtsc or clock_gettime), for bench/trace. */
static VALUE t_clock_cost(VALUE mod)
{
	uint64_t a = mono_ns(), sum = 0;
	const int n = 1000000;

	for (int i = 0; i < n; i++)
		sum += now();
	uint64_t b = mono_ns();
	__asm__ volatile("" : : "r"(sum));
	return rb_float_new((double)(b - a) / n);
}

static VALUE t_running_p(VALUE mod)
{
	return g.running ? Qtrue : Qfalse;
}

/* {threads:, buffer_size:, methods:, events:, lost:} for tests and users. */
static VALUE t_stats(VALUE mod)
{
	VALUE h = rb_hash_new();
	uint64_t threads = 0, events = 0, lost = 0;

	for (struct rbt_ring *r = g.rings; r; r = r->next) {
		if (r->gen != g.gen || !r->recs)
			continue;
		uint64_t n = r->head - r->reset_head;
		threads++;
		events += n > r->mask + 1 ? r->mask + 1 : n;
		lost += n > r->mask + 1 ? n - r->mask - 1 : 0;
	}
	rb_hash_aset(h, ID2SYM(rb_intern("threads")), ULL2NUM(threads));
	rb_hash_aset(h, ID2SYM(rb_intern("buffer_size")), ULL2NUM(g.cap));
	rb_hash_aset(h, ID2SYM(rb_intern("methods")), ULL2NUM(g.nmethods));
	rb_hash_aset(h, ID2SYM(rb_intern("events")), ULL2NUM(events));
	rb_hash_aset(h, ID2SYM(rb_intern("lost")), ULL2NUM(lost));
	rb_hash_aset(h, ID2SYM(rb_intern("tsc")), g.use_tsc ? Qtrue : Qfalse);
	rb_hash_aset(h, ID2SYM(rb_intern("kernel")), g.kt ? Qtrue : *g.kt_why ? rb_str_new_cstr(g.kt_why) : Qfalse);
	return h;
}

/* --- save ------------------------------------------------------------------ */

/* State of one save, freed by save_cleanup whatever happens. */
struct save {
	VALUE path;
	VALUE threads;           /* the Thread of each window (an Array, kept alive) */
	int fmt;
	struct rbt_trace tr;
	char **labels;
	char **names;            /* thread names, per window */
	char *process_name;
	FILE *f;
	struct rbk_event *kev;   /* drained kernel events */
	size_t nkev, capkev;
};

static int add_kev(void *ctx, const struct rbk_event *ev)
{
	struct save *s = ctx;

	if (s->nkev == s->capkev) {
		size_t ncap = s->capkev ? s->capkev * 2 : 4096;
		struct rbk_event *n = realloc(s->kev, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->kev = n;
		s->capkev = ncap;
	}
	s->kev[s->nkev++] = *ev;
	return 0;
}

/* Threads the kernel saw that have no ring (Ruby's timer thread, native threads). */
static size_t kernel_only_tids(const struct save *s, pid_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nkev && n < max; i++) {
		pid_t tid = s->kev[i].tid;
		int known = 0;
		for (struct rbt_ring *r = g.rings; r && !known; r = r->next)
			known = r->gen == g.gen && r->recs && r->tid == tid;
		for (size_t j = 0; j < n && !known; j++)
			known = out[j] == tid;
		if (!known)
			out[n++] = tid;
	}
	return n;
}

static char *comm_of(pid_t tid)
{
	char path[64], buf[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	if (!(f = fopen(path, "r")))
		return NULL;
	char *line = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!line)
		return NULL;
	buf[strcspn(buf, "\n")] = 0;
	return strdup(buf);
}

static char *str_dup(VALUE s)
{
	if (NIL_P(s) || !RB_TYPE_P(s, T_STRING))
		return NULL;
	char *d = malloc(RSTRING_LEN(s) + 1);
	if (d) {
		memcpy(d, RSTRING_PTR(s), RSTRING_LEN(s));
		d[RSTRING_LEN(s)] = 0;
	}
	return d;
}

static VALUE attached_object(VALUE klass)
{
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY  /* 3.2+ */
	return rb_class_attached_object(klass);
#else
	return rb_iv_get(klass, "__attached__");
#endif
}

/* "Klass#meth", "Klass.meth" for a singleton method of a class or module. */
static char *label_of(const struct rbt_method *m)
{
	VALUE owner = Qnil, klass = m->klass;
	const char *sep = "#";

	if ((RB_TYPE_P(klass, T_CLASS) || RB_TYPE_P(klass, T_MODULE))) {
		if (RB_TYPE_P(klass, T_CLASS) && FL_TEST(klass, FL_SINGLETON)) {
			VALUE att = attached_object(klass);
			if (RB_TYPE_P(att, T_CLASS) || RB_TYPE_P(att, T_MODULE)) {
				klass = att;
				sep = ".";
			}
		}
		owner = rb_class_path(klass);
	}
	VALUE name = m->mid ? rb_id2str(m->mid) : Qnil;
	VALUE s = NIL_P(owner) ? rb_str_new_cstr("") : rb_str_dup(owner);
	if (!NIL_P(owner))
		rb_str_cat_cstr(s, sep);
	if (NIL_P(name))
		rb_str_cat_cstr(s, "(unknown)");
	else
		rb_str_append(s, name);
	return str_dup(s);
}

/* Copy the window of ring r out, times in ns. */
static int copy_window(struct rbt_ring *r, struct rbt_thread_window *w, double ns_per_t)
{
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), cap = r->mask + 1;
	uint64_t lo = r->reset_head, n;

	if (head - lo > cap) {
		w->lost = head - lo - cap;
		lo = head - cap;
	}
	n = head - lo;
	if (!(w->recs = malloc((n ? n : 1) * sizeof(*w->recs))))
		return -1;
	for (uint64_t i = 0; i < n; i++) {
		struct rbt_rec rec = r->recs[(lo + i) & r->mask];
		int64_t d = (int64_t)(rec.t - g.cal_t);
		rec.t = (uint64_t)((int64_t)g.cal_ns + (int64_t)((double)d * ns_per_t));
		w->recs[i] = rec;
	}
	w->n = n;
	w->tid = r->tid;
	w->main = r->main;
	w->root_fiber = r->root_fiber;
	return 0;
}

/* The labels of the methods the windows use. */
static int make_labels(struct save *s)
{
	size_t n = g.nmethods + 1;

	if (!(s->labels = calloc(n, sizeof(char *))))
		return -1;
	for (size_t i = 0; i < s->tr.nthreads; i++) {
		const struct rbt_thread_window *w = &s->tr.threads[i];
		for (size_t j = 0; j < w->n; j++) {
			unsigned k = RBT_KIND(w->recs[j].v);
			uint64_t id = RBT_ARG(w->recs[j].v);
			if (k >= RBT_CALL && k <= RBT_B_RETURN && id && id < n && !s->labels[id]) {
				/* a copy: Ruby calls in label_of may let a thread grow the table */
				struct rbt_method m = g.methods[id - 1];
				s->labels[id] = label_of(&m);
			}
		}
	}
	s->tr.labels = (const char *const *)s->labels;
	s->tr.nlabels = n;
	return 0;
}

static VALUE save_body(VALUE arg)
{
	struct save *s = (struct save *)arg;
	uint64_t t, ns, nring = 0, k = 0;
	double ns_per_t = 1.0;

	time_pair(&t, &ns);
	if (g.use_tsc) {
		/* a short run calibrates badly: wait until 20 ms passed */
		while (ns - g.cal_ns < 20000000) {
			struct timespec d = { 0, 1000000 };
			nanosleep(&d, NULL);
			time_pair(&t, &ns);
		}
		ns_per_t = (double)(ns - g.cal_ns) / (double)(t - g.cal_t);
	}
	if (g.kt) {
		int rc = rbk_drain(g.kt, add_kev, s);
		if (rc)
			rb_warn("rbpeek: kernel events not read: %s", strerror(-rc));
	}
	pid_t extra[256];
	size_t nextra = kernel_only_tids(s, extra, sizeof(extra) / sizeof(extra[0]));
	for (struct rbt_ring *r = g.rings; r; r = r->next)
		nring += r->gen == g.gen && r->recs;
	s->tr.threads = calloc(nring + nextra + 1, sizeof(*s->tr.threads));
	s->names = calloc(nring + nextra + 1, sizeof(char *));
	if (!s->tr.threads || !s->names)
		rb_raise(rb_eNoMemError, "RbPeek::Trace.save: out of memory");
	for (struct rbt_ring *r = g.rings; r && k < nring; r = r->next) {
		if (r->gen != g.gen || !r->recs)
			continue;
		if (copy_window(r, &s->tr.threads[k], ns_per_t))
			rb_raise(rb_eNoMemError, "RbPeek::Trace.save: out of memory");
		rb_ary_push(s->threads, r->thread);
		s->tr.nthreads = ++k;
	}
	/*
	 * Ruby calls from here on: the records are copied already, and the
	 * rings are not walked again (a call may switch threads, and a thread
	 * that ends frees its ring); s->threads keeps the Thread objects.
	 */
	for (k = 0; k < s->tr.nthreads; k++) {
		VALUE th = rb_ary_entry(s->threads, (long)k);
		if (!NIL_P(th))
			s->names[k] = str_dup(rb_funcall(th, rb_intern("name"), 0));
		s->tr.threads[k].name = s->names[k];
	}
	for (size_t i = 0; i < nextra; i++) {
		struct rbt_thread_window *w = &s->tr.threads[s->tr.nthreads];
		if (!(w->recs = malloc(sizeof(*w->recs))))
			rb_raise(rb_eNoMemError, "RbPeek::Trace.save: out of memory");
		w->tid = extra[i];
		w->name = s->names[s->tr.nthreads] = comm_of(extra[i]);
		s->tr.nthreads++;
	}
	s->tr.kev = s->kev;
	s->tr.nkev = s->nkev;
	if (make_labels(s))
		rb_raise(rb_eNoMemError, "RbPeek::Trace.save: out of memory");
	s->process_name = str_dup(rb_gv_get("$0"));
	s->tr.process_name = s->process_name;
	s->tr.pid = getpid();
	s->tr.start_ns = g.cal_ns + (int64_t)((double)(int64_t)(g.reset_t - g.cal_t) * ns_per_t);
	s->tr.end_ns = g.cal_ns + (int64_t)((double)(int64_t)(t - g.cal_t) * ns_per_t);
	if (s->tr.start_ns < g.cal_ns)
		s->tr.start_ns = g.cal_ns;

	const char *path = StringValueCStr(s->path);
	if (!(s->f = fopen(path, "w")))
		rb_sys_fail(path);
	int rc = rbt_write(s->f, &s->tr, (enum rbt_format)s->fmt);
	int e = rc == RBP_ENOMEM ? ENOMEM : errno;
	if (fclose(s->f) && !rc) {
		rc = RBP_EIO;
		e = errno;
	}
	s->f = NULL;
	if (rc) {
		errno = e;
		rb_sys_fail(path);
	}
	return Qnil;
}

static VALUE save_cleanup(VALUE arg)
{
	struct save *s = (struct save *)arg;

	if (s->f)
		fclose(s->f);
	for (size_t i = 0; i < s->tr.nthreads; i++) {
		free(s->tr.threads[i].recs);
		free(s->names[i]);
	}
	free(s->tr.threads);
	free(s->names);
	if (s->labels)
		for (size_t i = 0; i < s->tr.nlabels; i++)
			free(s->labels[i]);
	free(s->labels);
	free(s->process_name);
	free(s->kev);
	return Qnil;
}

/* _save(path, format): format 0 Perfetto, 1 Chrome JSON. */
static VALUE t_save(VALUE mod, VALUE path, VALUE fmt)
{
	struct save s = { .path = path, .fmt = NUM2INT(fmt), .threads = rb_ary_new() };

	FilePathValue(s.path);
	if (!g.gen)
		rb_raise(rb_eRuntimeError, "RbPeek::Trace.save: nothing recorded (call RbPeek::Trace.start first)");
	rb_ensure(save_body, (VALUE)&s, save_cleanup, (VALUE)&s);
	RB_GC_GUARD(s.path);
	RB_GC_GUARD(s.threads);
	return path;
}

__attribute__((visibility("default"))) void Init_trace_ext(void)
{
	VALUE mRbPeek = rb_define_module("RbPeek");
	VALUE mTrace = rb_define_module_under(mRbPeek, "Trace");

	g.use_tsc = tsc_usable() && !getenv("RBPEEK_TRACE_NO_TSC");
	/* non-NULL data: the GC calls no dmark for a NULL one */
	rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &marker_type, &g));
	pthread_atfork(NULL, NULL, after_fork_child);
	rb_define_module_function(mTrace, "_start", t_start, -1);
	rb_define_module_function(mTrace, "_clock_cost", t_clock_cost, 0);
	rb_define_module_function(mTrace, "_save", t_save, 2);
	rb_define_module_function(mTrace, "stop", t_stop, 0);
	rb_define_module_function(mTrace, "reset", t_reset, 0);
	rb_define_module_function(mTrace, "running?", t_running_p, 0);
	rb_define_module_function(mTrace, "stats", t_stats, 0);
#ifdef RUBY_INTERNAL_THREAD_EVENT_READY
	rb_define_const(mTrace, "GVL_EVENTS", Qtrue);
#else
	rb_define_const(mTrace, "GVL_EVENTS", Qfalse);
#endif
}
