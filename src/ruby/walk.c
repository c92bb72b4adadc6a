/*
 * walk.c - every thread's stack, as labelled frames.
 *
 * Per thread: read the execution context, then the whole control-frame
 * array in one read (cfp .. end of the VM stack), then the used part of the
 * VM stack in one read so that each frame's environment (ep[-2..0]) comes
 * from that copy.  Only environments that escaped to the heap, and cache
 * misses (a new iseq, a new pc, a new method entry), cost further reads.
 *
 * rbp_vm_decode_frames() runs the same walk over frames copied elsewhere
 * (by the kernel, at an allocation): their environment words come from the
 * copy through an overlay that rv_stack_word() consults first.
 *
 * Labels are built as Ruby 3.4 builds them and as a Ruby developer writes
 * them: "Foo::Bar#baz", "Foo.build", "block in Foo#each_item",
 * "Integer#times"; class bodies and top levels keep Ruby's own label
 * ("<class:Foo>", "<main>", "<top (required)>").
 */
#include "ruby/internal.h"
#include "ruby/label.h"
#include "util/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_STACK_COPY (64u << 20)   /* bytes of VM stack copied at most */
#define MAX_EP_CHAIN 4096            /* environments walked to find a method */
#define MAX_BATCH (128u << 20)       /* bytes of frames (and of stacks) read per sample */

/* ---- method entries ------------------------------------------------ */

struct me_info {
	uint64_t owner;
	uint64_t original_id;
	uint64_t cfunc;      /* body.cfunc.func for a C method, else 0 */
	uint64_t iseqptr;    /* body.iseq.iseqptr for a Ruby method, else 0 */
	uint32_t def_type;
};

/* v if it is a method entry; the svar's method entry when allowed. */
static uint64_t check_me(struct rbp_vm *vm, uint64_t v, int can_be_svar)
{
	const struct rbp_layout *L = vm->L;
	uint64_t flags, inner;

	if (rv_type(vm, v, &flags) != L->value.t_imemo)
		return 0;
	unsigned t = (unsigned)(flags >> L->value.fl_ushift) & L->imemo.mask;
	if (t == L->imemo.ment)
		return v;
	if (t != L->imemo.cref && can_be_svar && !rv_word(vm, v + 8, &inner))
		return check_me(vm, inner, 0);   /* vm_svar.cref_or_me */
	return 0;
}

/* The method entry of a frame, found as rb_vm_frame_method_entry() does. */
static uint64_t frame_me(struct rbp_vm *vm, uint64_t ep)
{
	const struct rbp_layout *L = vm->L;

	for (int depth = 0; depth < MAX_EP_CHAIN; depth++) {
		uint64_t flags, meref, prev, me;
		if (rv_stack_word(vm, ep + 8 * (int64_t)L->env.flags, &flags) ||
		    rv_stack_word(vm, ep + 8 * (int64_t)L->env.me_cref, &meref))
			return 0;
		int local = (flags & L->env.flag_local) != 0;
		if ((me = check_me(vm, meref, local)))
			return me;
		if (local ||
		    rv_stack_word(vm, ep + 8 * (int64_t)L->env.specval, &prev))
			return 0;
		ep = prev & ~(uint64_t)3;
	}
	return 0;
}

static int me_read(struct rbp_vm *vm, uint64_t me, struct me_info *out)
{
	const struct rbp_layout *L = vm->L;
	uint8_t def[64];
	uint64_t def_addr;
	int err;

	if ((err = rv_word(vm, me + L->me.owner, &out->owner)) ||
	    (err = rv_word(vm, me + L->me.def, &def_addr)) ||
	    (err = rv_read(vm, def_addr, def, sizeof(def))))
		return err;
	out->def_type = (uint32_t)rv_bitfield(def, &L->method_def.type);
	out->original_id = rv_u64(def, L->method_def.original_id);
	/* body is a union: cfunc.func is its first word, like iseq.iseqptr */
	out->cfunc = out->def_type == L->method_type.cfunc &&
		     L->shape.cfunc == RBP_CFUNC_IN_DEF_BODY &&
		     L->method_def.body_iseq_ptr + 8 <= (int)sizeof(def) ?
		     rv_u64(def, L->method_def.body_iseq_ptr) : 0;
	/* the definition's body is known (cfunc shape: its first word, iseqptr) */
	out->iseqptr = out->def_type == L->method_type.iseq && L->shape.cfunc == RBP_CFUNC_IN_DEF_BODY &&
		       L->method_def.body_iseq_ptr + 8 <= (int)sizeof(def) ?
		       rv_u64(def, L->method_def.body_iseq_ptr) : 0;
	return RBP_OK;
}

/* "Foo#bar" / "Foo.bar" / "bar" for a method entry. */
static int me_name(struct rbp_vm *vm, const struct me_info *mi, char *buf, size_t cap)
{
	char prefix[RV_MAX_STRING];
	const char *name;
	int err;

	if ((err = rv_id_name(vm, mi->original_id, &name)))
		return err;
	rv_method_prefix(vm, mi->owner, prefix, sizeof(prefix));
	snprintf(buf, cap, "%s%s", prefix, name);
	return RBP_OK;
}

/* ---- labels -------------------------------------------------------- */

/*
 * Label of a C frame from its method entry: "Integer#times", and the C
 * function that implements it (*func, 0 unknown).  NULL when the frame has
 * no method entry: the VM's bootstrap frames carry the C-frame magic with
 * a cref instead, and Ruby's backtraces skip them too.
 */
static const char *cfunc_label(struct rbp_vm *vm, uint64_t meref, uint64_t *func)
{
	static const char unknown[] = "(unknown cfunc)";
	uint64_t key = rbp_mix64(meref, 1), cached;
	char buf[RV_MAX_STRING];
	struct me_info mi = { 0 };
	const char *label = unknown;

	*func = 0;
	if (rbp_hmap_get(&vm->me_labels, key, &cached)) {
		rbp_hmap_get(&vm->me_funcs, meref, func);
		return (const char *)(uintptr_t)cached;
	}
	uint64_t me = check_me(vm, meref, 1);
	if (!me)
		return NULL;
	if (!me_read(vm, me, &mi) && !me_name(vm, &mi, buf, sizeof(buf)))
		label = rbp_strpool_intern0(&vm->pool, buf);
	if (!label)
		label = unknown;
	if (mi.cfunc)
		rbp_hmap_put(&vm->me_funcs, meref, mi.cfunc);
	*func = mi.cfunc;
	rbp_hmap_put(&vm->me_labels, key, (uint64_t)(uintptr_t)label);
	return label;
}

/*
 * Whether method entry mi can be the method of a frame running iseq:
 * decoded after the frames were copied, a method entry found through the
 * frame's environment may since have been freed and its memory reused
 * (labels that slipped under load: "rescue in Other.meth" on a frame of
 * Foo#meth).  A method frame's entry runs that very iseq; a block's,
 * rescue's or ensure's entry has the name the iseq was compiled in.  When
 * the name cannot be read there is nothing to compare: it passes.
 */
static int me_fits(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq *info,
		   const struct me_info *mi)
{
	const struct rbp_layout *L = vm->L;
	const char *name;

	if (info->type == L->iseq_type.method)
		return mi->def_type == L->method_type.iseq &&
		       (L->shape.cfunc != RBP_CFUNC_IN_DEF_BODY || mi->iseqptr == iseq);
	if (rv_id_name(vm, mi->original_id, &name))
		return 1;
	return !strcmp(name, info->base_label);
}

/*
 * Qualify a Ruby frame's label with its method's owner: "baz" ->
 * "Foo#baz", "block (2 levels) in baz" -> "block (2 levels) in Foo#baz".
 * NULL when the method entry does not fit the frame (me_fits()).
 */
static const char *qualify(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq *info,
			   uint64_t me)
{
	const struct rbp_layout *L = vm->L;
	char buf[RV_MAX_STRING], name[RV_MAX_STRING], prefix[RV_MAX_STRING];
	struct me_info mi;

	if (!me)   /* a method frame always has one; a block at top level has none */
		return info->type == L->iseq_type.method ? NULL : info->label;
	if (me_read(vm, me, &mi))
		return NULL;
	if (mi.def_type == L->method_type.bmethod) {
		/* define_method: the block is the method */
		if (me_name(vm, &mi, name, sizeof(name)))
			return info->label;
		return rbp_strpool_intern0(&vm->pool, name);
	}
	if (info->type != L->iseq_type.method && info->type != L->iseq_type.block &&
	    info->type != L->iseq_type.rescue && info->type != L->iseq_type.ensure)
		return info->label;
	if (!me_fits(vm, iseq, info, &mi))
		return NULL;
	rv_method_prefix(vm, mi.owner, prefix, sizeof(prefix));
	if (rbp_label_qualify(info->label, info->base_label, prefix, buf, sizeof(buf)))
		return info->label;
	return rbp_strpool_intern0(&vm->pool, buf);
}

/*
 * The label of a Ruby frame, cached by (iseq, its bytecode, its own label,
 * the frame's own ep[-2]): all come from the copies and the iseq cache, so
 * a frame seen before
 * costs no read.  An iseq belongs to one method definition, and ep[-2] (the
 * method entry for a method frame) tells apart the rare definitions that
 * share an iseq (define_method with one body on several classes); the
 * bytecode's address tells apart an iseq from a later one at the same
 * address.  NULL (not cached) when the method entry read now does not fit
 * the frame: the caller drops the sample (RBP_ETORN).
 */
static const char *ruby_label(struct rbp_vm *vm, uint64_t iseq,
			      const struct rv_iseq *info, uint64_t ep)
{
	const struct rbp_layout *L = vm->L;
	uint64_t key, cached, own = 0;
	const char *label;

	if (info->type == L->iseq_type.top || info->type == L->iseq_type.main ||
	    info->type == L->iseq_type.class || info->type == L->iseq_type.eval)
		return info->label;
	if (rv_stack_word(vm, ep + 8 * (int64_t)L->env.me_cref, &own))
		own = 0;
	key = rbp_mix64(rbp_mix64(rbp_mix64(iseq, info->iseq_encoded), (uintptr_t)info->label),
			own ^ 2);
	if (rbp_hmap_get(&vm->me_labels, key, &cached))
		return (const char *)(uintptr_t)cached;
	uint64_t me = frame_me(vm, ep);
	if (rbp_hmap_get(&vm->me_labels, key, &cached))
		return (const char *)(uintptr_t)cached;
	if (!(label = qualify(vm, iseq, info, me))) {
		vm->stats.labels_unverified++;
		return NULL;
	}
	rbp_hmap_put(&vm->me_labels, key, (uint64_t)(uintptr_t)label);
	return label;
}

/* ---- threads ------------------------------------------------------- */

/* Bytes of rb_thread_t we read: up to its last field we use. */
static size_t thread_span(const struct rbp_layout *L)
{
	int16_t offs[] = { L->thread.lt_node, L->thread.vm, L->thread.ec, L->thread.name,
			   L->thread.tid, L->thread.nt, L->thread.id, L->thread.self };
	int16_t max = 0;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] > max)
			max = offs[i];
	return (size_t)max + 8;
}

/*
 * A thread's fields from its rb_thread_t (buf, thread_span() bytes read at
 * th): *ec, Thread#name, and the OS tid when the struct holds it; else
 * *tid_addr is where the tid is (in the native thread data or the C
 * library's descriptor; 0 when unknown), read with the other threads'.
 */
static void decode_thread(struct rbp_vm *vm, uint64_t th, const uint8_t *buf,
			  struct rbp_thread *out, uint64_t *ec, uint64_t *tid_addr)
{
	const struct rbp_layout *L = vm->L;

	*ec = L->shape.thread_ec == RBP_THREAD_EC_EMBEDDED ? th + L->thread.ec :
	      rv_u64(buf, L->thread.ec);
	*tid_addr = 0;
	/*
	 * Thread#name= stores a new frozen String, so the VALUE names its
	 * contents: read each name once, not on every sample.
	 */
	out->name = NULL;
	uint64_t name = rv_u64(buf, L->thread.name), cached;
	if (rbp_hmap_get(&vm->thread_names, name, &cached)) {
		out->name = (const char *)(uintptr_t)cached;
	} else if (rv_type(vm, name, NULL) == L->value.t_string &&
		   !rv_string_intern(vm, name, &out->name)) {
		rbp_hmap_put(&vm->thread_names, name, (uint64_t)(uintptr_t)out->name);
	}
	out->tid = 0;
	if (L->shape.thread_id == RBP_TID_IN_THREAD) {
		out->tid = (pid_t)rv_u32(buf, L->thread.tid);
	} else if (L->shape.thread_id == RBP_TID_IN_NATIVE_THREAD) {
		uint64_t nt = rv_u64(buf, L->thread.nt);
		if (nt)
			*tid_addr = nt + L->native_thread.tid;
	} else if (L->shape.thread_id == RBP_TID_IN_PTHREAD && vm->pthread_tid_off) {
		uint64_t pt = rv_u64(buf, L->thread.id);
		uint64_t off = (uint64_t)(vm->pthread_tid_off > 0 ? vm->pthread_tid_off :
					  -vm->pthread_tid_off);
		if (pt)
			*tid_addr = pt + off;
	}
}

/* Ruby records ids as its own PID namespace sees them (a container). */
static void set_tid(struct rbp_vm *vm, struct rbp_thread *out, int32_t tid)
{
	out->tid = rbp_target_our_tid(vm->t, tid < 0 ? 0 : tid);
	/*
	 * The main thread is the process's first thread (in a forked child, the
	 * one that forked), so its id is the PID; Ruby 3.1 leaves the parent's
	 * id in a forked child's thread struct.
	 */
	if (out->is_main)
		out->tid = vm->t->pid;
}

/* 1 when tid (in the target's own PID namespace) is a thread of the target. */
static int is_task(struct rbp_vm *vm, int32_t tid)
{
	char path[64];

	if (tid <= 0 || !(tid = rbp_target_our_tid(vm->t, tid)))
		return 0;
	if (vm->t->is_core) {
		for (size_t i = 0; i < vm->t->n_core_tids; i++)
			if (vm->t->core_tids[i] == tid)
				return 1;
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)vm->t->pid, (int)tid);
	return access(path, F_OK) == 0;
}

/*
 * Before 3.1 a Ruby thread records only its pthread_t, which in glibc and
 * musl is the address of the C library's thread descriptor, whose layout
 * varies with the C library.  Find the tid field instead of assuming it: the
 * main thread's tid is the process id, and at the right offset every other
 * thread's descriptor holds the id of one of the process's tasks.  Cached
 * only once confirmed by a second thread.
 */
static void find_pthread_tid(struct rbp_vm *vm, const uint64_t *ths, size_t n)
{
	const struct rbp_layout *L = vm->L;
	uint8_t desc[2048];
	uint64_t pt;

	if (L->shape.thread_id != RBP_TID_IN_PTHREAD || vm->pthread_tid_off > 0 ||
	    (vm->pthread_tid_off < 0 && n < 2) ||
	    rv_word(vm, ths[0] + L->thread.id, &pt) || rv_read(vm, pt, desc, sizeof(desc)))
		return;
	for (size_t off = 16; off + 4 <= sizeof(desc); off += 4) {
		/* the process's own PID as it sees it (1 for a container's init) */
		if ((int32_t)rv_u32(desc, (int16_t)off) != (int32_t)vm->t->ns_pid)
			continue;
		int ok = 1, others = 0;
		int32_t seen[64];
		for (size_t i = 1; i < n && ok; i++) {
			uint64_t opt;
			int32_t tid;
			if (rv_word(vm, ths[i] + L->thread.id, &opt) || !opt)
				continue;   /* not started yet */
			ok = !rv_read(vm, opt + off, &tid, 4) && is_task(vm, tid) &&
			     tid != (int32_t)vm->t->ns_pid;
			/* distinct threads have distinct ids: a constant field is not it */
			for (int k = 0; ok && k < others && k < 64; k++)
				ok = seen[k] != tid;
			if (ok && others < 64)
				seen[others] = tid;
			others += ok;
		}
		if (ok) {
			vm->pthread_tid_off = (int32_t)off;
			if (!others)
				vm->pthread_tid_off = -(int32_t)off;   /* use now, confirm later */
			return;
		}
	}
}

/*
 * The used part of the VM stack that a thread's frames' eps point into
 * (cfp: its n control frames), as [*lo, *hi); 0, 0 when none or too big
 * to copy (then words are read one by one).
 */
static void stack_range(struct rbp_vm *vm, const uint8_t *cfp, uint64_t lo_limit,
			uint64_t hi_limit, size_t n, uint64_t *lo_out, uint64_t *hi_out)
{
	const struct rbp_layout *L = vm->L;
	uint64_t lo = UINT64_MAX, hi = 0;

	*lo_out = *hi_out = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t ep = rv_u64(cfp + i * L->cfp.size, L->cfp.ep);
		if (ep < lo_limit || ep >= hi_limit)
			continue;
		if (ep < lo)
			lo = ep;
		if (ep > hi)
			hi = ep;
	}
	if (hi == 0)
		return;
	lo = lo >= lo_limit + 16 ? lo - 16 : lo_limit;   /* ep[-2] */
	hi += 8;
	if (hi - lo > MAX_STACK_COPY)
		return;
	*lo_out = lo;
	*hi_out = hi;
}

/*
 * One control frame -> at most one rbp_frame appended to out.
 *
 * Ruby 3.4 stopped showing "rescue in"/"ensure in" frames in backtraces
 * (Feature #20275): the method shows the line of its rescue or ensure
 * clause instead.  On 3.4+ we do the same: such a frame is dropped and its
 * line carried (*carry) to the next Ruby frame out, its method.
 */
/*
 * The innermost frame of a thread running code a JIT compiled (YJIT,
 * ZJIT): its cfp->pc is what the JIT last saved (before a call, an
 * allocation, a possible exit), not where the code is now, so its line is
 * not known.  Such a frame is marked instead: label "LABEL [jit]", line the
 * method's first line.  A frame with a frame above it called out through a
 * saved pc, so its line is right; an iseq no JIT compiled runs in the
 * interpreter, whose pc is exact.  Known where the layout has the JIT entry
 * (a DWARF layout); 1 when f was marked.
 */
static int mark_jit(struct rbp_vm *vm, const struct rv_iseq *info, struct rbp_frame *f)
{
	uint64_t entry;
	char buf[512];

	if (!vm->L->jit.entry || !info->body ||
	    rv_word(vm, info->body + (uint64_t)vm->L->jit.entry, &entry) || !entry)
		return 0;
	snprintf(buf, sizeof(buf), "%s [jit]", f->label);
	const char *label = rbp_strpool_intern0(&vm->pool, buf);
	if (!label)
		return 0;
	f->label = label;
	f->line = f->first_line;
	return 1;
}

static int walk_frame(struct rbp_vm *vm, const uint8_t *cfp, struct rbp_stacks *out,
		      int32_t *carry, size_t first)
{
	const struct rbp_layout *L = vm->L;
	uint64_t pc = rv_u64(cfp, L->cfp.pc), iseq = rv_u64(cfp, L->cfp.iseq);
	uint64_t ep = rv_u64(cfp, L->cfp.ep), flags;
	struct rbp_frame f = { .path = "", .line = 0 };
	const struct rv_iseq *info;
	int err;

	if (rv_stack_word(vm, ep + 8 * (int64_t)L->env.flags, &flags))
		return RBP_OK;   /* unreadable environment: skip the frame */
	if ((flags & L->frame_magic.mask) == L->frame_magic.cfunc) {
		uint64_t meref;
		if (rv_stack_word(vm, ep + 8 * (int64_t)L->env.me_cref, &meref))
			return RBP_OK;
		f.kind = RBP_FRAME_CFUNC;
		if (!(f.label = cfunc_label(vm, meref, &f.cfunc)))
			return RBP_OK;
	} else {
		if (!iseq || !pc)
			return RBP_OK;   /* dummy or ifunc frame */
		if ((err = rv_iseq_at(vm, iseq, pc, &info))) {
			vm->stats.labels_unverified += err == RBP_ETORN;
			return err == RBP_ETORN || err == RBP_ENOMEM ? err : RBP_OK;   /* unreadable */
		}
		f.kind = RBP_FRAME_RUBY;
		f.path = info->path;
		f.first_line = info->first_lineno;
		if (rv_iseq_line(vm, iseq, info, pc, &f.line))
			f.line = 0;
		/* the VM's bootstrap "top" frames have no code and no line */
		if (info->type == L->iseq_type.top && f.line == 0)
			return RBP_OK;
		if ((info->type == L->iseq_type.rescue || info->type == L->iseq_type.ensure) &&
		    L->shape.rescue_line == RBP_RESCUE_LINE_CARRIED) {
			if (!*carry)
				*carry = f.line;
			return RBP_OK;
		}
		if (*carry) {
			f.line = *carry;
			*carry = 0;
		}
		if (!(f.label = ruby_label(vm, iseq, info, ep)))
			return RBP_ETORN;
		if (out->n_frames == first)
			mark_jit(vm, info, &f);
	}
	if ((err = rbp_grow(&out->frames, &out->cap_frames, out->n_frames + 1,
			sizeof(*out->frames))))
		return err;
	out->frames[out->n_frames++] = f;
	return RBP_OK;
}

/* C frames take the path and line of the Ruby frame that called them. */
static void fill_cfunc_locations(struct rbp_frame *f, size_t n)
{
	const char *path = "";
	int32_t line = 0;

	for (size_t i = n; i-- > 0;) {
		if (f[i].kind == RBP_FRAME_CFUNC) {
			f[i].path = path;
			f[i].line = line;
		} else {
			path = f[i].path;
			line = f[i].line;
		}
	}
}

/*
 * Per-thread state of one rbp_vm_read_stacks(), between its batched reads.
 * Offsets index vm->thr_buf (rb_thread_t copies), vm->cfp_buf (control
 * frames) and vm->stk_buf (VM stack copies).
 */
struct rv_wthread {
	int err;            /* first error for this thread */
	int skip;           /* not wanted (rbp_vm_read_thread_stack of another) */
	uint64_t ec;        /* its execution context */
	uint64_t tid_addr;  /* where its tid is, when not in rb_thread_t */
	int32_t tid;        /* read from tid_addr */
	uint8_t ecbuf[64];  /* the head of the execution context */
	uint64_t stack;     /* VM stack base, and end of the frames */
	size_t n_cfp;       /* control frames */
	size_t cfp_off;     /* into vm->cfp_buf */
	uint64_t cfp;       /* address of the innermost control frame */
	uint64_t stk_lo, stk_hi; /* VM stack range copied, [lo, hi) */
	size_t stk_off;     /* into vm->stk_buf */
	int torn;           /* verified read: the second copy of the frames disagreed */
	uint64_t cfp_after; /* verified read: ec->cfp read again just after the frames */
};

/* Room for n read requests in vm->reqs. */
static int reqs_for(struct rbp_vm *vm, size_t n)
{
	return rbp_grow(&vm->reqs, &vm->reqs_cap, n ? n : 1, sizeof(*vm->reqs));
}

/* Batch 1: each thread's execution context, and its tid when elsewhere. */
static int read_ecs(struct rbp_vm *vm, size_t n, struct rv_wthread *w)
{
	size_t k = 0;
	int err;

	if ((err = reqs_for(vm, 2 * n)))
		return err;
	for (size_t i = 0; i < n; i++) {
		if (w[i].err)
			continue;
		vm->reqs[k++] = (struct rbp_read_req){ w[i].ec, w[i].ecbuf, sizeof(w[i].ecbuf), 0 };
		if (w[i].tid_addr)
			vm->reqs[k++] = (struct rbp_read_req){ w[i].tid_addr, &w[i].tid, 4, 0 };
	}
	rv_readv(vm, vm->reqs, k);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if (w[i].err)
			continue;
		w[i].err = vm->reqs[k++].err;
		if (w[i].tid_addr && vm->reqs[k++].err)
			w[i].tid = 0;
	}
	return RBP_OK;
}

/* Where a thread's control frames are, from its execution context. */
static int locate_frames(struct rbp_vm *vm, struct rv_wthread *w)
{
	const struct rbp_layout *L = vm->L;
	uint64_t stack = rv_u64(w->ecbuf, L->ec.vm_stack);
	uint64_t size = rv_u64(w->ecbuf, L->ec.vm_stack_size);
	uint64_t cfp = rv_u64(w->ecbuf, L->ec.cfp);

	w->n_cfp = 0;
	if (!stack || !cfp)
		return RBP_OK;   /* not started yet, or finished */
	if (size > (1ull << 32))
		return RBP_ECORRUPT;
	uint64_t end = stack + size * 8;
	if (cfp < stack || cfp > end || (end - cfp) % L->cfp.size)
		return RBP_ECORRUPT;
	w->n_cfp = (size_t)((end - cfp) / L->cfp.size);
	if (w->n_cfp > RV_MAX_FRAMES)
		return RBP_ETOODEEP;
	w->stack = stack;
	w->cfp = cfp;
	return RBP_OK;
}

#define MAX_OFF_STACK_ENVS 4096   /* per sample; more are read one word at a time */

/*
 * Frames whose environment is not in the VM stack copy (a block's or
 * method's environment moved to the heap when a Proc or binding captured
 * it): note each ep, for batch 3 to read its three words (ep[-2..0]).
 */
static int off_stack_envs(struct rbp_vm *vm, const struct rv_wthread *w)
{
	const struct rbp_layout *L = vm->L;

	for (size_t i = 0; i < w->n_cfp && vm->henv_n < MAX_OFF_STACK_ENVS; i++) {
		uint64_t ep = rv_u64(vm->cfp_buf + w->cfp_off + i * L->cfp.size, L->cfp.ep);
		if (ep < 4096 || (ep & 7) || (ep - 16 >= w->stk_lo && ep + 8 <= w->stk_hi))
			continue;
		if (rbp_grow(&vm->henv, &vm->henv_cap, 4 * (vm->henv_n + 1), sizeof(*vm->henv)))
			return RBP_ENOMEM;
		vm->henv[4 * vm->henv_n++] = ep;
	}
	return RBP_OK;
}

/*
 * Batch 3 itself: the stack copies sized by read_frames() below, and
 * off-stack envs; for a verified read, then every thread's control frames
 * again (into vm->cfp_buf2), after the environments they point at.
 */
static int read_stacks_copy(struct rbp_vm *vm, size_t n, struct rv_wthread *w, size_t total)
{
	const struct rbp_layout *L = vm->L;
	size_t k = 0, again;
	int err;

	if ((err = rbp_grow(&vm->stk_buf, &vm->stk_cap, total + 1, 1)) ||
	    (err = reqs_for(vm, 2 * n + vm->henv_n)))
		return err;
	for (size_t i = 0; i < n; i++)
		if (!w[i].err && w[i].stk_hi > w[i].stk_lo)
			vm->reqs[k++] = (struct rbp_read_req){ w[i].stk_lo, vm->stk_buf + w[i].stk_off,
							       w[i].stk_hi - w[i].stk_lo, 0 };
	for (size_t j = 0; j < vm->henv_n; j++)
		vm->reqs[k + j] = (struct rbp_read_req){ vm->henv[4 * j] - 16, &vm->henv[4 * j + 1],
							 24, 0 };
	again = k + vm->henv_n;
	for (size_t i = 0; vm->verify && i < n; i++)
		if (!w[i].err && w[i].n_cfp)
			vm->reqs[again++] = (struct rbp_read_req){ w[i].cfp, vm->cfp_buf2 + w[i].cfp_off,
								  w[i].n_cfp * L->cfp.size, 0 };
	rv_readv(vm, vm->reqs, again);
	again = k + vm->henv_n;
	for (size_t i = 0; vm->verify && i < n; i++)
		if (!w[i].err && w[i].n_cfp)
			w[i].torn |= vm->reqs[again++].err != RBP_OK;
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (!w[i].err && w[i].stk_hi > w[i].stk_lo)
			w[i].err = vm->reqs[k++].err;
	for (size_t j = 0; j < vm->henv_n && !err; j++) {
		const uint64_t *e = &vm->henv[4 * j];
		for (int m = 0; m < 3 && !vm->reqs[k + j].err && !err; m++)
			err = rbp_hmap_put(&vm->env_words, e[0] - 16 + 8 * (uint64_t)m, e[1 + m]);
	}
	return err;
}

/*
 * Batch 2: every thread's control frames; batch 3: the part of its VM
 * stack they point into.  At most MAX_BATCH bytes each: threads beyond
 * (absurd sizes in a corrupt image) fail with RBP_ETOODEEP.
 */
static int read_frames(struct rbp_vm *vm, size_t n, struct rv_wthread *w)
{
	const struct rbp_layout *L = vm->L;
	size_t total = 0, k = 0;
	int err;

	vm->henv_n = 0;
	rbp_hmap_reset(&vm->env_words);

	for (size_t i = 0; i < n; i++) {
		if (!w[i].err && !w[i].skip)
			w[i].err = locate_frames(vm, &w[i]);
		if (w[i].err || w[i].skip || !w[i].n_cfp)
			continue;
		if (w[i].n_cfp * L->cfp.size > MAX_BATCH - total) {
			w[i].err = RBP_ETOODEEP;
			continue;
		}
		w[i].cfp_off = total;
		total += w[i].n_cfp * L->cfp.size;
	}
	if ((err = rbp_grow(&vm->cfp_buf, &vm->cfp_cap, total + 1, 1)) || (err = reqs_for(vm, 2 * n)) ||
	    (vm->verify && (err = rbp_grow(&vm->cfp_buf2, &vm->cfp_cap2, total + 1, 1))))
		return err;
	for (size_t i = 0; i < n; i++)
		if (!w[i].err && w[i].n_cfp)
			vm->reqs[k++] = (struct rbp_read_req){ w[i].cfp, vm->cfp_buf + w[i].cfp_off,
							       w[i].n_cfp * L->cfp.size, 0 };
	/*
	 * Verified reads: each ec->cfp again, right after its frames.  Frames
	 * the thread returned from since the first read (the slots below the
	 * new cfp) may have been copied after they ended, with their caller
	 * already further on: they are left out, and the stack starts at the
	 * frame that was innermost then.
	 */
	size_t n_frames_reqs = k;
	for (size_t i = 0; vm->verify && i < n; i++)
		if (!w[i].err && w[i].n_cfp)
			vm->reqs[k++] = (struct rbp_read_req){ w[i].ec + (uint64_t)L->ec.cfp,
							       &w[i].cfp_after, 8, 0 };
	rv_readv(vm, vm->reqs, k);
	rv_hold_check(vm);
	for (size_t i = 0, j = n_frames_reqs; vm->verify && i < n; i++) {
		if (w[i].err || !w[i].n_cfp)
			continue;
		uint64_t c = w[i].cfp_after, end = w[i].cfp + w[i].n_cfp * L->cfp.size;
		if (vm->reqs[j++].err || c >= end || (c > w[i].cfp && (c - w[i].cfp) % L->cfp.size)) {
			w[i].torn = 1;
			continue;
		}
		if (c <= w[i].cfp)
			continue;   /* as deep or deeper now: the frames copied were live */
		size_t popped = (size_t)((c - w[i].cfp) / L->cfp.size);
		{
			w[i].cfp_off += popped * L->cfp.size;
			w[i].cfp = c;
			w[i].n_cfp -= popped;
		}
	}
	k = 0;
	total = 0;
	for (size_t i = 0; i < n; i++) {
		w[i].stk_lo = w[i].stk_hi = 0;
		if (w[i].err || !w[i].n_cfp || (w[i].err = vm->reqs[k++].err))
			continue;
		stack_range(vm, vm->cfp_buf + w[i].cfp_off, w[i].stack, w[i].cfp, w[i].n_cfp,
			    &w[i].stk_lo, &w[i].stk_hi);
		if (w[i].stk_hi - w[i].stk_lo > MAX_BATCH - total)
			w[i].stk_lo = w[i].stk_hi = 0;   /* read word by word */
		w[i].stk_off = total;
		total += w[i].stk_hi - w[i].stk_lo;
		if ((err = off_stack_envs(vm, &w[i])))
			return err;
	}
	return read_stacks_copy(vm, n, w, total);
}

/*
 * A verified read (vm->verify, nothing held): whether a thread's frames
 * are a stack it really had.  Its control frames were copied (A), then the
 * VM stack their environments are in, then the frames again (B).  A frame
 * slot that held the same iseq and environment in both copies held that
 * frame throughout (or the same method, called again at the same depth),
 * so its environment words, copied in between, are that frame's; a
 * caller's pc may move on (the next call from the same frame) but must
 * stay on its line.  The innermost frame's pc runs on freely: A's is kept,
 * and walk_frame() checks that it lies in its iseq.  Anything else - a
 * frame pushed or popped in between at a slot A shows, a caller that moved
 * to another line - makes the whole stack torn: it is dropped, never
 * shown.  A thread that does not hold the GVL cannot change its stack, so
 * only the running one can tear.
 */
static int copies_agree(struct rbp_vm *vm, const struct rv_wthread *w)
{
	const struct rbp_layout *L = vm->L;

	for (size_t i = 0; i < w->n_cfp; i++) {
		const uint8_t *a = vm->cfp_buf + w->cfp_off + i * L->cfp.size;
		const uint8_t *b = vm->cfp_buf2 + w->cfp_off + i * L->cfp.size;
		uint64_t iseq = rv_u64(a, L->cfp.iseq), pa = rv_u64(a, L->cfp.pc), pb = rv_u64(b, L->cfp.pc);
		const struct rv_iseq *info;
		int32_t la, lb;

		if (iseq != rv_u64(b, L->cfp.iseq) || rv_u64(a, L->cfp.ep) != rv_u64(b, L->cfp.ep))
			return 0;
		if (i == 0 || pa == pb)
			continue;
		if (!iseq || !pa || !pb || rv_iseq_at(vm, iseq, pa, &info) ||
		    rv_iseq_line(vm, iseq, info, pa, &la) || rv_iseq_at(vm, iseq, pb, &info) ||
		    rv_iseq_line(vm, iseq, info, pb, &lb) || la != lb)
			return 0;
	}
	return 1;
}

/* One thread's frames, from the copies read, appended to out. */
static int walk_thread(struct rbp_vm *vm, const struct rv_wthread *w, struct rbp_stacks *out)
{
	const struct rbp_layout *L = vm->L;
	int32_t carry = 0;
	int err = RBP_OK;

	vm->stk_cur = vm->stk_buf + w->stk_off;
	vm->stk_lo = w->stk_lo;
	vm->stk_hi = w->stk_hi;
	size_t first = out->n_frames;
	for (size_t i = 0; i < w->n_cfp && !err; i++)
		err = walk_frame(vm, vm->cfp_buf + w->cfp_off + i * L->cfp.size, out, &carry, first);
	vm->stk_lo = vm->stk_hi = 0;
	return err;
}

/*
 * Where the threads are, in two batched reads: the VM's words (main
 * thread; main ractor, or before ractors the thread list), then the GVL's
 * owner (vm->gvl_word, in the ractor or the VM; kept for
 * rbp_vm_read_stacks_paused), the ractor's thread list, the main thread
 * itself (span bytes into vm->thr_buf) and the collector's flags
 * (rv_gc_flags_req).  *head is the list head's address, *node its first
 * link; *main_err: the main thread's own read failed.
 */
static int thread_roots(struct rbp_vm *vm, size_t span, uint64_t *main_th, uint64_t *gvl_owner,
			uint64_t *head, uint64_t *node, int *main_err)
{
	const struct rbp_layout *L = vm->L;
	int ractor = L->shape.threads == RBP_THREADS_IN_RACTOR;
	uint64_t holder = 0;
	struct rbp_read_req a[2] = {
		{ vm->vm_addr + L->vm.main_thread, main_th, 8, 0 },
		ractor ? (struct rbp_read_req){ vm->vm_addr + L->vm.main_ractor, &holder, 8, 0 } :
			 (struct rbp_read_req){ vm->vm_addr + L->vm.living_threads, node, 8, 0 },
	}, b[4];
	size_t k = 0, owner = SIZE_MAX, list = SIZE_MAX, gc = SIZE_MAX;
	int err;

	rv_readv(vm, a, 2);
	if ((err = a[0].err ? a[0].err : a[1].err) || (err = rbp_grow(&vm->thr_buf, &vm->thr_cap, span, 1)))
		return err;
	switch (L->shape.gvl) {
	case RBP_GVL_IN_RACTOR: vm->gvl_word = holder + (uint64_t)L->ractor.gvl_owner; break;
	case RBP_GVL_IN_VM: vm->gvl_word = vm->vm_addr + (uint64_t)L->vm.gvl_owner; break;
	default: vm->gvl_word = 0; break;
	}
	*head = ractor ? holder + L->ractor.threads_set : vm->vm_addr + L->vm.living_threads;
	*gvl_owner = 0;
	if (vm->gvl_word)
		b[owner = k++] = (struct rbp_read_req){ vm->gvl_word, gvl_owner, 8, 0 };
	if (ractor)
		b[list = k++] = (struct rbp_read_req){ *head, node, 8, 0 };
	size_t main = k++;
	b[main] = (struct rbp_read_req){ *main_th, vm->thr_buf, span, 0 };
	if (rv_gc_flags_req(vm, &b[k]))
		gc = k++;
	rv_readv(vm, b, k);
	if (gc != SIZE_MAX)
		vm->gc_flags_read = b[gc].err ? 2 : 1;
	*main_err = b[main].err;
	if (owner != SIZE_MAX && b[owner].err)
		return b[owner].err;
	return list != SIZE_MAX ? b[list].err : RBP_OK;
}

/*
 * Addresses of all threads, main thread first, with a copy of each
 * rb_thread_t (span bytes) in vm->thr_buf: the list is walked by reading
 * each thread whole, its list node inside, so each thread costs one read
 * (the main thread's comes with thread_roots()).
 * *main_err: the main thread's own read failed (the list may still be good).
 */
static int thread_list(struct rbp_vm *vm, size_t span, uint64_t **ths, size_t *n,
		       uint64_t *main_th, uint64_t *gvl_owner, int *main_err)
{
	const struct rbp_layout *L = vm->L;
	uint64_t head, node;
	size_t cap = 0;
	int err;

	*n = 0;
	if ((err = thread_roots(vm, span, main_th, gvl_owner, &head, &node, main_err)) ||
	    (err = rbp_grow(ths, &cap, 1, sizeof(**ths))))
		return err;
	(*ths)[(*n)++] = *main_th;
	/* a corrupt list may loop: a thread seen twice ends it */
	struct rbp_hmap seen = { 0 };
	int main_seen = 0;
	while (!err && node != head) {
		uint64_t th = node - (uint64_t)L->thread.lt_node, dummy;
		if (*n > RV_MAX_THREADS || (th == *main_th && main_seen++) ||
		    (th && rbp_hmap_get(&seen, th, &dummy))) {
			err = RBP_ECORRUPT;
		} else if (th == *main_th) {
			if (*main_err)
				err = rv_word(vm, node, &node);
			else
				node = rv_u64(vm->thr_buf, L->thread.lt_node);
		} else if (!(err = rbp_grow(ths, &cap, *n + 1, sizeof(**ths))) &&
			   !(err = rbp_grow(&vm->thr_buf, &vm->thr_cap, (*n + 1) * span, 1)) &&
			   !(err = rv_read(vm, th, vm->thr_buf + *n * span, span)) &&
			   !(err = th ? rbp_hmap_put(&seen, th, 1) : RBP_OK)) {
			node = rv_u64(vm->thr_buf + *n * span, L->thread.lt_node);
			(*ths)[(*n)++] = th;
			rv_hold_check(vm);
		}
	}
	rbp_hmap_clear(&seen);
	return err;
}

/*
 * Every thread's stack (or only thread only_tid's when it is nonzero): the
 * thread list (two batched reads, then one read per thread besides the
 * main one, see thread_list()), then three batched reads whatever the
 * number of threads (a live process: one process_vm_readv each):
 * execution contexts (and tids), control frames, VM stacks with the
 * environments off the stack.  One thread: five reads.  Cache misses (new
 * iseqs, lines, labels) cost more reads: those come after the copies, when
 * a paused read has let the target go (rv_hold_end), as iseqs, method
 * entries and strings do not change under a running program.
 */
static int read_stacks(struct rbp_vm *vm, pid_t only_tid, int list_only, struct rbp_stacks *out)
{
	uint64_t *ths = NULL, main_th = 0, gvl = 0;
	size_t n = 0, span = thread_span(vm->L);
	struct rv_wthread *w = NULL;
	int err, main_err = 0;

	out->n_threads = out->n_frames = 0;
	vm->torn = 0;
	if (span > 2048)
		return RBP_EINVAL;
	if ((err = thread_list(vm, span, &ths, &n, &main_th, &gvl, &main_err)))
		goto done;
	find_pthread_tid(vm, ths, n);
	if ((err = rbp_grow(&out->threads, &out->cap_threads, n, sizeof(*out->threads))) ||
	    !(w = calloc(n, sizeof(*w)))) {
		err = err ? err : RBP_ENOMEM;
		goto done;
	}
	w[0].err = main_err;
	for (size_t i = 0; i < n; i++) {
		struct rbp_thread *t = &out->threads[i];
		memset(t, 0, sizeof(*t));
		t->addr = ths[i];
		t->is_main = ths[i] == main_th;
		t->has_gvl = ths[i] == gvl;
		t->running = -1;
		if (!w[i].err)
			decode_thread(vm, ths[i], vm->thr_buf + i * span, t, &w[i].ec, &w[i].tid_addr);
	}
	if ((err = read_ecs(vm, n, w)))
		goto done;
	rv_hold_check(vm);
	for (size_t i = 0; i < n; i++) {
		struct rbp_thread *t = &out->threads[i];
		if (w[i].tid_addr)
			set_tid(vm, t, w[i].tid);
		else if (!w[i].err)
			set_tid(vm, t, t->tid);
		/* one thread wanted: the others' frames are not even read */
		if (only_tid && (w[i].err || t->tid != only_tid))
			w[i].skip = 1;
	}
	if (list_only) {
		for (size_t i = 0; i < n; i++)
			out->threads[i].err = w[i].err;
		out->n_threads = n;
		goto done;
	}
	if ((err = read_frames(vm, n, w)))
		goto done;
	/* everything that changes as the target runs is copied: let it run */
	rv_hold_end(vm);
	for (size_t i = 0; i < n; i++) {
		if (w[i].skip)
			continue;
		struct rbp_thread *t = &out->threads[out->n_threads++];
		if (t != &out->threads[i])
			*t = out->threads[i];
		t->first_frame = out->n_frames;
		t->err = w[i].err;
		if (!t->err && vm->verify && (w[i].torn || !copies_agree(vm, &w[i]))) {
			t->err = RBP_ETORN;
			vm->stats.torn++;
		}
		if (!t->err)
			t->err = walk_thread(vm, &w[i], out);
		vm->torn += t->err == RBP_ETORN;
		if (t->err == RBP_ENOMEM) {
			err = RBP_ENOMEM;
			goto done;
		}
		if (t->err)
			out->n_frames = t->first_frame;
		t->n_frames = out->n_frames - t->first_frame;
		if (t->n_frames)   /* out->frames is NULL until a first frame */
			fill_cfunc_locations(out->frames + t->first_frame, t->n_frames);
	}
	rv_gc_mark_threads(vm, out);
done:
	rbp_hmap_reset(&vm->env_words);
	free(w);
	free(ths);
	return err;
}

int rbp_vm_read_stacks(struct rbp_vm *vm, struct rbp_stacks *out)
{
	return read_stacks(vm, 0, 0, out);
}

int rbp_vm_read_thread_stack(struct rbp_vm *vm, pid_t tid, struct rbp_stacks *out)
{
	return read_stacks(vm, tid, 0, out);
}

int rbp_vm_read_threads(struct rbp_vm *vm, struct rbp_stacks *out)
{
	return read_stacks(vm, 0, 1, out);
}

void rbp_vm_framecap_layout(const struct rbp_vm *vm, struct rbp_framecap_layout *out)
{
	const struct rbp_layout *L = vm->L;

	*out = (struct rbp_framecap_layout){
		.thread_ec = L->thread.ec,
		.ec_embedded = L->shape.thread_ec == RBP_THREAD_EC_EMBEDDED,
		.ec_vm_stack = L->ec.vm_stack, .ec_vm_stack_size = L->ec.vm_stack_size,
		.ec_cfp = L->ec.cfp, .cfp_size = L->cfp.size, .cfp_ep = L->cfp.ep,
	};
}

/*
 * The environment words copied with the frames, as an overlay that
 * rv_stack_word() consults before the live stack: address -> word.  A
 * frame whose three words are all zero was not copied (read live).
 */
static int env_overlay(struct rbp_vm *vm, const struct rbp_frame_copy *c)
{
	const struct rbp_layout *L = vm->L;
	int err = RBP_OK;

	rbp_hmap_clear(&vm->env_words);
	for (size_t i = 0; i < c->n && c->env && !err; i++) {
		const uint64_t *e = c->env + 3 * i;
		uint64_t ep = rv_u64(c->frames + i * L->cfp.size, L->cfp.ep);
		if ((!e[0] && !e[1] && !e[2]) || ep < 16 || (ep & 7))
			continue;
		for (int k = 0; k < 3 && !err; k++)
			err = rbp_hmap_put(&vm->env_words, ep - 16 + 8 * (uint64_t)k, e[k]);
	}
	return err;
}

int rbp_vm_decode_frames(struct rbp_vm *vm, const struct rbp_frame_copy *c, struct rbp_stacks *out)
{
	const struct rbp_layout *L = vm->L;
	int32_t carry = 0;
	int err;

	out->n_threads = out->n_frames = 0;
	if ((err = rbp_grow(&out->threads, &out->cap_threads, 1, sizeof(*out->threads))))
		return err;
	struct rbp_thread *t = &out->threads[out->n_threads++];
	memset(t, 0, sizeof(*t));
	t->tid = c->tid;
	t->running = 1;
	if ((err = env_overlay(vm, c)))
		goto done;
	for (size_t i = 0; i < c->n && !err; i++)
		err = walk_frame(vm, c->frames + i * L->cfp.size, out, &carry, 0);
	t->n_frames = out->n_frames;
	if (t->n_frames)
		fill_cfunc_locations(out->frames, t->n_frames);
done:
	rbp_hmap_clear(&vm->env_words);
	return err;
}
