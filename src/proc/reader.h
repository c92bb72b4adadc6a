/*
 * reader.h - the target as memory: read N bytes at address A.
 *
 * This is the seam that lets the Ruby stack walker run unchanged on a live
 * process, an ELF core file, or an in-memory image (tests, fuzzing).  A
 * reader never prints; every read either fills the whole buffer and returns
 * RBP_OK, or returns a negative RBP_E* code (RBP_EFAULT for an unmapped
 * address, RBP_ENOPROC when the process is gone, RBP_EPERM, ...).
 */
#ifndef RBP_PROC_READER_H
#define RBP_PROC_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rbp_reader;

/* One range of a batched read (rbp_readv): each succeeds or fails alone. */
struct rbp_read_req {
	uint64_t addr;
	void *buf;
	size_t len;
	int err;      /* out: RBP_OK or why this range could not be read */
};

struct rbp_reader_ops {
	/* Fill buf[0..len) from target address addr; all or nothing. */
	int (*read)(struct rbp_reader *r, uint64_t addr, void *buf, size_t len);
	/* Optional: many ranges at once (a live process: few system calls). */
	void (*readv)(struct rbp_reader *r, struct rbp_read_req *v, size_t n);
	/* Release everything the reader owns, including r itself. */
	void (*close)(struct rbp_reader *r);
};

/* Implementations embed this as their first member. */
struct rbp_reader {
	const struct rbp_reader_ops *ops;
	uint64_t reads;   /* statistics: read calls made */
	uint64_t bytes;   /* statistics: bytes requested */
};

static inline int rbp_read(struct rbp_reader *r, uint64_t addr, void *buf,
			   size_t len)
{
	r->reads++;
	r->bytes += len;
	return r->ops->read(r, addr, buf, len);
}

/* Read every range of v, each all or nothing, setting its err. */
static inline void rbp_readv(struct rbp_reader *r, struct rbp_read_req *v, size_t n)
{
	r->reads++;
	for (size_t i = 0; i < n; i++)
		r->bytes += v[i].len;
	if (r->ops->readv) {
		r->ops->readv(r, v, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		v[i].err = r->ops->read(r, v[i].addr, v[i].buf, v[i].len);
}

static inline void rbp_reader_close(struct rbp_reader *r)
{
	if (r)
		r->ops->close(r);
}

/*
 * Live process: process_vm_readv(2), falling back to pread on /proc/PID/mem
 * when process_vm_readv is unavailable (ENOSYS) or refused (EPERM under
 * some seccomp profiles).  ESRCH -> RBP_ENOPROC, EPERM/EACCES -> RBP_EPERM,
 * EFAULT/EIO/short read -> RBP_EFAULT.
 */
int rbp_reader_open_pid(pid_t pid, struct rbp_reader **out);

/*
 * In-memory image for tests and fuzzers: a set of segments, each a target
 * address and a copy of its bytes.  Reads spanning a gap fail with
 * RBP_EFAULT.  The image copies nothing: the caller keeps the segment
 * array and their bytes alive until rbp_reader_close().
 */
struct rbp_image_segment {
	uint64_t addr;
	const void *data;
	size_t len;
};
int rbp_reader_open_image(const struct rbp_image_segment *segs, size_t n,
			  struct rbp_reader **out);

#endif
