#include "util/gz.h"

#include <string.h>

#include "util/err.h"

int rbp_gz_open(struct rbp_gz *g, FILE *out)
{
	memset(&g->z, 0, sizeof(g->z));
	g->out = out;
	g->err = RBP_OK;
	/* 15 + 16: a gzip header and trailer rather than a zlib one */
	if (deflateInit2(&g->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return RBP_ENOMEM;
	return RBP_OK;
}

/* Run deflate with flush mode until it has consumed its input. */
static void pump(struct rbp_gz *g, int flush)
{
	int rc;

	do {
		g->z.next_out = g->buf;
		g->z.avail_out = sizeof(g->buf);
		rc = deflate(&g->z, flush);
		size_t have = sizeof(g->buf) - g->z.avail_out;
		if (rc == Z_STREAM_ERROR) {
			g->err = RBP_EIO;
			return;
		}
		if (have && fwrite(g->buf, 1, have, g->out) != have) {
			g->err = RBP_EIO;
			return;
		}
	} while (g->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void rbp_gz_write(struct rbp_gz *g, const void *data, size_t len)
{
	if (g->err || !len)
		return;
	g->z.next_in = (Bytef *)(uintptr_t)data;
	g->z.avail_in = (uInt)len;
	pump(g, Z_NO_FLUSH);
}

int rbp_gz_close(struct rbp_gz *g)
{
	if (!g->err) {
		g->z.next_in = NULL;
		g->z.avail_in = 0;
		pump(g, Z_FINISH);
	}
	deflateEnd(&g->z);
	if (!g->err && fflush(g->out))
		g->err = RBP_EIO;
	return g->err;
}
