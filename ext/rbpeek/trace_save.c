/*
 * trace_save.c - RbPeek::Trace.save: the window of every thread's ring
 * copied out, timestamps converted to CLOCK_MONOTONIC nanoseconds, method
 * ids turned into labels, thread names, the kernel streams' events
 * drained, and the lot handed to the writer (trace_write.h).
 *
 * It runs holding the GVL, so the recorder's rings and method table
 * (trace.h) hold still while they are copied; once the records are copied
 * it calls Ruby (names, labels), and no longer walks the rings.
 *
 * The file is written the way rbpeek writes every output (src/util/safeout.h):
 * the process may be root's (`rbpeek trace` from a root shell) and the path
 * in a directory another user can write, who may plant a symlink there at
 * any moment.  So a new file is a temporary beside the destination, created
 * O_CREAT|O_EXCL|O_NOFOLLOW with a random name, then renamed over the
 * destination (which replaces a planted symlink, never what it points to);
 * an existing destination that is not a regular file (/dev/stdout, a FIFO)
 * is written in place, opened without O_CREAT, and through a symlink only
 * when the symlink is this process's user's or root's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ruby.h>

#include "ktrace.h"
#include "trace.h"
#include "trace_rec.h"
#include "trace_save.h"
#include "trace_write.h"
#include "util/err.h"
#include "util/safeout.h"

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
	char tmp[PATH_MAX + 32];  /* the temporary file while it exists, else "" */
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
	const struct rbt_state *g = rbt_state();
	size_t n = 0;

	for (size_t i = 0; i < s->nkev && n < max; i++) {
		pid_t tid = s->kev[i].tid;
		int known = 0;
		for (struct rbt_ring *r = g->rings; r && !known; r = r->next)
			known = r->gen == g->gen && r->recs && r->tid == tid;
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

/* The top-level constant named name, or Qundef (not defined, or not loaded yet). */
static VALUE toplevel_const(const char *name)
{
	ID id = rb_intern(name);

	if (!rb_const_defined_at(rb_cObject, id) ||
	    !NIL_P(rb_funcall(rb_cObject, rb_intern("autoload?"), 1, ID2SYM(id))))
		return Qundef;
	return rb_const_get_at(rb_cObject, id);
}

/*
 * What Ruby calls an object with singleton methods that is not a class or
 * module: ENV, ARGF, main (the top-level self), the top-level constant it
 * is the value of, else its default to_s ("#<Object:0x...>").  No user
 * code runs (no to_s or inspect of the object); warnings (a deprecated
 * constant read) are silenced meanwhile.
 */
static VALUE object_name(VALUE att)
{
	static const char *const known[] = { "ENV", "ARGF" };
	VALUE name = Qnil, verbose = rb_gv_get("$VERBOSE");

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (toplevel_const(known[i]) == att)
			return rb_str_new_cstr(known[i]);
	VALUE top = toplevel_const("TOPLEVEL_BINDING");
	if (top != Qundef && rb_obj_is_kind_of(top, rb_cBinding) &&
	    rb_funcall(top, rb_intern("receiver"), 0) == att)
		return rb_str_new_cstr("main");
	rb_gv_set("$VERBOSE", Qnil);
	VALUE names = rb_funcall(rb_cObject, rb_intern("constants"), 0);
	for (long i = 0; NIL_P(name) && i < RARRAY_LEN(names); i++) {
		VALUE sym = RARRAY_AREF(names, i);
		VALUE c = toplevel_const(rb_id2name(SYM2ID(sym)));
		if (c == att)
			name = rb_sym2str(sym);
	}
	rb_gv_set("$VERBOSE", verbose);
	return NIL_P(name) ? rb_any_to_s(att) : name;
}

/*
 * "Klass#meth"; "Klass.meth" for a singleton method of a class or module,
 * "ENV.fetch" (see object_name) for one of another object.
 */
static char *label_of(const struct rbt_method *m)
{
	VALUE owner = Qnil, klass = m->klass;
	const char *sep = "#";

	if ((RB_TYPE_P(klass, T_CLASS) || RB_TYPE_P(klass, T_MODULE))) {
		if (RB_TYPE_P(klass, T_CLASS) && FL_TEST(klass, FL_SINGLETON)) {
			VALUE att = attached_object(klass);
			sep = ".";
			if (RB_TYPE_P(att, T_CLASS) || RB_TYPE_P(att, T_MODULE))
				owner = rb_class_path(att);
			else
				owner = object_name(att);
		} else {
			owner = rb_class_path(klass);
		}
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
	const struct rbt_state *g = rbt_state();
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
		int64_t d = (int64_t)(rec.t - g->cal_t);
		rec.t = (uint64_t)((int64_t)g->cal_ns + (int64_t)((double)d * ns_per_t));
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
	const struct rbt_state *g = rbt_state();
	size_t n = g->nmethods + 1;

	if (!(s->labels = calloc(n, sizeof(char *))))
		return -1;
	for (size_t i = 0; i < s->tr.nthreads; i++) {
		const struct rbt_thread_window *w = &s->tr.threads[i];
		for (size_t j = 0; j < w->n; j++) {
			unsigned k = RBT_KIND(w->recs[j].v);
			uint64_t id = RBT_ARG(w->recs[j].v);
			if (k >= RBT_CALL && k <= RBT_B_RETURN && id && id < n && !s->labels[id]) {
				/* a copy: Ruby calls in label_of may let a thread grow the table */
				struct rbt_method m = g->methods[id - 1];
				s->labels[id] = label_of(&m);
			}
		}
	}
	s->tr.labels = (const char *const *)s->labels;
	s->tr.nlabels = n;
	return 0;
}

/*
 * The stream to write path through: in place for an existing device or
 * FIFO, else a new temporary file beside it ("path.tmpXXXXXX", or
 * "DIR/.rbpeek.tmpXXXXXX" for a name too long for the suffix), whose name
 * goes to s->tmp.  NULL with errno set.
 */
static FILE *open_output(struct save *s, const char *path)
{
	struct stat st;
	int fd;
	FILE *f;

	s->tmp[0] = 0;
	if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode)) {
			errno = EISDIR;
			return NULL;
		}
		if ((fd = rbp_open_in_place(path)) < 0)
			return NULL;
	} else if ((fd = rbp_create_temp(path, s->tmp, sizeof(s->tmp))) < 0) {
		return NULL;
	}
	if (!(f = fdopen(fd, "w"))) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

static VALUE save_body(VALUE arg)
{
	const struct rbt_state *g = rbt_state();
	struct save *s = (struct save *)arg;
	uint64_t t, ns, nring = 0, k = 0;
	double ns_per_t = 1.0;

	rbt_time_pair(&t, &ns);
	if (g->use_tsc) {
		/* a short run calibrates badly: wait until 20 ms passed */
		while (ns - g->cal_ns < 20000000) {
			struct timespec d = { 0, 1000000 };
			nanosleep(&d, NULL);
			rbt_time_pair(&t, &ns);
		}
		ns_per_t = (double)(ns - g->cal_ns) / (double)(t - g->cal_t);
	}
	if (g->kt) {
		int rc = rbk_drain(g->kt, add_kev, s);
		if (rc)
			rb_warn("rbpeek: kernel events not read: %s", strerror(-rc));
	}
	pid_t extra[256];
	size_t nextra = kernel_only_tids(s, extra, sizeof(extra) / sizeof(extra[0]));
	for (struct rbt_ring *r = g->rings; r; r = r->next)
		nring += r->gen == g->gen && r->recs;
	s->tr.threads = calloc(nring + nextra + 1, sizeof(*s->tr.threads));
	s->names = calloc(nring + nextra + 1, sizeof(char *));
	if (!s->tr.threads || !s->names)
		rb_raise(rb_eNoMemError, "RbPeek::Trace.save: out of memory");
	for (struct rbt_ring *r = g->rings; r && k < nring; r = r->next) {
		if (r->gen != g->gen || !r->recs)
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
	s->tr.start_ns = g->cal_ns + (int64_t)((double)(int64_t)(g->reset_t - g->cal_t) * ns_per_t);
	s->tr.end_ns = g->cal_ns + (int64_t)((double)(int64_t)(t - g->cal_t) * ns_per_t);
	if (s->tr.start_ns < g->cal_ns)
		s->tr.start_ns = g->cal_ns;

	const char *path = StringValueCStr(s->path);
	if (!(s->f = open_output(s, path)))
		rb_sys_fail(path);
	int rc = rbt_write(s->f, &s->tr, (enum rbt_format)s->fmt);
	int e = rc == RBP_ENOMEM ? ENOMEM : errno;
	if (fclose(s->f) && !rc) {
		rc = RBP_EIO;
		e = errno;
	}
	s->f = NULL;
	if (!rc && s->tmp[0]) {
		if (rename(s->tmp, path)) {
			rc = RBP_EIO;
			e = errno;
		} else {
			s->tmp[0] = 0;
		}
	}
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
	if (s->tmp[0])
		unlink(s->tmp);
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
VALUE rbt_save(VALUE mod, VALUE path, VALUE fmt)
{
	const struct rbt_state *g = rbt_state();
	struct save s = { .path = path, .fmt = NUM2INT(fmt), .threads = rb_ary_new() };

	FilePathValue(s.path);
	if (!g->gen)
		rb_raise(rb_eRuntimeError, "RbPeek::Trace.save: nothing recorded (call RbPeek::Trace.start first)");
	rb_ensure(save_body, (VALUE)&s, save_cleanup, (VALUE)&s);
	RB_GC_GUARD(s.path);
	RB_GC_GUARD(s.threads);
	return path;
}
