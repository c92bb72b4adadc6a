/*
 * gz.h - a gzip stream written through zlib's deflate into a stdio stream,
 * plus the varint helpers of our binary formats (raw files, protobuf).
 */
#ifndef RBP_UTIL_GZ_H
#define RBP_UTIL_GZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

struct rbp_gz {
	z_stream z;
	FILE *out;        /* not owned */
	int err;          /* first error (RBP_EIO / RBP_ENOMEM), sticky */
	unsigned char buf[64 * 1024];
};

int rbp_gz_open(struct rbp_gz *g, FILE *out);
/* Compress len bytes; errors are sticky and reported by rbp_gz_close(). */
void rbp_gz_write(struct rbp_gz *g, const void *data, size_t len);
/* Flush the stream and end it; returns the first error seen. */
int rbp_gz_close(struct rbp_gz *g);

/* Unsigned LEB128 varint into buf (10 bytes at most); returns its length. */
static inline size_t rbp_varint(uint8_t *buf, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		buf[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	buf[n++] = (uint8_t)v;
	return n;
}

static inline void rbp_gz_varint(struct rbp_gz *g, uint64_t v)
{
	uint8_t b[10];
	rbp_gz_write(g, b, rbp_varint(b, v));
}

#endif
