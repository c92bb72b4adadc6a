/*
 * procset.h - a process and every Ruby process descended from it, for
 * --subprocesses (forking servers: puma, unicorn, sidekiq swarms, ...).
 *
 * The set starts with the root (already attached by the caller) and is
 * kept current by rbp_procset_refresh(), which the sampler calls every
 * tick: at most every RBP_PROCSET_SCAN_NS it lists /proc, reads the parent
 * of each process it has not seen before, and attaches to new descendants
 * that are Ruby.  Descendants that are not Ruby (shells, helpers) are
 * remembered and tried again only when they exec another program (or
 * within their first seconds, while a Ruby may still be loading).  Members
 * the sampler can no longer read are dropped: quietly when they exited,
 * and re-attached at the next scan when still alive (a Ruby that exec'd
 * another Ruby).
 *
 * Cost: one readdir of /proc per scan (about 100,000 instructions for 100
 * processes, bench/subprocesses.sh), plus one read of /proc/PID/stat per
 * process started since the last scan, plus one readlink per non-Ruby
 * descendant.  Processes outside the tree are read once in their lifetime
 * (the first scan reads them all: about 12,000 instructions each).  (The cheaper
 * /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN, which common
 * kernels lack, and misses grandchildren whose parent died.)
 */
#ifndef RBP_PROFILE_PROCSET_H
#define RBP_PROFILE_PROCSET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/native.h"
#include "proc/target.h"
#include "ruby/vm.h"
#include "util/hmap.h"

#define RBP_PROCSET_SCAN_NS 250000000ull   /* new children show within 0.25 s + attach */

struct rbp_procset_member {
	pid_t pid;
	struct rbp_target *t;     /* owned unless this is the caller's root */
	struct rbp_vm *vm;
	int owned;                /* 0 for the root's target and VM (the caller's) */
	char cmdline[160];        /* at attach time */
	unsigned fails;           /* consecutive failed reads */
	/* the sampler's per-process state (interned by this process's walker) */
	struct rbp_hmap frame_ids, tid_names;
	uint32_t root_node;       /* its "process PID: cmdline" node, 0 until made */
	/* --native: its unwinder, opened by the sampler on first use and
	 * closed with the member; native_err: why it could not be opened */
	struct rbp_native *native;
	int native_err;
	void *user;               /* the driver's own per-process state (the agent's), NULL */
};

struct rbp_procset;

/*
 * A set of root (t, vm: the caller's, attached; they stay the caller's)
 * and, after the first refresh, its Ruby descendants.  vm may be NULL for
 * a root that is not Ruby (yet): it is attached like a descendant once it
 * is.  vo is copied (force_version, discovery) for attaching.  RBP_ENOMEM.
 */
int rbp_procset_new(struct rbp_target *t, struct rbp_vm *vm, const struct rbp_vm_opts *vo,
		    struct rbp_procset **out);
void rbp_procset_free(struct rbp_procset *s);   /* NULL-safe; detaches every member */

/*
 * A set of every Ruby process on the host (rbpeek agent): no root; each
 * scan tries every process it has not seen before, by the same rules as
 * descendants (processes already running at the first scan are not young).
 * At most max members (0: no limit): processes beyond it are not attached
 * (rbp_procset_capped counts them) and tried again later.  RBP_ENOMEM.
 */
int rbp_procset_new_all(const struct rbp_vm_opts *vo, size_t max, struct rbp_procset **out);
/* Processes left unattached because the set was full (each counted once). */
uint64_t rbp_procset_capped(const struct rbp_procset *s);
/*
 * Attach only to processes for which accept(ctx, pid) says nonzero, asked
 * before anything else is read of them (a process refused is asked again
 * only when it execs another program).  NULL: all.
 */
void rbp_procset_filter(struct rbp_procset *s, int (*accept)(void *ctx, pid_t pid), void *ctx);
/*
 * Call drop(ctx, m) just before member m is detached and freed (by
 * rbp_procset_failed or rbp_procset_free), e.g. to flush its profile.
 */
void rbp_procset_on_drop(struct rbp_procset *s,
			 void (*drop)(void *ctx, struct rbp_procset_member *m), void *ctx);

/* Scan for new descendants when a scan is due (now_ns: any monotonic clock).  RBP_ENOMEM. */
int rbp_procset_refresh(struct rbp_procset *s, uint64_t now_ns);

size_t rbp_procset_count(const struct rbp_procset *s);
struct rbp_procset_member *rbp_procset_member(struct rbp_procset *s, size_t i);
pid_t rbp_procset_root(const struct rbp_procset *s);
/* Processes attached since the start (the root included). */
uint64_t rbp_procset_attached(const struct rbp_procset *s);
/*
 * --native: add to *sum the unwinding done by the members' own unwinders
 * (every member but the root, which uses the caller's), those dropped
 * included.
 */
void rbp_procset_native_stats(const struct rbp_procset *s, struct rbp_native_stats *sum);
/* The Ruby version of the first process attached, "" before any. */
const char *rbp_procset_version(const struct rbp_procset *s);

/*
 * A read of member i failed: drop it when its process is gone or after
 * a few failures in a row (to be re-attached by a later scan when it is
 * still a Ruby process).  Returns 1 when dropped (then indices above i
 * shift down by one).
 */
int rbp_procset_failed(struct rbp_procset *s, size_t i);
/* A read of member i worked. */
void rbp_procset_ok(struct rbp_procset *s, size_t i);

#endif
