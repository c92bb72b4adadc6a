#include "profile/profile.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/vec.h"

int rbp_profile_init(struct rbp_profile *p)
{
	memset(p, 0, sizeof(*p));
	if (rbp_grow(&p->nodes, &p->cap_nodes, 1, sizeof(*p->nodes)))
		return RBP_ENOMEM;
	p->nodes[0] = (struct rbp_pnode){ 0, 0, 0 };
	p->n_nodes = 1;
	p->meta.ruby_version = p->meta.cmdline = "";
	return RBP_OK;
}

void rbp_profile_free(struct rbp_profile *p)
{
	rbp_strpool_free(&p->strings);
	rbp_hmap_clear(&p->frame_index);
	rbp_hmap_clear(&p->node_index);
	rbp_hmap_clear(&p->thread_index);
	free(p->frames);
	free(p->frame_next);
	free(p->nodes);
	free(p->threads);
	free(p->samples);
	free(p->sample_flags);
	memset(p, 0, sizeof(*p));
}

const char *rbp_profile_str(struct rbp_profile *p, const char *s)
{
	const char *r = rbp_strpool_intern0(&p->strings, s ? s : "");
	return r ? r : "";
}

static uint64_t frame_hash(const char *label, const char *path, int32_t line, uint8_t kind)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *s = label; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	h = (h ^ 0xff) * 0x100000001b3ull;
	for (const char *s = path; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return rbp_mix64(h, (uint64_t)(uint32_t)line << 8 | kind);
}

int rbp_profile_frame(struct rbp_profile *p, const char *label, const char *path,
		      int32_t line, int32_t first_line, uint8_t kind, uint32_t *id)
{
	uint64_t h, head = 0;

	label = label ? label : "";
	path = path ? path : "";
	h = frame_hash(label, path, line, kind);
	if (rbp_hmap_get(&p->frame_index, h, &head)) {
		for (uint32_t i = (uint32_t)head; i; i = p->frame_next[i - 1]) {
			const struct rbp_pframe *f = &p->frames[i - 1];
			if (f->line == line && f->kind == kind && !strcmp(f->label, label) &&
			    !strcmp(f->path, path)) {
				*id = i - 1;
				return RBP_OK;
			}
		}
	}
	size_t cap = p->cap_frames;
	if (rbp_grow(&p->frames, &p->cap_frames, p->n_frames + 1, sizeof(*p->frames)))
		return RBP_ENOMEM;
	if (cap != p->cap_frames) {
		uint32_t *nn = realloc(p->frame_next, p->cap_frames * sizeof(*nn));
		if (!nn)
			return RBP_ENOMEM;
		p->frame_next = nn;
	}
	struct rbp_pframe *f = &p->frames[p->n_frames];
	f->label = rbp_profile_str(p, label);
	f->path = rbp_profile_str(p, path);
	f->line = line;
	f->first_line = first_line;
	f->kind = kind;
	p->frame_next[p->n_frames] = (uint32_t)head;
	*id = (uint32_t)p->n_frames++;
	return rbp_hmap_put(&p->frame_index, h, *id + 1);
}

int rbp_profile_child(struct rbp_profile *p, uint32_t parent, uint32_t frame, uint32_t *node)
{
	uint64_t key = rbp_mix64((uint64_t)parent + 1, frame), v;

	/* the mixed key could collide: confirm against the node itself */
	if (rbp_hmap_get(&p->node_index, key, &v) && p->nodes[v - 1].parent == parent &&
	    p->nodes[v - 1].frame == frame) {
		*node = (uint32_t)v - 1;
		return RBP_OK;
	}
	if (parent >= p->n_nodes ||
	    rbp_grow(&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof(*p->nodes)))
		return parent >= p->n_nodes ? RBP_EINVAL : RBP_ENOMEM;
	p->nodes[p->n_nodes] = (struct rbp_pnode){ parent, frame, p->nodes[parent].depth + 1 };
	*node = (uint32_t)p->n_nodes++;
	return rbp_hmap_put(&p->node_index, key, *node + 1ull);
}

/* Key of (pid, tid) in thread_index: exact, 0 only for (-1, -1). */
static uint64_t thread_key(int32_t pid, int32_t tid)
{
	return (((uint64_t)(uint32_t)pid << 32) | (uint32_t)tid) + 1;
}

/* Index of thread (pid, tid), or -1 (looked up by hash: 1,000s of threads churn). */
static long find_thread(const struct rbp_profile *p, int32_t pid, int32_t tid)
{
	uint64_t key = thread_key(pid, tid), v;

	if (key)
		return rbp_hmap_get(&p->thread_index, key, &v) ? (long)v - 1 : -1;
	for (size_t i = 0; i < p->n_threads; i++)
		if (p->threads[i].pid == pid && p->threads[i].tid == tid)
			return (long)i;
	return -1;
}

int rbp_profile_thread(struct rbp_profile *p, int32_t pid, int32_t tid, const char *name,
		       uint32_t *idx)
{
	long i = find_thread(p, pid, tid);
	uint64_t key = thread_key(pid, tid);

	if (i >= 0) {
		if (name && *name && strcmp(p->threads[i].name, name))
			p->threads[i].name = rbp_profile_str(p, name);
		*idx = (uint32_t)i;
		return RBP_OK;
	}
	if (rbp_grow(&p->threads, &p->cap_threads, p->n_threads + 1, sizeof(*p->threads)) ||
	    (key && rbp_hmap_put(&p->thread_index, key, p->n_threads + 1)))
		return RBP_ENOMEM;
	p->threads[p->n_threads] = (struct rbp_pthread){ pid, tid, rbp_profile_str(p, name) };
	*idx = (uint32_t)p->n_threads++;
	return RBP_OK;
}

int rbp_profile_add(struct rbp_profile *p, uint64_t t_ns, uint32_t thread, uint32_t node,
		    uint8_t flags)
{
	size_t cap = p->cap_samples;
	if (rbp_grow(&p->samples, &p->cap_samples, p->n_samples + 1, sizeof(*p->samples)))
		return RBP_ENOMEM;
	if (cap != p->cap_samples) {
		uint8_t *nf = realloc(p->sample_flags, p->cap_samples);
		if (!nf)
			return RBP_ENOMEM;
		p->sample_flags = nf;
	}
	p->samples[p->n_samples] = (struct rbp_sample){ t_ns, thread, node };
	p->sample_flags[p->n_samples++] = flags;
	return RBP_OK;
}

size_t rbp_profile_stack(const struct rbp_profile *p, uint32_t node, uint32_t *out, size_t max)
{
	size_t depth = node < p->n_nodes ? p->nodes[node].depth : 0;

	for (size_t i = depth; i > 0 && node; i--) {
		if (i - 1 < max)
			out[i - 1] = p->nodes[node].frame;
		node = p->nodes[node].parent;
	}
	return depth;
}

int rbp_waiting_for_work(const char *label, const char *caller, size_t depth, int is_main)
{
	/* puma's keep-alive: between two requests of one connection, no request runs */
	if (!strcmp(label, "IO#wait_readable"))
		return caller && !strcmp(caller, "Puma::Client#reset");
	if (!strcmp(label, "Kernel#sleep"))
		return !is_main && depth <= 4;
	/* the main thread waiting for threads whose own samples show their work */
	if (!strcmp(label, "Thread#join") || !strcmp(label, "Thread#value"))
		return is_main;
	static const char *const waits[] = {
		"Thread::Mutex#sleep", "Thread::ConditionVariable#wait", "Thread::Queue#pop",
		"Thread::SizedQueue#pop", "IO.select", "NIO::Selector#select", "TCPServer#accept",
		"UNIXServer#accept", "Socket#accept",
	};

	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
		if (!strcmp(label, waits[i]))
			return 1;
	return 0;
}

int rbp_profile_view_without(const struct rbp_profile *p, uint8_t drop, struct rbp_profile *view,
			     size_t *dropped)
{
	size_t n = 0;

	*view = *p;
	view->samples = malloc((p->n_samples + 1) * sizeof(*view->samples));
	view->sample_flags = malloc(p->n_samples + 1);
	if (!view->samples || !view->sample_flags) {
		rbp_profile_view_free(view);
		return RBP_ENOMEM;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		if (p->sample_flags[i] & drop)
			continue;
		view->samples[n] = p->samples[i];
		view->sample_flags[n++] = p->sample_flags[i];
	}
	view->n_samples = view->cap_samples = n;
	*dropped = p->n_samples - n;
	return RBP_OK;
}

void rbp_profile_view_free(struct rbp_profile *view)
{
	free(view->samples);
	free(view->sample_flags);
	view->samples = NULL;
	view->sample_flags = NULL;
	view->n_samples = 0;
}

int rbp_blocking_wait(const char *label)
{
	static const char *const waits[] = {
		"Kernel#sleep", "IO#wait_readable", "IO#wait_writable", "IO#wait", "IO.select",
		"Thread#join", "Thread#value", "Thread::Mutex#sleep", "Thread::Mutex#lock",
		"Thread::ConditionVariable#wait", "Thread::Queue#pop", "Thread::SizedQueue#pop",
		"Thread::SizedQueue#push", "Process.wait", "Process.wait2", "Process.waitpid",
		"NIO::Selector#select", "TCPServer#accept", "UNIXServer#accept", "Socket#accept",
		"IO#read", "IO#readpartial", "IO#sysread", "IO#gets", "Monitor#wait_for_cond",
	};

	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
		if (!strcmp(label, waits[i]))
			return 1;
	return 0;
}

/*
 * Whether sample i is work: the thread held the GVL, or it was runnable
 * elsewhere than in a blocking wait.  (A thread woken from a wait is
 * runnable, still in the wait's frame, until a CPU takes it: on a loaded
 * machine that lasts milliseconds at every wake-up, and is no work.)
 */
static int sample_worked(const struct rbp_profile *p, size_t i)
{
	uint8_t fl = p->sample_flags[i];
	uint32_t node = p->samples[i].node;

	if (fl & RBP_SAMPLE_GVL)
		return 1;
	if (!(fl & RBP_SAMPLE_ONCPU))
		return 0;
	if (node && node < p->n_nodes && p->nodes[node].frame < p->n_frames)
		return !rbp_blocking_wait(p->frames[p->nodes[node].frame].label);
	return 1;
}

int rbp_profile_waiters(const struct rbp_profile *p, size_t n, uint8_t *waiter)
{
	uint64_t *seen = calloc(2 * (p->n_threads + 1), sizeof(*seen)), *worked;

	if (!seen)
		return RBP_ENOMEM;
	worked = seen + p->n_threads + 1;
	for (size_t i = 0; i < n && i < p->n_samples; i++) {
		seen[p->samples[i].thread]++;
		worked[p->samples[i].thread] += (uint64_t)sample_worked(p, i);
	}
	for (size_t t = 0; t < p->n_threads; t++)
		waiter[t] = seen[t] < RBP_WAITER_MIN_SAMPLES ? !worked[t]
			    : worked[t] * 100 <= seen[t] * RBP_WAITER_WORK_PCT;
	free(seen);
	return RBP_OK;
}

size_t rbp_profile_mark_idle_threads(struct rbp_profile *p)
{
	uint8_t *waiter = calloc(p->n_threads + 1, 1);
	size_t idle = 0;

	if (waiter && rbp_profile_waiters(p, p->n_samples, waiter)) {
		free(waiter);
		waiter = NULL;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		if (waiter && waiter[p->samples[i].thread])
			p->sample_flags[i] |= RBP_SAMPLE_IDLE;
		idle += !!(p->sample_flags[i] & RBP_SAMPLE_IDLE);
	}
	free(waiter);
	return idle;
}
