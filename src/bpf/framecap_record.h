/*
 * framecap_record.h - what the frame-copying eBPF programs
 * (src/bpf/framecap.bpf.c, oncpu.bpf.c) and their loaders and readers
 * (src/proc/framecap.c, oncpu.c, bpfcommon.c; the limits and the layout
 * through proc/framecap.h) share, defined here only: the limits, the
 * layout of the interpreter's structures a program is given, and the
 * record it emits.  Plain fixed-width types only: this header is compiled
 * both by clang -target bpf and by the host compiler (libbpf-tools' way).
 */
#ifndef RBP_BPF_FRAMECAP_RECORD_H
#define RBP_BPF_FRAMECAP_RECORD_H

#include <linux/types.h>

#define FC_MAX_FRAMES 256   /* control frames copied per hit */
#define FC_MAX_PROBES 8     /* programs in the object, one per probe */
#define FC_MAX_CFP 96       /* largest control frame the record has room for (a per-CPU
                             * map value is at most 32 KiB) */
#define FC_EC_HEAD 64       /* bytes of the execution context copied */
#define FC_ENV_WORDS 3      /* ep[-2], ep[-1], ep[0] per frame */
#define FC_SPAN 16384       /* bytes of VM stack read at once for the frames' environments */
#define FC_MAX_COUNTED 32768 /* distinct arguments (classes) counted; more: uncounted */
/* slots of the per-CPU totals map (counting) */
#define FC_TOTAL_HITS 0      /* every hit counted */
#define FC_TOTAL_UNCOUNTED 1 /* ... of which the counts map had no room for */
#define FC_TOTALS 2
#define FC_GC_FLAGS 128     /* bytes of rb_objspace's head copied for the collector's phase
                             * (RV_GC_FLAGS_MAX) */

/*
 * Where things are in the interpreter's structures (bytes): the framecap
 * program gets it as read-only data before load, the oncpu program per
 * process in its procs map.
 */
struct rbp_framecap_layout {
	__s32 thread_ec;         /* in the thread: the ec pointer (or the ec itself) */
	__u32 ec_embedded;       /* 1: thread + thread_ec is the ec */
	__u32 ec_vm_stack;       /* in the ec: the VM stack (pointer) */
	__u32 ec_vm_stack_size;  /* ... its size in words */
	__u32 ec_cfp;            /* ... the innermost control frame (pointer) */
	__u32 cfp_size;          /* one control frame */
	__u32 cfp_ep;            /* in a control frame: its environment pointer */
	__u32 gc_len;            /* 0: no collector's flags to copy; else copy FC_GC_FLAGS bytes
	                          * at gc_addr (the oncpu program only; the bytes the
	                          * decoder uses) */
	__u64 gc_addr;           /* rb_objspace: its flags say whether the collector runs */
	__u64 gvl_addr;          /* where the VM names the GVL's owner (a thread), 0 unknown
	                          * (the oncpu program only) */
};

/*
 * One copy.  Only the first FC_HDR + n * (cfp_size + 24) bytes are emitted:
 * n control frames (innermost first, cfp_size bytes each) then, for each,
 * its three environment words.
 */
struct fc_record {
	__u32 tid;               /* as the reader's PID namespace numbers it */
	__u32 probe;             /* which program (one per probe) fired */
	__u64 time_ns;           /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 arg;               /* the probe's argument register */
	__u64 cfp;               /* address the frames were copied from */
	__u32 n_frames;
	__u32 truncated;         /* more than FC_MAX_FRAMES: outermost dropped */
	__u64 ec;                /* the execution context (scratch) */
	__u8 ec_head[FC_EC_HEAD];
	__u8 gc_flags[FC_GC_FLAGS];   /* rb_objspace's head at the tick (gc_len != 0) */
	__u64 gvl_owner;         /* the GVL's owner at the tick (gvl_addr != 0), else 0 */
	__u8 data[FC_MAX_FRAMES * (FC_MAX_CFP + 8 * FC_ENV_WORDS)];
};

#define FC_HDR 248           /* offsetof(struct fc_record, data) */

#endif
