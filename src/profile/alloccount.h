/*
 * alloccount.h - what `rbpeek alloc` makes of the allocations it is told
 * of: an exact count per class, and for a random subset of them the
 * allocating Ruby stack as a profile sample whose leaf frame names the
 * class ("String"), so every record format shows who allocates what.
 *
 * The watcher (allocwatch.h) hands it two kinds of events: a report of
 * every allocation (thread, time, class), and, for exact sites, the
 * frames the kernel copied at some of them.  With approximate sites a
 * report is followed, with probability pick, by a read of the thread's
 * stack from outside (through the target's reader: the seam the unit
 * tests use, on memory images of real processes).
 *
 * Sampling policy.  pick follows the allocation rate (rbp_alloc_adapt_pick,
 * every 100 ms) so that about `rate` stacks are read per second; a random
 * choice cannot lock onto a loop's rhythm.  A token bucket
 * (rbp_alloc_refill: `rate` tokens a second, at most a tenth of a second's
 * worth) bounds the work while pick catches up with a changing rate.
 *
 * Nothing here prints; errors are RBP_E* values (only RBP_ENOMEM stops
 * the count: an unreadable stack is counted, not fatal).
 */
#ifndef RBP_PROFILE_ALLOCCOUNT_H
#define RBP_PROFILE_ALLOCCOUNT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "ruby/vm.h"
#include "util/hmap.h"

/* One (site, class) pair and how many stack samples it got. */
struct rbp_alloc_row {
	uint32_t site;    /* profile frame id of the innermost frame, UINT32_MAX none */
	uint32_t cls;     /* profile frame id of the class leaf */
	uint64_t n;
};

/* A line of a table: a class, or a site with the class allocated most there. */
struct rbp_alloc_tally {
	uint32_t key;     /* profile frame id (class or site; UINT32_MAX: no Ruby frame) */
	uint32_t cls;     /* sites: the class allocated most there */
	uint64_t n;       /* classes: allocations; sites: stack samples */
	uint64_t cls_n;   /* sites: the stack samples of cls there */
};

struct rbp_alloc_count {
	struct rbp_vm *vm;           /* not owned */
	struct rbp_profile *p;       /* the samples go here; not owned */
	pid_t pid;                   /* the target, for thread names */
	uint32_t rate;               /* stacks per second wanted */
	uint64_t start;              /* CLOCK_MONOTONIC ns: sample times count from it */
	struct rbp_stacks stacks;    /* scratch: the stack just read or decoded */
	struct rbp_stacks threads;   /* the thread list (names), for decoded copies */
	struct rbp_hmap frame_ids;   /* mix(label*, path*, line, kind) -> frame id + 1 */
	struct rbp_hmap class_ids;   /* klass VALUE -> class frame id + 1 */
	struct rbp_hmap class_n;     /* class frame id + 1 -> allocations (every one) */
	struct rbp_hmap row_index;   /* mix(site + 1, cls + 1) -> row index + 1 */
	struct rbp_alloc_row *rows;
	size_t n_rows, cap_rows;
	uint64_t allocs;             /* allocations reported (all of them) */
	uint64_t samples;            /* of which stacks were read (profile samples) */
	uint64_t no_stack;           /* stacks with no Ruby frame (or unreadable) */
	uint64_t read_errors;        /* ... of which the read failed */
	uint64_t truncated;          /* copies with frames beyond the copy's limit */
	uint32_t pick;               /* a stack is read when random32 < pick */
	uint64_t rng;                /* xorshift64 state */
	uint64_t allocs_at_adapt;    /* allocs when pick was last adapted */
	uint64_t adapt_time;         /* ... and when */
	double tokens;               /* stack reads allowed now */
	uint64_t token_time;         /* when tokens were last refilled */
	uint64_t age_sum, age_max;   /* ns from the allocation to its stack read */
	struct rbp_hmap klass_n;     /* counted in the kernel: klass VALUE -> its total so far */
	uint64_t uncounted;          /* ... allocations the kernel's map had no room for */
};

/* Count into p for process pid (c is zeroed first); free it with rbp_alloc_count_free(). */
void rbp_alloc_count_init(struct rbp_alloc_count *c, struct rbp_vm *vm, struct rbp_profile *p,
			  pid_t pid, uint32_t rate);
/*
 * The count starts at time start (CLOCK_MONOTONIC ns; the random draws are
 * seeded from it): every stack is read until the rate is known (pick
 * UINT32_MAX), with one token.
 */
void rbp_alloc_count_begin(struct rbp_alloc_count *c, uint64_t start);
void rbp_alloc_count_free(struct rbp_alloc_count *c);

/*
 * An allocation of class klass by thread tid at time_ns: counted.  With
 * read_stack (approximate sites), the thread's stack is read now when the
 * random draw is below pick and a token is left, and becomes a sample.
 */
int rbp_alloc_count_report(struct rbp_alloc_count *c, pid_t tid, uint64_t time_ns,
			   uint64_t klass, int read_stack);
/*
 * Counted in the kernel (exact sites): klass has had total allocations so
 * far (totals only grow); the class table takes the difference since the
 * last call.  c->allocs is the caller's to set (the kernel's total of hits).
 */
int rbp_alloc_count_class_total(struct rbp_alloc_count *c, uint64_t klass, uint64_t total);
/*
 * Frames the kernel copied at an allocation of class klass (exact sites),
 * decoded into a sample when a token is left.  truncated: the copy lost
 * its outermost frames.
 */
int rbp_alloc_count_copy(struct rbp_alloc_count *c, const struct rbp_frame_copy *fc,
			 uint64_t time_ns, uint64_t klass, int truncated);
/*
 * The thread list, for the names of the threads of decoded copies, and the
 * tids and rb_thread_t addresses of those with a readable stack in
 * tids/addrs (at most max; *n of them).
 */
int rbp_alloc_count_threads(struct rbp_alloc_count *c, pid_t *tids, uint64_t *addrs, size_t max,
			    size_t *n);

/* The chance of a stack read, so that about rate stacks a second are read at the
 * allocation rate since the last call (call it every 100 ms).  Returns c->pick. */
uint32_t rbp_alloc_adapt_pick(struct rbp_alloc_count *c, uint64_t now);
/* The same chance as a threshold, for a rate of allocs_per_sec (the kernel's start). */
uint32_t rbp_alloc_pick_for(uint32_t rate, double allocs_per_sec);
/* Tokens for the time since the last refill (rate a second, at most rate / 10, at least 1). */
void rbp_alloc_refill(struct rbp_alloc_count *c, uint64_t now);

/*
 * Allocations per class (exact), and stack samples per site with the class
 * allocated most there, largest first (then by frame id).  A new array in
 * *out (free it), NULL with RBP_ENOMEM.
 */
int rbp_alloc_tally_classes(const struct rbp_alloc_count *c, struct rbp_alloc_tally **out,
			    size_t *n);
int rbp_alloc_tally_sites(const struct rbp_alloc_count *c, struct rbp_alloc_tally **out,
			  size_t *n);

#endif
