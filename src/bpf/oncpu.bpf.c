// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * oncpu.bpf.c - the in-kernel sampler: at each tick of a per-CPU software
 * clock (a perf event, PERF_COUNT_SW_CPU_CLOCK at the sampling rate), when
 * the thread the tick interrupted belongs to a watched process, copy its
 * interpreter frames (frames.bpf.h, as framecap.bpf.c does at a uprobe)
 * into the ring buffer.  Loaded by src/proc/oncpu.c.
 *
 * The stack is read at the instant the thread was interrupted, on its own
 * CPU: consistent by construction, with no ptrace and no stop.  Only
 * threads on a CPU are seen (on-CPU sampling); the cost follows the CPU
 * time of the watched processes, not their number: a tick on a CPU running
 * anything else ends after two map lookups.
 *
 * With the frames goes the head of the process's rb_objspace (its flags:
 * whether the collector runs, and in which phase), read at the same
 * instant, so that samples taken while it runs carry a GC frame, and the
 * word naming the GVL's owner (whether the sampled thread holds it).
 *
 * Maps, filled by user space:
 *   procs    tgid -> struct rbp_framecap_layout of its interpreter (a process watched)
 *   threads  tid -> thread descriptor address (rb_thread_t *)
 * Output: records (struct fc_record, arg = the process id) in the ring
 * buffer "samples"; counters per CPU in "counts" (ticks on a watched
 * process, of which copied, dropped for want of ring space, on a thread
 * not in the threads map yet).
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "framecap_record.h"
#include "frames.bpf.h"

const volatile __u64 pidns_dev, pidns_ino;    /* the reader's PID namespace */
/* 1: the reader is in the initial PID namespace, whose ids the kernel has
 * at hand (bpf_get_current_pid_tgid, half the cost of the namespaced look-up
 * on the path every tick of every CPU takes) */
const volatile __u32 initial_pidns;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);      /* tgid */
	__type(value, struct rbp_framecap_layout);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);      /* tid */
	__type(value, __u64);    /* thread descriptor */
} threads SEC(".maps");

FC_SCRATCH_MAP(scratch);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);   /* 4 MiB; the loader may change it */
} samples SEC(".maps");

enum { C_WATCHED, C_COPIED, C_DROPPED, C_NO_THREAD, C_N };
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_N);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&counts, &what);
	if (c)
		*c += 1;
}

SEC("perf_event")
int on_tick(struct bpf_perf_event_data *ctx)
{
	struct bpf_pidns_info ns;
	struct rbp_framecap_layout *L;
	struct fc_record *rec;
	__u64 *thread;
	__u32 zero = 0, tid, tgid;
	__u64 size;

	if (initial_pidns) {
		__u64 id = bpf_get_current_pid_tgid();
		ns.pid = (__u32)id;
		ns.tgid = (__u32)(id >> 32);
	} else if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns))) {
		return 0;
	}
	tgid = ns.tgid;
	if (!(L = bpf_map_lookup_elem(&procs, &tgid)))
		return 0;
	count(C_WATCHED);
	tid = ns.pid;
	if (!(thread = bpf_map_lookup_elem(&threads, &tid))) {
		count(C_NO_THREAD);
		return 0;
	}
	if (!(rec = bpf_map_lookup_elem(&scratch, &zero)))
		return 0;
	rec->tid = tid;
	rec->probe = 0;
	rec->time_ns = bpf_ktime_get_ns();
	rec->arg = tgid;
	if (!(size = fc_copy(rec, L, *thread, 1)))
		return 0;
	/* the collector's phase at this tick: during_gc and the mode, in one read */
	if (L->gc_len)
		bpf_probe_read_user(rec->gc_flags, sizeof(rec->gc_flags), (void *)L->gc_addr);
	/* and which thread holds the GVL (a failed read leaves 0: unknown) */
	rec->gvl_owner = 0;
	if (L->gvl_addr)
		bpf_probe_read_user(&rec->gvl_owner, sizeof(rec->gvl_owner), (void *)L->gvl_addr);
	barrier_var(size);         /* checked in the register passed (6.1's verifier) */
	if (size > sizeof(*rec))   /* cannot be: for the verifier */
		return 0;
	if (bpf_ringbuf_output(&samples, rec, size, BPF_RB_NO_WAKEUP))
		count(C_DROPPED);
	else
		count(C_COPIED);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
