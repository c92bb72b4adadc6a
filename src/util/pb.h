/*
 * pb.h - just enough of the protocol buffers wire format to write a
 * message: varint and length-delimited fields appended to a growable byte
 * buffer.  Field numbers and wire types follow
 * https://protobuf.dev/programming-guides/encoding/.
 */
#ifndef RBP_UTIL_PB_H
#define RBP_UTIL_PB_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/gz.h"

#define RBP_PB_VARINT 0
#define RBP_PB_LEN 2

struct rbp_pb {
	uint8_t *b;
	size_t n, cap;
	int oom;   /* sticky: an append failed */
};

static inline int rbp_pb_reserve(struct rbp_pb *m, size_t more)
{
	if (m->oom)
		return -1;
	if (m->n + more <= m->cap)
		return 0;
	size_t ncap = m->cap ? m->cap : 256;
	while (ncap < m->n + more)
		ncap *= 2;
	uint8_t *nb = realloc(m->b, ncap);
	if (!nb) {
		m->oom = 1;
		return -1;
	}
	m->b = nb;
	m->cap = ncap;
	return 0;
}

static inline void rbp_pb_raw_varint(struct rbp_pb *m, uint64_t v)
{
	if (!rbp_pb_reserve(m, 10))
		m->n += rbp_varint(m->b + m->n, v);
}

static inline void rbp_pb_tag(struct rbp_pb *m, uint32_t field, unsigned wire)
{
	rbp_pb_raw_varint(m, (uint64_t)field << 3 | wire);
}

/* A varint field; zero is the default and is left out. */
static inline void rbp_pb_uint(struct rbp_pb *m, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	rbp_pb_tag(m, field, RBP_PB_VARINT);
	rbp_pb_raw_varint(m, v);
}

/* int64 fields encode negative values as 10-byte two's complement varints. */
static inline void rbp_pb_int(struct rbp_pb *m, uint32_t field, int64_t v)
{
	rbp_pb_uint(m, field, (uint64_t)v);
}

/* A length-delimited field (bytes, string, embedded message). */
static inline void rbp_pb_bytes(struct rbp_pb *m, uint32_t field, const void *data, size_t len)
{
	rbp_pb_tag(m, field, RBP_PB_LEN);
	rbp_pb_raw_varint(m, len);
	if (!rbp_pb_reserve(m, len)) {
		if (len)
			memcpy(m->b + m->n, data, len);
		m->n += len;
	}
}

/* A packed repeated varint field. */
static inline void rbp_pb_packed(struct rbp_pb *m, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;
	uint8_t tmp[10];

	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += rbp_varint(tmp, v[i]);
	rbp_pb_tag(m, field, RBP_PB_LEN);
	rbp_pb_raw_varint(m, len);
	if (!rbp_pb_reserve(m, len))
		for (size_t i = 0; i < n; i++)
			m->n += rbp_varint(m->b + m->n, v[i]);
}

/* Write message m as field `field` of the message being streamed to g. */
static inline void rbp_pb_gz_message(struct rbp_gz *g, uint32_t field, const struct rbp_pb *m)
{
	rbp_gz_varint(g, (uint64_t)field << 3 | RBP_PB_LEN);
	rbp_gz_varint(g, m->n);
	rbp_gz_write(g, m->b, m->n);
}

static inline void rbp_pb_reset(struct rbp_pb *m) { m->n = 0; }
static inline void rbp_pb_free(struct rbp_pb *m) { free(m->b); memset(m, 0, sizeof(*m)); }

#endif
