/*
 * frames.bpf.h - the frame copy both eBPF programs make (framecap.bpf.c at
 * a uprobe, oncpu.bpf.c at a timer tick): from a thread descriptor, its
 * execution context, the control frames [cfp, vm_stack + size) and each
 * frame's environment words, into a struct fc_record (framecap_record.h).
 * Included by the .bpf.c files only (restricted C).
 */
#ifndef RBP_BPF_FRAMES_BPF_H
#define RBP_BPF_FRAMES_BPF_H

#include "framecap_record.h"

#define FC_SPAN_SCAN 8   /* frames looked at for the innermost environment on the stack */

/* The per-CPU record being built: too big for a program's 512-byte stack. */
#define FC_SCRATCH_MAP(name)                            \
	struct {                                        \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); \
		__uint(max_entries, 1);                 \
		__type(key, __u32);                     \
		__type(value, struct fc_record);        \
	} name SEC(".maps")

/* A stretch of the VM stack, per CPU: the frames' environments, read at once. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[FC_SPAN + 8 * FC_ENV_WORDS]);   /* room past a masked offset */
} fc_span SEC(".maps");

static const __u32 fc_zero = 0;

/* *ep = the environment pointer at offset at of the frames copied; 0 when out of bounds. */
static __always_inline int fc_ep(const struct fc_record *rec, __u64 at, __u64 *ep)
{
	barrier_var(at);   /* bounded in the register used (6.1's verifier) */
	if (at > (__u64)FC_MAX_FRAMES * FC_MAX_CFP - 8)
		return 0;
	*ep = *(const __u64 *)(rec->data + at);
	return 1;
}

/*
 * Copy thread th's frames into rec (tid, probe, time and arg are the
 * caller's).  Returns the bytes of rec to emit, 0 when there is nothing
 * (no such memory, a thread not started, a layout out of bounds).  The
 * layout's bounds are checked here: where it is constant (read-only data)
 * the verifier drops the checks, where it comes from a map they are what
 * lets the verifier accept the variable offsets.  use_span (a constant):
 * the environment words from one read of the stack (see below), else one
 * read per frame; the uprobe program (framecap.bpf.c) does not use it: with
 * its layout constant a 6.1 verifier (Debian 12) walks the loops frame by
 * frame without pruning, and on an arm64 machine under emulation the load
 * had not ended after 10 minutes.
 */
static __always_inline __u32 fc_copy(struct fc_record *rec, const struct rbp_framecap_layout *L,
				      __u64 th, const int use_span)
{
	__u64 cs = L->cfp_size, cfp_ep = L->cfp_ep;
	__u64 o_cfp = L->ec_cfp, o_stack = L->ec_vm_stack, o_size = L->ec_vm_stack_size;
	__u64 cfp, stack, end, n;

	if (cs < 8 || cs > FC_MAX_CFP || cfp_ep > cs - 8 || o_cfp > FC_EC_HEAD - 8 ||
	    o_stack > FC_EC_HEAD - 8 || o_size > FC_EC_HEAD - 8 || ((o_cfp | o_stack | o_size) & 7))
		return 0;
	/* the execution context (read at every hit: a fiber switch changes it) and its head */
	rec->ec = th + L->thread_ec;
	if (!L->ec_embedded && bpf_probe_read_user(&rec->ec, sizeof(rec->ec), (void *)rec->ec))
		return 0;
	if (bpf_probe_read_user(rec->ec_head, sizeof(rec->ec_head), (void *)rec->ec))
		return 0;
	/*
	 * The offsets bounded by a mask (the identity on offsets checked
	 * above), in the registers the loads use: a check leaves clang free to
	 * keep the checked copy and spill another, whose bound a 6.1 verifier
	 * (Debian 12's kernel) loses on the way through the stack ("R2
	 * unbounded memory access"; newer kernels track it); a masked value
	 * is bounded in every copy.
	 */
	barrier_var(o_cfp);
	barrier_var(o_stack);
	barrier_var(o_size);
	o_cfp &= FC_EC_HEAD - 8;
	o_stack &= FC_EC_HEAD - 8;
	o_size &= FC_EC_HEAD - 8;
	cfp = *(__u64 *)(rec->ec_head + o_cfp);
	stack = *(__u64 *)(rec->ec_head + o_stack);
	end = stack + (*(__u64 *)(rec->ec_head + o_size) << 3);
	if (!cfp || cfp > end)   /* not started, or garbage */
		return 0;
	rec->cfp = cfp;
	/* the frames, in one read */
	n = (end - cfp) / cs;
	rec->truncated = n > FC_MAX_FRAMES;
	if (n > FC_MAX_FRAMES)
		n = FC_MAX_FRAMES;
	rec->n_frames = n;
	__u64 size = n * cs;
	barrier_var(size);   /* bounded where the helper reads it (6.1's verifier) */
	if (size > (__u64)FC_MAX_FRAMES * FC_MAX_CFP)
		return 0;
	if (bpf_probe_read_user(rec->data, size, (void *)cfp))
		return 0;
	/*
	 * each frame's environment words, after the frames.  A frame's
	 * environment is on the VM stack, below the frames, where the frame
	 * was pushed (unless a block captured it: then on the heap), the
	 * outermost frames' at its bottom and the innermost's highest.  So
	 * the stack from its bottom to the innermost environment found in
	 * the first FC_SPAN_SCAN frames - at most its top FC_SPAN bytes - is
	 * read in one go and the words are taken from it; the others are
	 * read one frame at a time.  A failed read leaves zeros (the helper
	 * clears its destination), which the reader skips.
	 */
	__u8 *env = rec->data + size;
	__u64 hi = 0, from = 0, to = 0, ep;
	for (__u32 i = 0; use_span && i < FC_SPAN_SCAN && i < n; i++) {
		if (!fc_ep(rec, i * cs + cfp_ep, &ep))
			break;
		if (ep >= stack + 16 && ep + 8 <= cfp) {
			hi = ep + 8;
			break;
		}
	}
	__u8 *span = use_span ? bpf_map_lookup_elem(&fc_span, &fc_zero) : NULL;
	if (span && hi) {
		from = hi - stack > FC_SPAN ? hi - FC_SPAN : stack;
		__u64 len = hi - from;
		barrier_var(len);
		if (len <= FC_SPAN && !bpf_probe_read_user(span, len, (void *)from))
			to = hi;
	}
	for (__u32 i = 0; i < FC_MAX_FRAMES && i < n; i++) {
		if (!fc_ep(rec, i * cs + cfp_ep, &ep))
			break;
		__u64 *w = (__u64 *)(env + i * 8 * FC_ENV_WORDS);
		if (span && ep - 16 >= from && ep + 8 <= to) {
			__u64 off = ep - 16 - from;
			if (off <= FC_SPAN - 8 * FC_ENV_WORDS) {
				barrier_var(off);
				off &= FC_SPAN - 1;   /* bounded in every copy (as above) */
				w[0] = *(__u64 *)(span + off);
				w[1] = *(__u64 *)(span + off + 8);
				w[2] = *(__u64 *)(span + off + 16);
				continue;
			}
		}
		bpf_probe_read_user(w, 8 * FC_ENV_WORDS, (void *)(ep - 16));
	}
	return FC_HDR + n * (cs + 8 * FC_ENV_WORDS);
}

#endif
