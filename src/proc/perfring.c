/*
 * perfring.c - reading perf_event mmap rings (see perfring.h).
 */
#include "proc/perfring.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/err.h"

int rbp_perf_errno(int e)
{
	switch (e) {
	case EACCES:
	case EPERM: return RBP_EPERM;
	case ESRCH: return RBP_ENOPROC;
	case ENOENT:
	case ENODEV:
	case EOPNOTSUPP: return RBP_ENOUPROBE;
	case ENOMEM: return RBP_ENOMEM;
	case EMFILE:
	case ENFILE: return RBP_EIO;
	default: return RBP_EINVAL;
	}
}

int rbp_perf_ring_map(struct rbp_perf_ring *r, int fd, size_t max_pages, size_t min_pages)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	memset(r, 0, sizeof(*r));
	for (size_t pages = max_pages;; pages /= 2) {
		size_t len = page * (1 + pages);
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			*r = (struct rbp_perf_ring){ m, len, pages, page };
			return RBP_OK;
		}
		if (errno != EPERM || pages <= min_pages)
			return rbp_perf_errno(errno);
	}
}

void rbp_perf_ring_unmap(struct rbp_perf_ring *r)
{
	if (r->base)
		munmap(r->base, r->len);
	memset(r, 0, sizeof(*r));
}

/* Copy len bytes at ring offset off (wrapping) out of the data area. */
static void ring_copy(const struct rbp_perf_ring *r, uint64_t off, void *dst, size_t len)
{
	const uint8_t *data = (const uint8_t *)r->base + r->page;
	size_t size = r->page * r->pages, pos = (size_t)(off % size);
	size_t first = len < size - pos ? len : size - pos;

	memcpy(dst, data + pos, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

int rbp_perf_ring_drain(struct rbp_perf_ring *r, void *buf, size_t cap,
			int (*fn)(void *ctx, uint32_t type, void *body, size_t len),
			void *ctx)
{
	struct perf_event_mmap_page *meta = r->base;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	int rc = 0;

	while (tail < head && !rc) {
		struct perf_event_header h;
		ring_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h))
			break;   /* cannot happen; do not spin */
		size_t body = h.size - sizeof(h);
		if (body > cap)
			body = cap;
		ring_copy(r, tail + sizeof(h), buf, body);
		rc = fn(ctx, h.type, buf, body);
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return rc;
}
