/*
 * perfring.h - the reader's side of a perf_event mmap ring buffer, shared
 * by the uprobe events (uprobe.c) and the eBPF output rings (framecap.c).
 *
 * The kernel writes records at data_head; the reader copies each one out
 * (a record may wrap around the end of the data area), hands it on, and
 * publishes data_tail so the space can be reused.
 */
#ifndef RBP_PROC_PERFRING_H
#define RBP_PROC_PERFRING_H

#include <stddef.h>
#include <stdint.h>

struct rbp_perf_ring {
	void *base;          /* the mapping: one header page, then the data pages */
	size_t len;          /* bytes mapped */
	size_t pages;        /* data pages (a power of two) */
	size_t page;         /* page size */
};

/*
 * Map the ring of perf event fd with up to max_pages data pages (a power
 * of two), halving down to min_pages while the locked-memory limit
 * refuses.  RBP_OK or an RBP_E* code from errno.
 */
int rbp_perf_ring_map(struct rbp_perf_ring *r, int fd, size_t max_pages, size_t min_pages);
void rbp_perf_ring_unmap(struct rbp_perf_ring *r);   /* safe on a zeroed ring */

/*
 * Hand every pending record to fn: its type (PERF_RECORD_*) and body (the
 * bytes after the header, copied into buf, which fn may modify: at most cap
 * bytes, the rest cut).
 * fn returning nonzero stops the read (the records after it stay) and is
 * returned.
 */
int rbp_perf_ring_drain(struct rbp_perf_ring *r, void *buf, size_t cap,
			int (*fn)(void *ctx, uint32_t type, void *body, size_t len),
			void *ctx);

/* errno of a failed perf_event_open/mmap/ioctl as an RBP_E* code. */
int rbp_perf_errno(int e);

#endif
