// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * framecap.bpf.c - copy a thread's interpreter frames in the kernel at the
 * moment a uprobe fires (loaded by src/proc/framecap.c; see framecap.h
 * there for the whole story).  Compiled by clang -target bpf, embedded in
 * rbpeek as a libbpf skeleton.
 *
 * At each hit, a program:
 *   1. draws a random number and goes on only when it is below config.pick
 *      (the user keeps the number of copies per second bounded);
 *   2. looks the thread id, as the reader's PID namespace numbers it, up in
 *      the threads map (tid -> thread descriptor address, filled by user
 *      space);
 *   3. reads the execution context from the thread (at every hit: a fiber
 *      switch changes it), then the ec's head: cfp, vm_stack, vm_stack_size;
 *   4. copies the control frames [cfp, vm_stack + size), at most
 *      FC_MAX_FRAMES of them, in one read, then each frame's three
 *      environment words (ep[-2..0]);
 *   5. emits the record through the per-CPU perf ring of the events map.
 * Before all that, with `counting` set (rbpeek alloc), it counts the hit:
 * only for the process `tgid` (one uprobe event per probe serves every
 * thread of the process, see uprobe.h), into counts[arg] (the class), or
 * uncounted[0] when that map is full, and then returns 0: no perf sample
 * per hit, the counts are read from the maps.  Without `counting` it
 * returns 1: the uprobe's own perf sample is written as before.
 *
 * One program per probe (probe0..probe7, the unused ones not loaded): the
 * probe's number is a constant in each, its argument register comes from
 * the read-only data, as does the layout; both are set before load, so the
 * verifier sees them as constants and drops the branches not taken.
 * Only UAPI headers: no vmlinux.h, no CO-RE (the program reads user memory
 * and the uprobe's registers, nothing of the kernel's).  x86-64 and aarch64:
 * libbpf's PT_REGS_PARM1..3 for the __TARGET_ARCH_ the Makefile sets (the
 * UAPI struct pt_regs on x86-64, struct user_pt_regs on aarch64).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "framecap_record.h"
#include "frames.bpf.h"

/* Set by the loader before load (read-only afterwards). */
const volatile struct rbp_framecap_layout layout;
const volatile __u8 arg_reg[FC_MAX_PROBES];   /* 0, 1, 2: the first, second, third argument */
const volatile __u64 pidns_dev, pidns_ino;    /* the reader's PID namespace */
const volatile __u32 counting;                /* 1: count the hits (see above) */
const volatile __u32 tgid;                    /* ... of this process (reader's namespace) */

struct config {
	__u32 pick;              /* copy when bpf_get_prandom_u32() < pick */
	__u32 stopped;           /* 1: do nothing at all (the watch is over) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);      /* tid */
	__type(value, __u64);    /* thread descriptor (rb_thread_t *) */
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

FC_SCRATCH_MAP(scratch);

/* counting: hits per argument (the class), and those the full map could not hold */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FC_MAX_COUNTED);
	__type(key, __u64);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FC_TOTALS);
	__type(key, __u32);
	__type(value, __u64);
} totals SEC(".maps");

/* One BPF-output perf event per CPU, each with its ring (set by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

/*
 * The probe's argument register.  The three are read at fixed offsets (the
 * verifier refuses a context read at a computed one, which is what clang
 * would make of a switch over them); the empty asm keeps the reads apart.
 */
static __always_inline __u64 arg_of(const struct pt_regs *regs, __u32 probe)
{
	__u64 a0 = PT_REGS_PARM1(regs), a1 = PT_REGS_PARM2(regs), a2 = PT_REGS_PARM3(regs);

	asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2));
	return arg_reg[probe] == 1 ? a1 : arg_reg[probe] == 2 ? a2 : a0;
}

/* counting: one more hit of arg (the slot of the totals map, then the class) */
static __always_inline void count(__u64 arg)
{
	__u32 k = FC_TOTAL_HITS;
	__u64 one = 1, *v;

	if ((v = bpf_map_lookup_elem(&totals, &k)))
		*v += 1;
	if ((v = bpf_map_lookup_elem(&counts, &arg))) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (!bpf_map_update_elem(&counts, &arg, &one, BPF_NOEXIST))
		return;
	if ((v = bpf_map_lookup_elem(&counts, &arg))) {   /* another CPU made it meanwhile */
		__sync_fetch_and_add(v, 1);
		return;
	}
	k = FC_TOTAL_UNCOUNTED;   /* the map is full */
	if ((v = bpf_map_lookup_elem(&totals, &k)))
		*v += 1;
}

static __always_inline int copy_frames(struct pt_regs *regs, __u32 probe)
{
	struct rbp_framecap_layout L = layout;
	struct bpf_pidns_info ns;
	struct config *cfg;
	struct fc_record *rec;
	__u64 *thread;
	__u32 zero = 0, tid, size;
	int ret = counting ? 0 : 1;

	if (!(cfg = bpf_map_lookup_elem(&config, &zero)) || cfg->stopped)
		return ret;
	/* 0. the thread (rbpeek may run in a container: its own namespace's tids), the count */
	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
		return ret;
	if (counting) {
		if (ns.tgid != tgid)
			return 0;   /* a vfork child, sharing the memory for a while */
		count(arg_of(regs, probe));
	}
	/* 1. sampling */
	if (bpf_get_prandom_u32() >= cfg->pick)
		return ret;
	/* 2. the thread */
	tid = ns.pid;
	if (!(thread = bpf_map_lookup_elem(&threads, &tid)))
		return ret;
	if (!(rec = bpf_map_lookup_elem(&scratch, &zero)))
		return ret;
	rec->tid = tid;
	rec->probe = probe;
	rec->time_ns = bpf_ktime_get_ns();
	rec->arg = arg_of(regs, probe);
	/* 3, 4. the execution context, the frames and their environments */
	if (!(size = fc_copy(rec, &L, *thread, 0)))
		return ret;
	/* 5. out */
	barrier_var(size);         /* checked in the register passed (6.1's verifier) */
	if (size > sizeof(*rec))   /* cannot be: for the verifier */
		return ret;
	bpf_perf_event_output(regs, &events, BPF_F_CURRENT_CPU, rec, size);
	return ret;
}

#define PROBE(i) \
	SEC("kprobe") int probe##i(struct pt_regs *regs) { return copy_frames(regs, i); }
PROBE(0)
PROBE(1)
PROBE(2)
PROBE(3)
PROBE(4)
PROBE(5)
PROBE(6)
PROBE(7)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
