/*
 * alloccount.c - allocations into counts per class and stack samples (see
 * alloccount.h).
 *
 * Each stack read becomes a profile sample whose stack is the Ruby stack
 * plus one leaf frame naming the class; one sample stands for (allocations
 * / samples) allocations.  Frame ids are cached by the frame's interned
 * label and path (the VM's string pool keeps them for the VM's life), class
 * ids by the class's address, so a busy allocator costs hash lookups, not
 * string work.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/alloccount.h"
#include "ruby/alloc.h"
#include "util/err.h"
#include "util/vec.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rbp_alloc_count_init(struct rbp_alloc_count *c, struct rbp_vm *vm, struct rbp_profile *p,
			  pid_t pid, uint32_t rate)
{
	memset(c, 0, sizeof(*c));
	c->vm = vm;
	c->p = p;
	c->pid = pid;
	c->rate = rate;
}

void rbp_alloc_count_begin(struct rbp_alloc_count *c, uint64_t start)
{
	c->start = start;
	c->rng = start | 1;
	c->pick = UINT32_MAX;   /* every stack until the rate is known */
	c->adapt_time = c->token_time = start;
	c->tokens = 1;
}

void rbp_alloc_count_free(struct rbp_alloc_count *c)
{
	rbp_stacks_free(&c->stacks);
	rbp_stacks_free(&c->threads);
	rbp_hmap_clear(&c->frame_ids);
	rbp_hmap_clear(&c->class_ids);
	rbp_hmap_clear(&c->class_n);
	rbp_hmap_clear(&c->row_index);
	rbp_hmap_clear(&c->klass_n);
	free(c->rows);
	c->rows = NULL;
	c->n_rows = c->cap_rows = 0;
}

/* ---- samples into the profile ------------------------------------------ */

static int frame_id(struct rbp_alloc_count *c, const struct rbp_frame *f, uint32_t *id)
{
	uint64_t key = rbp_mix64(rbp_mix64((uintptr_t)f->label, (uintptr_t)f->path),
				 (uint64_t)(uint32_t)f->line << 2 | f->kind), v;
	int err;

	if (rbp_hmap_get(&c->frame_ids, key, &v)) {
		*id = (uint32_t)v - 1;
		return RBP_OK;
	}
	if ((err = rbp_profile_frame(c->p, f->label, f->path, f->line, f->first_line,
				     f->kind == RBP_FRAME_CFUNC ? RBP_PFRAME_CFUNC : RBP_PFRAME_RUBY, id)))
		return err;
	return rbp_hmap_put(&c->frame_ids, key, *id + 1ull);
}

/* The leaf frame naming the class of an allocation ("String"). */
static int class_id(struct rbp_alloc_count *c, uint64_t klass, uint32_t *id)
{
	uint64_t key = klass ? klass : 1, v;   /* 1 is never a class: stands for 0 */
	int err;

	if (rbp_hmap_get(&c->class_ids, key, &v)) {
		*id = (uint32_t)v - 1;
		return RBP_OK;
	}
	if ((err = rbp_profile_frame(c->p, rbp_alloc_class_name(c->vm, klass), "", 0, 0,
				     RBP_PFRAME_CFUNC, id)))
		return err;
	return rbp_hmap_put(&c->class_ids, key, *id + 1ull);
}

static int count_row(struct rbp_alloc_count *c, uint32_t site, uint32_t cls)
{
	uint64_t key = rbp_mix64((uint64_t)site + 1, (uint64_t)cls + 1), v;
	int err;

	if (rbp_hmap_get(&c->row_index, key, &v)) {
		c->rows[v - 1].n++;
		return RBP_OK;
	}
	if ((err = rbp_grow(&c->rows, &c->cap_rows, c->n_rows + 1, sizeof(*c->rows))))
		return err;
	c->rows[c->n_rows++] = (struct rbp_alloc_row){ site, cls, 1 };
	return rbp_hmap_put(&c->row_index, key, c->n_rows);
}

static int count_class(struct rbp_alloc_count *c, uint32_t cls, uint64_t more)
{
	uint64_t n = 0;

	rbp_hmap_get(&c->class_n, (uint64_t)cls + 1, &n);
	return rbp_hmap_put(&c->class_n, (uint64_t)cls + 1, n + more);
}

int rbp_alloc_count_class_total(struct rbp_alloc_count *c, uint64_t klass, uint64_t total)
{
	uint64_t key = klass ? klass : 1, before = 0;
	uint32_t cls;
	int err;

	rbp_hmap_get(&c->klass_n, key, &before);
	if (total <= before)
		return RBP_OK;
	if ((err = class_id(c, klass, &cls)) || (err = count_class(c, cls, total - before)))
		return err;
	return rbp_hmap_put(&c->klass_n, key, total);
}

/* The thread's name as record shows it: Ruby's name, else the OS one. */
static const char *thread_name(const struct rbp_alloc_count *c, const struct rbp_thread *th,
			       pid_t tid, struct rbp_task_info *ti)
{
	const char *name = th ? rbp_thread_ruby_name(th) : NULL;

	if (name)
		return name;
	return rbp_task_info(c->pid, tid, ti) ? "" : ti->comm;
}

static uint32_t random32(struct rbp_alloc_count *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return (uint32_t)(c->rng >> 32);
}

/*
 * A profile sample: the stack of th (NULL: none could be had) with the
 * class leaf on top, for an allocation by thread tid at time_ns.
 */
static int add_sample(struct rbp_alloc_count *c, const struct rbp_thread *th, pid_t tid,
		      uint64_t time_ns, uint32_t cls)
{
	struct rbp_task_info ti;
	uint32_t node = 0, id, site = UINT32_MAX, idx;
	int err;

	if (th && !th->err && th->n_frames) {
		const struct rbp_frame *f = c->stacks.frames + th->first_frame;
		for (size_t i = th->n_frames; i-- > 0;) {
			if ((err = frame_id(c, &f[i], &id)) ||
			    (err = rbp_profile_child(c->p, node, id, &node)))
				return err;
		}
		site = id;
	} else {
		c->no_stack++;
	}
	if ((err = rbp_profile_child(c->p, node, cls, &node)) ||
	    (err = rbp_profile_thread(c->p, (int32_t)c->pid, tid,
				      thread_name(c, th, tid, &ti), &idx)) ||
	    (err = rbp_profile_add(c->p, time_ns > c->start ? time_ns - c->start : 0, idx,
				   node, 0)))
		return err;
	c->samples++;
	return count_row(c, site, cls);
}

/* Approximate sites: read the allocating thread's stack now, after the allocation. */
static int add_stack_sample(struct rbp_alloc_count *c, pid_t tid, uint64_t time_ns, uint32_t cls)
{
	const struct rbp_thread *th = NULL;
	int err;

	err = rbp_vm_read_thread_stack(c->vm, tid, &c->stacks);
	uint64_t now = now_ns();
	uint64_t age = now > time_ns ? now - time_ns : 0;
	c->age_sum += age;
	if (age > c->age_max)
		c->age_max = age;
	if (err == RBP_ENOMEM)
		return err;
	if (err)
		c->read_errors++;
	else if (c->stacks.n_threads)
		th = &c->stacks.threads[0];
	return add_sample(c, th, tid, time_ns, cls);
}

int rbp_alloc_count_report(struct rbp_alloc_count *c, pid_t tid, uint64_t time_ns,
			   uint64_t klass, int read_stack)
{
	uint32_t cls;
	int err;

	if ((err = class_id(c, klass, &cls)) || (err = count_class(c, cls, 1)))
		return err;
	c->allocs++;
	if (!read_stack)
		return RBP_OK;   /* stacks come from the kernel's copies */
	if ((c->pick != UINT32_MAX && random32(c) >= c->pick) || c->tokens < 1)
		return RBP_OK;
	c->tokens -= 1;
	return add_stack_sample(c, tid, time_ns, cls);
}

/* The thread list's entry for tid (for its name), or NULL. */
static const struct rbp_thread *listed_thread(const struct rbp_alloc_count *c, pid_t tid)
{
	for (size_t i = 0; i < c->threads.n_threads; i++)
		if (c->threads.threads[i].tid == tid)
			return &c->threads.threads[i];
	return NULL;
}

int rbp_alloc_count_copy(struct rbp_alloc_count *c, const struct rbp_frame_copy *fc,
			 uint64_t time_ns, uint64_t klass, int truncated)
{
	uint32_t cls;
	int err;

	if (c->tokens < 1)
		return RBP_OK;   /* over the rate while the kernel's threshold catches up */
	c->tokens -= 1;
	if ((err = class_id(c, klass, &cls)))
		return err;
	c->truncated += truncated;
	err = rbp_vm_decode_frames(c->vm, fc, &c->stacks);
	if (err == RBP_ENOMEM)
		return err;
	struct rbp_thread *th = err || !c->stacks.n_threads ? NULL : &c->stacks.threads[0];
	const struct rbp_thread *known = listed_thread(c, fc->tid);
	if (th && known) {
		th->name = known->name;
		th->is_main = known->is_main;
	}
	if (err)
		c->read_errors++;
	return add_sample(c, th, fc->tid, time_ns, cls);
}

int rbp_alloc_count_threads(struct rbp_alloc_count *c, pid_t *tids, uint64_t *addrs, size_t max,
			    size_t *n)
{
	int err;

	*n = 0;
	if ((err = rbp_vm_read_threads(c->vm, &c->threads)))
		return err;
	for (size_t i = 0; i < c->threads.n_threads && *n < max; i++)
		if (c->threads.threads[i].tid && !c->threads.threads[i].err) {
			tids[*n] = c->threads.threads[i].tid;
			addrs[(*n)++] = c->threads.threads[i].addr;
		}
	return RBP_OK;
}

/* ---- the sampling policy ------------------------------------------------- */

uint32_t rbp_alloc_pick_for(uint32_t rate, double allocs_per_sec)
{
	double p = allocs_per_sec > rate ? rate / allocs_per_sec : 1.0;

	return p >= 1.0 ? UINT32_MAX : (uint32_t)(p * 4294967295.0);
}

uint32_t rbp_alloc_adapt_pick(struct rbp_alloc_count *c, uint64_t now)
{
	double secs = (double)(now - c->adapt_time) / 1e9;
	double rate = secs > 0 ? (double)(c->allocs - c->allocs_at_adapt) / secs : 0;

	c->pick = rbp_alloc_pick_for(c->rate, rate);
	c->allocs_at_adapt = c->allocs;
	c->adapt_time = now;
	return c->pick;
}

void rbp_alloc_refill(struct rbp_alloc_count *c, uint64_t now)
{
	double cap = c->rate / 10.0 > 1 ? c->rate / 10.0 : 1;

	c->tokens += (double)(now - c->token_time) / 1e9 * c->rate;
	if (c->tokens > cap)
		c->tokens = cap;
	c->token_time = now;
}

/* ---- tables -------------------------------------------------------------- */

static int cmp_tally(const void *a, const void *b)
{
	const struct rbp_alloc_tally *x = a, *y = b;
	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x->key < y->key ? -1 : x->key > y->key;
}

int rbp_alloc_tally_classes(const struct rbp_alloc_count *c, struct rbp_alloc_tally **out,
			    size_t *n)
{
	struct rbp_alloc_tally *t = calloc(c->class_n.len + 1, sizeof(*t));

	*n = 0;
	if (!(*out = t))
		return RBP_ENOMEM;
	for (size_t i = 0; i < c->class_n.cap; i++)
		if (c->class_n.keys[i])
			t[(*n)++] = (struct rbp_alloc_tally){ .key = (uint32_t)(c->class_n.keys[i] - 1),
							      .n = c->class_n.vals[i] };
	qsort(t, *n, sizeof(*t), cmp_tally);
	return RBP_OK;
}

int rbp_alloc_tally_sites(const struct rbp_alloc_count *c, struct rbp_alloc_tally **out,
			  size_t *n)
{
	struct rbp_alloc_tally *t = calloc(c->n_rows + 1, sizeof(*t));
	struct rbp_hmap index = { 0 };
	uint64_t v;

	*n = 0;
	if (!(*out = t))
		return RBP_ENOMEM;
	for (size_t i = 0; i < c->n_rows; i++) {
		const struct rbp_alloc_row *w = &c->rows[i];
		struct rbp_alloc_tally *e;
		if (rbp_hmap_get(&index, (uint64_t)w->site + 1, &v)) {
			e = &t[v - 1];
		} else {
			e = &t[(*n)++];
			e->key = w->site;
			rbp_hmap_put(&index, (uint64_t)w->site + 1, *n);
		}
		e->n += w->n;
		if (w->n > e->cls_n) {
			e->cls = w->cls;
			e->cls_n = w->n;
		}
	}
	rbp_hmap_clear(&index);
	qsort(t, *n, sizeof(*t), cmp_tally);
	return RBP_OK;
}
