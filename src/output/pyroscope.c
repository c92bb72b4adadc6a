/*
 * pyroscope.c - Pyroscope's ingest request for one profile (see
 * pyroscope.h).  The name parameter carries the labels:
 * "SERVICE{hostname=h,pid=123,ruby_version=3.3.8,...}", URL-encoded as a
 * whole; Pyroscope makes SERVICE the service_name label.
 */
#include "output/pyroscope.h"

#include <string.h>

#include "output/output.h"
#include "util/err.h"
#include "util/http.h"

/*
 * Copy s into the name being built at *n: as it is when raw (the syntax's
 * own separators), else with what the syntax reserves replaced by '_'.
 */
static int put(char *buf, size_t cap, size_t *n, const char *s, int raw)
{
	for (; *s; s++) {
		char c = *s;
		if (*n + 1 >= cap)
			return RBP_EINVAL;
		if (!raw && (strchr("{},=\"", c) || (unsigned char)c <= 0x20))
			c = '_';
		buf[(*n)++] = c;
	}
	buf[*n] = 0;
	return RBP_OK;
}

int rbp_pyroscope_target(const struct rbp_agent_meta *m, char *buf, size_t cap)
{
	/* 38 labels of 63-byte keys and 127-byte values fit, URL-encoded */
	char name[8192], enc[3 * 8192];
	size_t n = 0;
	int err = put(name, sizeof(name), &n, m->service, 0);

	for (size_t i = 0; !err && i <= m->n_labels; i++) {
		if (i == m->n_labels) {
			err = i ? put(name, sizeof(name), &n, "}", 1) : RBP_OK;
			break;
		}
		if (!(err = put(name, sizeof(name), &n, i ? "," : "{", 1)) &&
		    !(err = put(name, sizeof(name), &n, m->keys[i], 0)) &&
		    !(err = put(name, sizeof(name), &n, "=", 1)))
			err = put(name, sizeof(name), &n, m->values[i], 0);
	}
	if (err)
		return err;
	if (rbp_url_encode(name, enc, sizeof(enc)))
		return RBP_EINVAL;
	int w = snprintf(buf, cap, "/ingest?name=%s&from=%llu&until=%llu&format=pprof&sampleRate=%u"
			 "&spyName=rbpeek", enc, (unsigned long long)m->from_unix_s,
			 (unsigned long long)m->until_unix_s, m->rate_hz);
	return w < 0 || (size_t)w >= cap ? RBP_EINVAL : RBP_OK;
}

static int encode(const struct rbp_profile *p, FILE *out)
{
	struct rbp_output_opts oo = { .title = "" };
	return rbp_write_pprof(p, &oo, out);
}

static int target(const struct rbp_agent_meta *m, char *buf, size_t cap)
{
	return rbp_pyroscope_target(m, buf, cap);
}

const struct rbp_agent_exporter rbp_pyroscope_exporter = {
	.name = "pyroscope",
	.content_type = "binary/octet-stream",
	.encode = encode,
	.target = target,
};
