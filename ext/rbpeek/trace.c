/*
 * trace.c - RbPeek::Trace's recording side, the hot path: an in-process
 * flight recorder of every method call, GC step and GVL change of a Ruby
 * process (plus, through ktrace.h, its syscalls and scheduler states).
 * Saving is trace_save.c's, writing trace_write.c's; trace_ext.c defines
 * the Ruby methods.
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
#include "trace.h"
#include "trace_rec.h"

#define RBT_MAX_METHODS (1u << 22)  /* beyond: id 0, "(unknown)" */
#define RBT_MAX_DEAD 16             /* rings of finished threads kept */
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The method table: (owner, id) -> small id (open addressing). */
struct rbt_slot {
	VALUE klass;             /* owner (Qnil: unknown) */
	ID mid;                  /* method name (0: unknown); method names are immortal IDs */
	uint64_t id;             /* 0: empty slot */
};

static struct rbt_state g;

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
void rbt_time_pair(uint64_t *t, uint64_t *ns)
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
VALUE rbt_start(int argc, VALUE *argv, VALUE mod)
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
	rbt_time_pair(&g.cal_t, &g.cal_ns);
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

VALUE rbt_stop(VALUE mod)
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
VALUE rbt_reset(VALUE mod)
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
VALUE rbt_clock_cost(VALUE mod)
{
	uint64_t a = mono_ns(), sum = 0;
	const int n = 1000000;

	for (int i = 0; i < n; i++)
		sum += now();
	uint64_t b = mono_ns();
	__asm__ volatile("" : : "r"(sum));
	return rb_float_new((double)(b - a) / n);
}

VALUE rbt_running_p(VALUE mod)
{
	return g.running ? Qtrue : Qfalse;
}

/* {threads:, buffer_size:, methods:, events:, lost:} for tests and users. */
VALUE rbt_stats(VALUE mod)
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

struct rbt_state *rbt_state(void)
{
	return &g;
}

void rbt_init(void)
{
	g.use_tsc = tsc_usable() && !getenv("RBPEEK_TRACE_NO_TSC");
	/* non-NULL data: the GC calls no dmark for a NULL one */
	rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &marker_type, &g));
	pthread_atfork(NULL, NULL, after_fork_child);
}
