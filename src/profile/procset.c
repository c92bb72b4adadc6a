/*
 * procset.c - a process and its Ruby descendants (see procset.h).
 *
 * Descendants are found by parent links: each scan lists /proc and reads
 * the parent of every process not seen in the previous scan (a map of
 * pid -> the scan that last saw it tells which are new; a pid that skipped
 * a scan counts as new again, which covers most pid reuse).  A new process
 * whose parent is a known descendant is one too; a few passes settle
 * parents and children that appeared in the same scan in any order.
 */
#include "profile/procset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc/target.h"
#include "util/err.h"
#include "util/vec.h"

#define YOUNG_NS 3000000000ull        /* a new process may still be loading Ruby */
#define RETRY_SLOW_NS 2000000000ull   /* VM not found yet, after the first seconds */
#define NEVER UINT64_MAX              /* until the process execs another program */
#define MAX_FAILS 5                   /* failed reads in a row before a re-attach */

struct desc {
	pid_t pid;
	uint64_t first_seen_ns;
	uint64_t next_try_ns;   /* when to try attaching again; NEVER: on exec only */
	char exe[256];          /* the program when last found not Ruby */
	int member;             /* attached now */
	int capped;             /* counted in capped (the set was full) */
};

struct rbp_procset {
	pid_t root;
	struct rbp_vm_opts vo;                /* for attaching to descendants */
	struct rbp_layout_cache *own_cache;   /* vo.layout_cache when made here */
	struct rbp_procset_member **m;        /* attached processes */
	size_t n, cap;
	struct desc *d;                       /* the root and its descendants */
	size_t nd, capd;
	struct rbp_hmap seen;                 /* pid -> scan generation that last saw it */
	uint64_t gen;
	uint64_t next_scan_ns;
	uint64_t attached;
	char version[32];                     /* of the first process attached */
	struct rbp_native_stats native_gone;  /* --native: of the members dropped since */
	int all;                              /* every process of the host, no root */
	size_t max;                           /* most members at once, 0: no limit */
	uint64_t capped;                      /* processes not attached: the set was full */
	void (*drop)(void *ctx, struct rbp_procset_member *m);   /* see rbp_procset_on_drop */
	void *drop_ctx;
	int (*accept)(void *ctx, pid_t pid);                     /* see rbp_procset_filter */
	void *accept_ctx;
};


static int add_member(struct rbp_procset *s, pid_t pid, struct rbp_target *t, struct rbp_vm *vm,
		      int owned)
{
	struct rbp_procset_member *m = calloc(1, sizeof(*m));

	if (!m || rbp_grow(&s->m, &s->cap, s->n + 1, sizeof(*s->m))) {
		free(m);
		return RBP_ENOMEM;
	}
	m->pid = pid;
	m->t = t;
	m->vm = vm;
	m->owned = owned;
	rbp_proc_cmdline(pid, m->cmdline, sizeof(m->cmdline));
	if (!s->version[0])
		snprintf(s->version, sizeof(s->version), "%s", rbp_vm_info(vm)->version);
	s->m[s->n++] = m;
	s->attached++;
	return RBP_OK;
}

static void free_member(struct rbp_procset *s, struct rbp_procset_member *m)
{
	if (s->drop)
		s->drop(s->drop_ctx, m);
	rbp_native_stats_add(m->native, &s->native_gone);
	rbp_hmap_clear(&m->frame_ids);
	rbp_hmap_clear(&m->tid_names);
	rbp_native_close(m->native);
	if (m->owned) {
		rbp_vm_free(m->vm);
		rbp_target_close(m->t);
	}
	free(m);
}

static struct desc *add_desc(struct rbp_procset *s, pid_t pid, uint64_t now)
{
	if (rbp_grow(&s->d, &s->capd, s->nd + 1, sizeof(*s->d)))
		return NULL;
	struct desc *d = &s->d[s->nd++];
	memset(d, 0, sizeof(*d));
	d->pid = pid;
	d->first_seen_ns = now;
	return d;
}

static struct desc *find_desc(struct rbp_procset *s, pid_t pid)
{
	for (size_t i = 0; i < s->nd; i++)
		if (s->d[i].pid == pid)
			return &s->d[i];
	return NULL;
}

int rbp_procset_new(struct rbp_target *t, struct rbp_vm *vm, const struct rbp_vm_opts *vo,
		    struct rbp_procset **out)
{
	struct rbp_procset *s = calloc(1, sizeof(*s));
	struct timespec ts;
	struct desc *d;

	if (!s)
		return RBP_ENOMEM;
	s->root = t->pid;
	s->vo = *vo;
	/* the workers of a server run one Ruby: read its DWARF once */
	if (!s->vo.layout_cache && !(s->vo.layout_cache = s->own_cache = rbp_layout_cache_new())) {
		free(s);
		return RBP_ENOMEM;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if ((vm && add_member(s, t->pid, t, vm, 0)) ||
	    !(d = add_desc(s, t->pid, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec))) {
		rbp_procset_free(s);
		return RBP_ENOMEM;
	}
	d->member = vm != NULL;
	*out = s;
	return RBP_OK;
}

int rbp_procset_new_all(const struct rbp_vm_opts *vo, size_t max, struct rbp_procset **out)
{
	struct rbp_procset *s = calloc(1, sizeof(*s));

	if (!s)
		return RBP_ENOMEM;
	s->all = 1;
	s->max = max;
	s->vo = *vo;
	if (!s->vo.layout_cache && !(s->vo.layout_cache = s->own_cache = rbp_layout_cache_new())) {
		free(s);
		return RBP_ENOMEM;
	}
	*out = s;
	return RBP_OK;
}

uint64_t rbp_procset_capped(const struct rbp_procset *s)
{
	return s->capped;
}

void rbp_procset_on_drop(struct rbp_procset *s,
			 void (*drop)(void *ctx, struct rbp_procset_member *m), void *ctx)
{
	s->drop = drop;
	s->drop_ctx = ctx;
}

void rbp_procset_filter(struct rbp_procset *s, int (*accept)(void *ctx, pid_t pid), void *ctx)
{
	s->accept = accept;
	s->accept_ctx = ctx;
}

void rbp_procset_free(struct rbp_procset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free_member(s, s->m[i]);
	free(s->m);
	free(s->d);
	rbp_hmap_clear(&s->seen);
	rbp_layout_cache_free(s->own_cache);
	free(s);
}

/* Whether a file whose name has "ruby" in it is mapped (a cheap guess, for counting). */
static int maps_mention_ruby(pid_t pid)
{
	char path[64], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "ruby") != NULL;
	fclose(f);
	return found;
}

/* Attach to a descendant if it is Ruby; set when to try again if not. */
static int try_attach(struct rbp_procset *s, struct desc *d, uint64_t now)
{
	struct rbp_vm_opts vo = s->vo;
	struct rbp_target *t = NULL;
	struct rbp_vm *vm = NULL;
	char exe[sizeof(d->exe)];
	int err;

	rbp_proc_exe(d->pid, exe, sizeof(exe));
	if (d->next_try_ns == NEVER && !strcmp(exe, d->exe))
		return RBP_OK;   /* the same non-Ruby program as before */
	if (d->next_try_ns != NEVER && now < d->next_try_ns)
		return RBP_OK;
	memcpy(d->exe, exe, sizeof(exe));
	if (s->accept && !s->accept(s->accept_ctx, d->pid)) {
		d->next_try_ns = NEVER;
		return RBP_OK;
	}
	if (s->max && s->n >= s->max) {
		/* full: count the processes that look like Ruby, try again later */
		if (!d->capped && maps_mention_ruby(d->pid)) {
			s->capped++;
			d->capped = 1;
		}
		d->next_try_ns = now + RETRY_SLOW_NS;
		return RBP_OK;
	}
	err = rbp_target_open_pid(d->pid, &t);
	if (!err)
		err = rbp_vm_attach(t, &vo, &vm);
	if (!err) {
		if ((err = add_member(s, d->pid, t, vm, 1))) {
			rbp_vm_free(vm);
			rbp_target_close(t);
			return err;
		}
		d->member = 1;
		return RBP_OK;
	}
	rbp_target_close(t);
	if (err == RBP_ENOMEM)
		return err;
	/* not Ruby (yet?), VM not up yet, or not allowed: quietly, later */
	if (now - d->first_seen_ns < YOUNG_NS)
		d->next_try_ns = now + RBP_PROCSET_SCAN_NS;
	else if (err == RBP_ENOTRUBY || err == RBP_EPERM || err == RBP_EVERSION)
		d->next_try_ns = NEVER;
	else
		d->next_try_ns = now + RETRY_SLOW_NS;
	return RBP_OK;
}

/* Mark every listed pid seen in this scan; collect those new since the last one. */
static int mark_seen(struct rbp_procset *s, const pid_t *pids, size_t n, pid_t *fresh,
		     size_t *n_fresh)
{
	uint64_t g;
	int err;

	*n_fresh = 0;
	for (size_t i = 0; i < n; i++) {
		if (!rbp_hmap_get(&s->seen, (uint64_t)pids[i], &g) || g + 1 != s->gen)
			fresh[(*n_fresh)++] = pids[i];
		if ((err = rbp_hmap_put(&s->seen, (uint64_t)pids[i], s->gen)))
			return err;
	}
	return RBP_OK;
}

/* Forget descendants gone from /proc (their members are dropped on their failed read). */
static void sweep(struct rbp_procset *s)
{
	size_t k = 0;
	uint64_t g;

	for (size_t i = 0; i < s->nd; i++)
		if ((rbp_hmap_get(&s->seen, (uint64_t)s->d[i].pid, &g) && g == s->gen) ||
		    s->d[i].member)
			s->d[k++] = s->d[i];
	s->nd = k;
}

/* New processes whose parent is a descendant become descendants. */
static int adopt(struct rbp_procset *s, const pid_t *fresh, pid_t *parent, size_t n, uint64_t now)
{
	uint64_t start;
	int changed = 1;

	if (s->all) {
		/* every new process but rbpeek itself; those of the first scan are not young */
		for (size_t i = 0; i < n; i++)
			if (fresh[i] != getpid() && !find_desc(s, fresh[i]) &&
			    !add_desc(s, fresh[i], s->gen == 1 ? 0 : now))
				return RBP_ENOMEM;
		return RBP_OK;
	}
	for (size_t i = 0; i < n; i++)
		if (rbp_proc_parent(fresh[i], &parent[i], &start))
			parent[i] = 0;
	while (changed) {
		changed = 0;
		for (size_t i = 0; i < n; i++) {
			if (!parent[i] || !find_desc(s, parent[i]) || find_desc(s, fresh[i]))
				continue;
			if (!add_desc(s, fresh[i], now))
				return RBP_ENOMEM;
			changed = 1;
		}
	}
	return RBP_OK;
}

int rbp_procset_refresh(struct rbp_procset *s, uint64_t now)
{
	pid_t *pids = NULL, *fresh = NULL, *parent = NULL;
	size_t n = 0, n_fresh = 0;
	int err;

	if (now < s->next_scan_ns)
		return RBP_OK;
	s->next_scan_ns = now + RBP_PROCSET_SCAN_NS;
	s->gen++;
	if ((err = rbp_proc_list(&pids, &n)))
		return err == RBP_ENOMEM ? err : RBP_OK;
	if (!(fresh = malloc((n + 1) * sizeof(*fresh))) ||
	    !(parent = malloc((n + 1) * sizeof(*parent)))) {
		err = RBP_ENOMEM;
		goto done;
	}
	if ((err = mark_seen(s, pids, n, fresh, &n_fresh)))
		goto done;
	/* forget pids long gone (a host runs through many), keeping the map small */
	if (s->seen.len > 2 * n + 1024) {
		rbp_hmap_reset(&s->seen);
		for (size_t i = 0; i < n && !err; i++)
			err = rbp_hmap_put(&s->seen, (uint64_t)pids[i], s->gen);
		if (err)
			goto done;
	}
	sweep(s);
	if ((err = adopt(s, fresh, parent, n_fresh, now)))
		goto done;
	for (size_t i = 0; i < s->nd && !err; i++)
		if (!s->d[i].member)
			err = try_attach(s, &s->d[i], now);
done:
	free(pids);
	free(fresh);
	free(parent);
	return err;
}

size_t rbp_procset_count(const struct rbp_procset *s)
{
	return s->n;
}

struct rbp_procset_member *rbp_procset_member(struct rbp_procset *s, size_t i)
{
	return s->m[i];
}

pid_t rbp_procset_root(const struct rbp_procset *s)
{
	return s->root;
}

uint64_t rbp_procset_attached(const struct rbp_procset *s)
{
	return s->attached;
}

void rbp_procset_native_stats(const struct rbp_procset *s, struct rbp_native_stats *sum)
{
	rbp_native_stats_sum(sum, &s->native_gone);
	for (size_t i = 0; i < s->n; i++)
		rbp_native_stats_add(s->m[i]->native, sum);
}

const char *rbp_procset_version(const struct rbp_procset *s)
{
	return s->version;
}

static int alive(pid_t pid)
{
	struct rbp_task_info ti;
	return !rbp_task_info(pid, pid, &ti) && ti.state != 'Z' && ti.state != 'X';
}

int rbp_procset_failed(struct rbp_procset *s, size_t i)
{
	struct rbp_procset_member *m = s->m[i];
	struct desc *d;

	if (++m->fails < MAX_FAILS && alive(m->pid))
		return 0;
	if ((d = find_desc(s, m->pid))) {
		d->member = 0;
		d->next_try_ns = 0;   /* still there at the next scan: attach again */
		d->exe[0] = 0;
	}
	free_member(s, m);
	memmove(&s->m[i], &s->m[i + 1], (s->n - i - 1) * sizeof(*s->m));
	s->n--;
	return 1;
}

void rbp_procset_ok(struct rbp_procset *s, size_t i)
{
	s->m[i]->fails = 0;
}
