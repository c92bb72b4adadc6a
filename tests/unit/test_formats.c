/*
 * Output formats against golden files, and the raw format's round trip.
 *
 * A synthetic profile built here (two threads of one process plus a child
 * process's thread, direct and mutual recursion, C frames with and without
 * a file, non-ASCII names, a label with '"' and ';') is written in every
 * text format and compared byte for byte with tests/golden/<format>.txt.
 * pprof is binary: its gzip stream is inflated and decoded here by a
 * protobuf reader written from profile.proto, and that dump is the golden
 * file (tests/golden/pprof.txt).  Golden files are inspected by eye when
 * they change; RBPEEK_UPDATE_GOLDEN=1 rewrites them.
 *
 * Raw files: write, read back, and every format must give the same bytes
 * from both profiles; truncated and bit-flipped files (compressed, and
 * re-compressed after damaging the uncompressed stream) must be refused or
 * read without crashing (run under ASan with make SAN=1).
 *
 * RBPEEK_BENCH=N also times every writer on a synthetic profile of N
 * samples (e.g. 1000000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"
#include "output/output.h"
#include "profile/diff.h"
#include "profile/profile.h"
#include "profile/raw.h"
#include "util/err.h"
#include "util/gz.h"

#define TITLE "rbpeek: pid 4242 ruby app.rb, 0.1 s, 14 samples"

/* ---- the synthetic profile -------------------------------------------- */

enum { F_MAIN, F_TIMES, F_BLOCK, F_UNI, F_FIB3, F_FIB2, F_RUN, F_SLEEP, F_WEIRD, F_CHILD,
       F_CHILD_MAIN, N_FRAMES };

static const struct {
	const char *label, *path;
	int32_t line, first_line;
	uint8_t kind;
} frames[N_FRAMES] = {
	[F_MAIN] = { "<main>", "/app/app.rb", 10, 1, RBP_PFRAME_RUBY },
	[F_TIMES] = { "Integer#times", "/app/app.rb", 11, 0, RBP_PFRAME_CFUNC },
	[F_BLOCK] = { "block in <main>", "/app/app.rb", 12, 11, RBP_PFRAME_RUBY },
	[F_UNI] = { "Ünïcödé#grüß", "/app/ünï.rb", 8, 7, RBP_PFRAME_RUBY },
	[F_FIB3] = { "Object#fib", "/app/fib.rb", 3, 1, RBP_PFRAME_RUBY },
	[F_FIB2] = { "Object#fib", "/app/fib.rb", 2, 1, RBP_PFRAME_RUBY },
	[F_RUN] = { "Worker#run", "/app/worker.rb", 6, 4, RBP_PFRAME_RUBY },
	[F_SLEEP] = { "Kernel#sleep", "", 0, 0, RBP_PFRAME_CFUNC },
	[F_WEIRD] = { "Weird#\"odd;name\"", "/app/worker.rb", 12, 11, RBP_PFRAME_RUBY },
	[F_CHILD] = { "ruby child.rb (pid 4300)", "", 0, 0, RBP_PFRAME_PROCESS },
	[F_CHILD_MAIN] = { "<main>", "/app/child.rb", 1, 1, RBP_PFRAME_RUBY },
};

/* Stacks, outermost first, ended by -1. */
static const int stacks[][6] = {
	{ F_MAIN, F_TIMES, F_BLOCK, F_UNI, -1 },            /* A */
	{ F_MAIN, F_FIB3, F_FIB3, F_FIB2, -1 },             /* B: recursion */
	{ F_MAIN, F_FIB3, F_FIB2, -1 },                     /* C */
	{ F_RUN, F_SLEEP, -1 },                             /* D */
	{ F_RUN, F_WEIRD, -1 },                             /* E */
	{ F_RUN, F_WEIRD, F_RUN, F_FIB2, -1 },              /* F: mutual recursion */
	{ F_CHILD, F_CHILD_MAIN, -1 },                      /* G: another process */
};

/* (time ms, thread, stack) in time order */
static const int samples[][3] = {
	{ 0, 0, 0 }, { 0, 1, 3 }, { 10, 0, 0 }, { 10, 1, 3 }, { 20, 0, 1 }, { 20, 1, 4 },
	{ 30, 0, 2 }, { 30, 1, 5 }, { 40, 0, 1 }, { 40, 1, 5 }, { 40, 2, 6 }, { 50, 0, 0 },
	{ 50, 1, 4 }, { 50, 2, 6 },
};

static int build(struct rbp_profile *p)
{
	uint32_t fid[N_FRAMES], node[7], th[3];
	int err;

	if ((err = rbp_profile_init(p)))
		return err;
	for (int i = 0; i < N_FRAMES; i++)
		if ((err = rbp_profile_frame(p, frames[i].label, frames[i].path, frames[i].line,
					     frames[i].first_line, frames[i].kind, &fid[i])))
			return err;
	for (int s = 0; s < 7; s++) {
		node[s] = 0;
		for (int i = 0; stacks[s][i] >= 0; i++)
			if ((err = rbp_profile_child(p, node[s], fid[stacks[s][i]], &node[s])))
				return err;
	}
	if ((err = rbp_profile_thread(p, 4242, 4242, "main", &th[0])) ||
	    (err = rbp_profile_thread(p, 4242, 4243, "wörker \"1\"", &th[1])) ||
	    (err = rbp_profile_thread(p, 4300, 4300, "", &th[2])))
		return err;
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
		if ((err = rbp_profile_add(p, (uint64_t)samples[i][0] * 1000000 + 1234, th[samples[i][1]],
					   node[samples[i][2]], RBP_SAMPLE_ONCPU)))
			return err;
	p->meta.pid = 4242;
	p->meta.ruby_version = rbp_profile_str(p, "3.1.2");
	p->meta.cmdline = rbp_profile_str(p, "ruby app.rb");
	p->meta.start_unix_ns = 1700000000123456789ull;
	p->meta.duration_ns = 60000000;
	p->meta.rate_hz = 100;
	p->meta.ticks = 6;
	p->meta.late = 1;
	p->meta.errors = 0;
	return RBP_OK;
}

/* ---- helpers ------------------------------------------------------------ */

/* format's output of p into *buf (malloc'd), idle samples left out under hide_idle. */
static int write_mem_idle(const char *format, const struct rbp_profile *p, int hide_idle,
			  char **buf, size_t *len)
{
	const struct rbp_format *f = rbp_format_find(format);
	struct rbp_output_opts oo = { .title = TITLE, .hide_idle = hide_idle };
	FILE *m;
	int err;

	*buf = NULL;
	*len = 0;
	if (!f || !(m = open_memstream(buf, len)))
		return RBP_EINVAL;
	err = f->write(p, &oo, m);
	if (fclose(m) && !err)
		err = RBP_EIO;
	return err;
}

static int write_mem(const char *format, const struct rbp_profile *p, char **buf, size_t *len)
{
	return write_mem_idle(format, p, 0, buf, len);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				break;
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	*len = n;
	return buf;
}

static const char *golden_dir(void)
{
	static const char *const dirs[] = { "tests/golden", "../tests/golden", "../../tests/golden" };
	const char *env = getenv("RBPEEK_GOLDEN_DIR");

	if (env && *env)
		return env;
	for (size_t i = 0; i < 3; i++)
		if (!access(dirs[i], F_OK))
			return dirs[i];
	return dirs[0];
}

/* Compare with (or, under RBPEEK_UPDATE_GOLDEN=1, rewrite) the golden file. */
static int check_golden(const char *name, const char *data, size_t len)
{
	char path[512], actual[512];
	const char *upd = getenv("RBPEEK_UPDATE_GOLDEN");
	size_t glen = 0;
	char *golden;

	snprintf(path, sizeof(path), "%s/%s.txt", golden_dir(), name);
	if (upd && !strcmp(upd, "1")) {
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
			fprintf(stderr, "cannot write %s\n", path);
			return 0;
		}
		fprintf(stderr, "rewrote %s\n", path);
		return 1;
	}
	if (!(golden = read_file(path, &glen))) {
		fprintf(stderr, "missing golden file %s (RBPEEK_UPDATE_GOLDEN=1 writes it)\n", path);
		return 0;
	}
	int same = glen == len && !memcmp(golden, data, len);
	if (!same) {
		size_t i = 0, line = 1;
		while (i < len && i < glen && golden[i] == data[i])
			line += data[i++] == '\n';
		snprintf(actual, sizeof(actual), "/tmp/rbpeek-golden-%s.txt", name);
		FILE *f = fopen(actual, "wb");
		if (f) {
			fwrite(data, 1, len, f);
			fclose(f);
		}
		fprintf(stderr, "%s differs from %s at line %zu (actual output in %s)\n", name, path,
			line, actual);
	}
	free(golden);
	return same;
}

/* ---- a protobuf reader for profile.proto, to dump pprof output as text ---- */

struct pbr {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t pbr_varint(struct pbr *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (r->p >= r->end) {
			r->bad = 1;
			return 0;
		}
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

/* The next field: number, wire type, and for LEN a sub-reader. */
static int pbr_field(struct pbr *r, uint32_t *field, int *wire, uint64_t *v, struct pbr *sub)
{
	if (r->bad || r->p >= r->end)
		return 0;
	uint64_t tag = pbr_varint(r);
	*field = (uint32_t)(tag >> 3);
	*wire = (int)(tag & 7);
	if (*wire == 0) {
		*v = pbr_varint(r);
	} else if (*wire == 2) {
		uint64_t len = pbr_varint(r);
		if (len > (uint64_t)(r->end - r->p)) {
			r->bad = 1;
			return 0;
		}
		*sub = (struct pbr){ r->p, r->p + len, 0 };
		r->p += len;
	} else {
		r->bad = 1;   /* profile.proto uses no other wire types */
		return 0;
	}
	return !r->bad;
}

struct strs {
	char **v;
	size_t n;
};

static const char *str_at(const struct strs *s, uint64_t i)
{
	return i < s->n ? s->v[i] : "<BAD STRING INDEX>";
}

/* Fields whose varints index the string table, per message. */
enum msg { M_PROFILE, M_VALUETYPE, M_SAMPLE, M_LABEL, M_MAPPING, M_LOCATION, M_LINE, M_FUNCTION };

static const char *field_name(enum msg m, uint32_t f, int *is_str, enum msg *sub)
{
	static const char *const names[][15] = {
		[M_PROFILE] = { NULL, "sample_type", "sample", "mapping", "location", "function",
				"string_table", "drop_frames", "keep_frames", "time_nanos",
				"duration_nanos", "period_type", "period", "comment",
				"default_sample_type" },
		[M_VALUETYPE] = { NULL, "type", "unit" },
		[M_SAMPLE] = { NULL, "location_id", "value", "label" },
		[M_LABEL] = { NULL, "key", "str", "num", "num_unit" },
		[M_MAPPING] = { NULL, "id", "memory_start", "memory_limit", "file_offset", "filename",
				"build_id", "has_functions", "has_filenames", "has_line_numbers",
				"has_inline_frames" },
		[M_LOCATION] = { NULL, "id", "mapping_id", "address", "line", "is_folded" },
		[M_LINE] = { NULL, "function_id", "line", "column" },
		[M_FUNCTION] = { NULL, "id", "name", "system_name", "filename", "start_line" },
	};
	*is_str = (m == M_PROFILE && (f == 7 || f == 8 || f == 13 || f == 14)) ||
		  (m == M_VALUETYPE) || (m == M_LABEL && (f == 1 || f == 2 || f == 4)) ||
		  (m == M_MAPPING && (f == 5 || f == 6)) || (m == M_FUNCTION && f >= 2 && f <= 4);
	*sub = (enum msg)-1;
	if (m == M_PROFILE && (f == 1 || f == 11))
		*sub = M_VALUETYPE;
	else if (m == M_PROFILE && f == 2)
		*sub = M_SAMPLE;
	else if (m == M_PROFILE && f == 3)
		*sub = M_MAPPING;
	else if (m == M_PROFILE && f == 4)
		*sub = M_LOCATION;
	else if (m == M_PROFILE && f == 5)
		*sub = M_FUNCTION;
	else if (m == M_SAMPLE && f == 3)
		*sub = M_LABEL;
	else if (m == M_LOCATION && f == 4)
		*sub = M_LINE;
	return f < 15 ? names[m][f] : NULL;
}

static void dump_value(FILE *out, const struct strs *s, int is_str, uint64_t v)
{
	if (is_str) {
		putc('"', out);
		for (const char *c = str_at(s, v); *c; c++)
			fprintf(out, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
		putc('"', out);
	} else {
		fprintf(out, "%lld", (long long)v);
	}
}

static int dump_msg(FILE *out, struct pbr r, enum msg m, const struct strs *s, int indent)
{
	uint32_t f;
	int wire, is_str;
	uint64_t v;
	struct pbr sub;
	enum msg sm;

	while (pbr_field(&r, &f, &wire, &v, &sub)) {
		const char *name = field_name(m, f, &is_str, &sm);
		if (!name)
			return 0;
		if (m == M_PROFILE && f == 6)
			continue;   /* the string table is printed first */
		fprintf(out, "%*s%s:", indent, "", name);
		if (wire == 0) {
			putc(' ', out);
			dump_value(out, s, is_str, v);
			putc('\n', out);
		} else if ((int)sm >= 0) {
			fputs(" {\n", out);
			if (!dump_msg(out, sub, sm, s, indent + 2))
				return 0;
			fprintf(out, "%*s}\n", indent, "");
		} else {   /* packed varints */
			fputs(" [", out);
			for (int first = 1; sub.p < sub.end; first = 0) {
				if (!first)
					fputs(", ", out);
				dump_value(out, s, is_str, pbr_varint(&sub));
			}
			fputs("]\n", out);
			if (sub.bad)
				return 0;
		}
	}
	return !r.bad;
}

/* Inflate a gzip stream. */
static uint8_t *gunzip(const char *data, size_t len, size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	int rc;

	if (!buf || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(buf);
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)len;
	do {
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				break;
			buf = nb;
		}
		z.next_out = buf + n;
		z.avail_out = (uInt)(cap - n);
		rc = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
	} while (rc == Z_OK);
	inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return NULL;
	}
	*out_len = n;
	return buf;
}

/* The decoded profile as text, or NULL when it is not a valid profile.proto. */
static char *dump_pprof(const char *gz, size_t gz_len, size_t *len)
{
	size_t n = 0;
	uint8_t *pb = gunzip(gz, gz_len, &n);
	struct strs s = { 0 };
	char *text = NULL;
	FILE *out;
	uint32_t f;
	int wire, ok = 0;
	uint64_t v;
	struct pbr r = { pb, pb + n, 0 }, sub;

	if (!pb)
		return NULL;
	s.v = calloc(n + 1, sizeof(*s.v));
	while (s.v && pbr_field(&r, &f, &wire, &v, &sub)) {
		if (f != 6)
			continue;
		if (wire != 2 || !(s.v[s.n] = strndup((const char *)sub.p, (size_t)(sub.end - sub.p))))
			goto done;
		s.n++;
	}
	if (r.bad || !(out = open_memstream(&text, len)))
		goto done;
	fprintf(out, "string_table (%zu):\n", s.n);
	for (size_t i = 0; i < s.n; i++) {
		fprintf(out, "  %zu: ", i);
		dump_value(out, &s, 1, i);
		putc('\n', out);
	}
	ok = dump_msg(out, (struct pbr){ pb, pb + n, 0 }, M_PROFILE, &s, 0);
	fclose(out);
done:
	for (size_t i = 0; i < s.n; i++)
		free(s.v[i]);
	free(s.v);
	free(pb);
	if (!ok) {
		free(text);
		return NULL;
	}
	return text;
}

/* ---- raw files ------------------------------------------------------------ */

static char tmpdir[] = "/tmp/rbpeek-test-formats-XXXXXX";

static int write_path(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(data, 1, len, f);
	return fclose(f) || w != len ? -1 : 0;
}

/* rbp_raw_read of these bytes: its result, and the collapsed text when OK. */
static int read_raw_bytes(const void *data, size_t len, char **collapsed, size_t *clen)
{
	char path[256];
	struct rbp_profile p;
	int err;

	/* in memory when possible: thousands of files are slow on some disks */
	static int mfd = -2;
	if (mfd == -2)
		mfd = memfd_create("rbpeek-damaged-raw", 0);
	if (mfd >= 0 && !ftruncate(mfd, 0) && pwrite(mfd, data, len, 0) == (ssize_t)len) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	} else {
		snprintf(path, sizeof(path), "%s/damaged.raw.gz", tmpdir);
		if (write_path(path, data, len))
			return RBP_EIO;
	}
	err = rbp_raw_read(path, &p);
	if (!err && collapsed)
		err = write_mem("collapsed", &p, collapsed, clen);
	rbp_profile_free(&p);
	return err;
}

/* Gzip bytes with our own stream writer. */
/* p as a raw file at path: RBP_OK, the writer's error, or RBP_EIO. */
static int write_raw(const struct rbp_profile *p, const char *path)
{
	FILE *f = fopen(path, "wb");
	int err;

	if (!f)
		return RBP_EIO;
	err = rbp_raw_write(p, f);
	if (fclose(f) && !err)
		err = RBP_EIO;
	return err;
}

/* LEB128 varint at data[at]: its value in *v, the offset after it (len when cut short). */
static size_t read_varint(const uint8_t *data, size_t len, size_t at, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; at < len && shift < 64; shift += 7) {
		uint8_t b = data[at++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return at;
	}
	return len;
}

static size_t skip_varint(const uint8_t *data, size_t len, size_t at)
{
	uint64_t v;
	return read_varint(data, len, at, &v);
}

static char *gzip_bytes(const uint8_t *data, size_t len, size_t *out_len)
{
	char *buf = NULL;
	FILE *m = open_memstream(&buf, out_len);
	struct rbp_gz g;

	if (!m)
		return NULL;
	if (!rbp_gz_open(&g, m)) {
		rbp_gz_write(&g, data, len);
		rbp_gz_close(&g);
	}
	fclose(m);
	return buf;
}

/* ---- benchmark ------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static ssize_t count_write(void *cookie, const char *buf, size_t n)
{
	(void)buf;
	*(uint64_t *)cookie += n;
	return (ssize_t)n;
}

/* n samples over 4 threads, a few hundred distinct stacks 10-40 deep. */
/* A profile of n samples of 512 stacks 10 to 40 deep over 64 frames, 4 threads. */
static int build_bench(struct rbp_profile *pp, size_t n)
{
	struct rbp_profile p;
	uint32_t fid[64], nodes[512], th[4];
	char label[64], path[64];
	uint64_t seed = 42;

	if (rbp_profile_init(&p))
		return RBP_ENOMEM;
	for (int i = 0; i < 64; i++) {
		snprintf(label, sizeof(label), "Module%d::Klass#method_%d", i % 7, i);
		snprintf(path, sizeof(path), "/app/lib/file_%d.rb", i % 13);
		rbp_profile_frame(&p, label, path, 10 + i, 5 + i, RBP_PFRAME_RUBY, &fid[i]);
	}
	for (int s = 0; s < 512; s++) {
		uint32_t node = 0;
		int depth = 10 + s % 31;
		for (int d = 0; d < depth; d++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			rbp_profile_child(&p, node, fid[d < 8 ? (size_t)d : (size_t)((seed >> 33) % 64)], &node);
		}
		nodes[s] = node;
	}
	for (int t = 0; t < 4; t++)
		rbp_profile_thread(&p, 1000, 1000 + t, "worker", &th[t]);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		/* runs of equal stacks, as real programs have */
		rbp_profile_add(&p, (uint64_t)(i / 4) * 10000000, th[i % 4],
				nodes[(seed >> 40) % 8 ? (i / 64) % 512 : (size_t)(seed >> 20) % 512], 0);
	}
	p.meta.pid = 1000;
	p.meta.rate_hz = 100;
	p.meta.duration_ns = (uint64_t)(n / 4) * 10000000;
	p.meta.ruby_version = rbp_profile_str(&p, "3.1.2");
	*pp = p;
	return RBP_OK;
}

static void bench(size_t n)
{
	struct rbp_profile p;

	if (build_bench(&p, n))
		return;
	printf("bench: %zu samples, %zu frames, %zu nodes\n", p.n_samples, p.n_frames, p.n_nodes);
	for (const struct rbp_format *f = rbp_formats; f->name; f++) {
		uint64_t size = 0;
		FILE *out = fopencookie(&size, "wb", (cookie_io_functions_t){ .write = count_write });
		struct rbp_output_opts oo = { .title = "bench" };
		double t0 = now_s();
		int err = f->write(&p, &oo, out);
		double t1 = now_s();
		fclose(out);
		printf("bench: %-16s %6.3f s  %9.1f MB  %s\n", f->name, t1 - t0, (double)size / 1e6,
		       err ? rbp_strerror(err) : "ok");
	}
	rbp_profile_free(&p);
}

/* ---- tests ------------------------------------------------------------------ */

int main(void)
{
	static const char *const text_formats[] = { "collapsed", "summary", "summary-by-line",
						    "callgrind", "chrome", "speedscope", "flamegraph",
						    "dot" };
	struct rbp_profile p;
	char *buf = NULL;
	size_t len = 0;

	TEST("build the synthetic profile") {
		CHECK_EQ_INT(build(&p), RBP_OK);
		CHECK_EQ_INT(p.n_samples, 14);
		CHECK_EQ_INT(p.n_threads, 3);
	}

	for (size_t i = 0; i < sizeof(text_formats) / sizeof(text_formats[0]); i++) {
		const char *name = text_formats[i];
		if (!strcmp(name, "flamegraph") && !rbp_format_find(name))
			continue;
		TEST(name) {
			CHECK(rbp_format_find(name) != NULL);
			CHECK_EQ_INT(write_mem(name, &p, &buf, &len), RBP_OK);
			CHECK(check_golden(name, buf, len));
			/* the same profile always gives the same bytes */
			char *again = NULL;
			size_t alen = 0;
			CHECK_EQ_INT(write_mem(name, &p, &again, &alen), RBP_OK);
			CHECK(alen == len && !memcmp(again, buf, len));
			free(again);
			free(buf);
		}
	}

	/*
	 * Thread 1's two samples in Kernel#sleep (stack D) waiting for work:
	 * the flame graph opens without them (golden flamegraph-idle) and keeps
	 * them, hidden and 0 wide, behind its idle control; with them kept
	 * (--idle) the same control hides them.
	 */
	TEST("flame graph: idle samples hidden behind a control, or shown") {
		p.sample_flags[1] |= RBP_SAMPLE_IDLE;
		p.sample_flags[3] |= RBP_SAMPLE_IDLE;
		CHECK_EQ_INT(write_mem_idle("flamegraph", &p, 1, &buf, &len), RBP_OK);
		CHECK(check_golden("flamegraph-idle", buf, len));
		CHECK(buf && strstr(buf, "<tspan id=\"count\">12</tspan> samples"));
		CHECK(buf && strstr(buf, "data-shown=\"0\">Show 2 idle samples (14.3%)</text>"));
		CHECK(buf && strstr(buf, "<g class=\"f\" id=\"f0\" data-x=\"0\" data-w=\"12\""));
		/* the sleep: written, hidden, 0 wide; thread 1's working and idle samples */
		CHECK(buf && strstr(buf, "<g class=\"f hide\"") &&
		      strstr(strstr(buf, "<g class=\"f hide\""), "<title>Kernel#sleep ("));
		CHECK(buf && strstr(buf, "data-t=\"0:6,1:4:2,2:2\""));
		CHECK(buf && strstr(buf, "data-pid=\"4242\" data-n=\"4\" data-i=\"2\""));
		free(buf);
		CHECK_EQ_INT(write_mem_idle("flamegraph", &p, 0, &buf, &len), RBP_OK);
		CHECK(buf && strstr(buf, "data-shown=\"1\">Hide 2 idle samples (14.3%)</text>"));
		CHECK(buf && strstr(buf, "<g class=\"f\" id=\"f0\" data-x=\"0\" data-w=\"14\""));
		CHECK(buf && !strstr(buf, "<g class=\"f hide\""));
		free(buf);
		p.sample_flags[1] &= (uint8_t)~RBP_SAMPLE_IDLE;
		p.sample_flags[3] &= (uint8_t)~RBP_SAMPLE_IDLE;
	}

	/*
	 * One thread (no thread filter) working and waiting: the idle control
	 * still gets each frame's working and idle samples, as one group
	 * ("0:work:idle"), and there is no thread list.
	 */
	TEST("flame graph: the idle control without the thread filter") {
		struct rbp_profile q;
		uint32_t fw, fs, nw, ns, th;

		CHECK_EQ_INT(rbp_profile_init(&q), RBP_OK);
		CHECK_EQ_INT(rbp_profile_frame(&q, "Object#work", "/a.rb", 2, 1, RBP_PFRAME_RUBY, &fw), RBP_OK);
		CHECK_EQ_INT(rbp_profile_frame(&q, "IO.select", "", 0, 0, RBP_PFRAME_CFUNC, &fs), RBP_OK);
		CHECK_EQ_INT(rbp_profile_child(&q, 0, fw, &nw), RBP_OK);
		CHECK_EQ_INT(rbp_profile_child(&q, nw, fs, &ns), RBP_OK);
		CHECK_EQ_INT(rbp_profile_thread(&q, 7, 7, "main", &th), RBP_OK);
		for (int i = 0; i < 10; i++)
			CHECK_EQ_INT(rbp_profile_add(&q, (uint64_t)i * 10000000, th, i < 3 ? nw : ns,
						     i < 3 ? RBP_SAMPLE_GVL : RBP_SAMPLE_IDLE), RBP_OK);
		CHECK_EQ_INT(write_mem_idle("flamegraph", &q, 1, &buf, &len), RBP_OK);
		CHECK(buf && !strstr(buf, "id=\"threads\"") && !strstr(buf, "id=\"filter\""));
		CHECK(buf && strstr(buf, "data-shown=\"0\">Show 7 idle samples (70.0%)</text>"));
		CHECK(buf && strstr(buf, "data-x=\"0\" data-w=\"3\" data-d=\"0\" data-p=\"-1\" "
				    "data-t=\"0:3:7\""));
		CHECK(buf && strstr(buf, "<g class=\"f hide\"") &&
		      strstr(strstr(buf, "<g class=\"f hide\""), "data-t=\"0:0:7\"><title>IO.select ("));
		free(buf);
		rbp_profile_free(&q);
	}

	TEST("pprof decodes as profile.proto and matches its golden dump") {
		CHECK_EQ_INT(write_mem("pprof", &p, &buf, &len), RBP_OK);
		CHECK(len > 18 && (uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b);
		size_t tlen = 0;
		char *text = dump_pprof(buf, len, &tlen);
		CHECK(text != NULL);
		if (text)
			CHECK(check_golden("pprof", text, tlen));
		free(text);
		free(buf);
	}

	TEST("writers report a failed stream as RBP_EIO") {
		for (const struct rbp_format *f = rbp_formats; f->name; f++) {
			FILE *ro = fopen("/dev/null", "r");   /* writes to it fail */
			struct rbp_output_opts oo = { .title = TITLE };
			if (!ro)
				continue;
			int err = f->write(&p, &oo, ro);
			if (err != RBP_EIO)
				fprintf(stderr, "format %s on a read-only stream: %d\n", f->name, err);
			CHECK_EQ_INT(err, RBP_EIO);
			fclose(ro);
		}
	}

	/*
	 * A recording against itself: every function's share unchanged (the
	 * table says +0.00 points, x1.00 everywhere), the pprof diff's values
	 * add up to nothing, the differential flame graph is all white.
	 */
	TEST("diff: a profile against itself changes nothing") {
		struct rbp_profile d;
		struct rbp_output_opts oo = { .title = TITLE, .diff = 1 };
		uint64_t n_new, n_base;
		FILE *m;
		CHECK_EQ_INT(rbp_profile_diff(&p, &p, 0, &d), RBP_OK);
		rbp_diff_totals(&d, &n_new, &n_base);
		CHECK_EQ_INT(n_new, 14);
		CHECK_EQ_INT(n_base, 14);
		CHECK((m = open_memstream(&buf, &len)) != NULL);
		CHECK_EQ_INT(rbp_write_summary(&d, &oo, m), RBP_OK);
		fclose(m);
		CHECK(buf && strstr(buf, "    +0.00    x1.00") && !strstr(buf, "new ") && !strstr(buf, "gone"));
		/* every row after the header: no change */
		for (char *l = buf ? strstr(buf, "BASE     NEW\n") : NULL; l && (l = strchr(l, '\n')) && l[1]; l++)
			CHECK(strstr(l + 1, "+0.00") && strstr(l + 1, "+0.00") < strchr(l + 1, '\n'));
		free(buf);
		CHECK((m = open_memstream(&buf, &len)) != NULL);
		CHECK_EQ_INT(rbp_write_flamegraph(&d, &oo, m), RBP_OK);
		fclose(m);
		CHECK(buf && strstr(buf, ": +0.00 points, x1.00)") && !strstr(buf, "points, x0.") &&
		      !strstr(buf, "+0.01 points"));
		CHECK(buf && !strstr(buf, "fill=\"rgb(0,") && !strstr(buf, "new: not in BASE"));
		free(buf);
		rbp_profile_free(&d);
	}

	TEST("an empty profile writes in every format") {
		struct rbp_profile e;
		CHECK_EQ_INT(rbp_profile_init(&e), RBP_OK);
		e.meta.rate_hz = 0;
		for (const struct rbp_format *f = rbp_formats; f->name; f++) {
			CHECK_EQ_INT(write_mem(f->name, &e, &buf, &len), RBP_OK);
			free(buf);
		}
		rbp_profile_free(&e);
	}

	/* raw files */
	char raw_path[256];
	char *raw = NULL;
	size_t raw_len = 0;
	int have_dir = mkdtemp(tmpdir) != NULL;
	snprintf(raw_path, sizeof(raw_path), "%s/p.raw.gz", tmpdir);

	TEST("raw round trip gives the same output in every format") {
		CHECK(have_dir);
		CHECK_EQ_INT(write_raw(&p, raw_path), RBP_OK);
		struct rbp_profile q;
		CHECK_EQ_INT(rbp_raw_read(raw_path, &q), RBP_OK);
		CHECK_EQ_INT(q.n_samples, p.n_samples);
		for (const struct rbp_format *fmt = rbp_formats; fmt->name; fmt++) {
			char *a = NULL, *b = NULL;
			size_t al = 0, bl = 0;
			CHECK_EQ_INT(write_mem(fmt->name, &p, &a, &al), RBP_OK);
			CHECK_EQ_INT(write_mem(fmt->name, &q, &b, &bl), RBP_OK);
			if (al != bl || memcmp(a, b, al))
				fprintf(stderr, "format %s differs after the raw round trip\n", fmt->name);
			CHECK(al == bl && !memcmp(a, b, al));
			free(a);
			free(b);
		}
		rbp_profile_free(&q);
		raw = read_file(raw_path, &raw_len);
		CHECK(raw != NULL && raw_len > 20);
	}

	char *want = NULL;
	size_t want_len = 0;
	write_mem("collapsed", &p, &want, &want_len);

	TEST("truncated raw files are refused") {
		for (size_t n = 0; raw && n < raw_len; n++) {
			int err = read_raw_bytes(raw, n, NULL, NULL);
			if (err != RBP_EBADRAW)
				fprintf(stderr, "truncated to %zu of %zu bytes: %d\n", n, raw_len, err);
			CHECK_EQ_INT(err, RBP_EBADRAW);
		}
	}

	TEST("bit-flipped raw files are refused or read unchanged") {
		for (size_t i = 0; raw && i < raw_len * 8; i++) {
			char *c = NULL;
			size_t cl = 0;
			raw[i / 8] ^= (char)(1 << (i % 8));
			int err = read_raw_bytes(raw, raw_len, &c, &cl);
			raw[i / 8] ^= (char)(1 << (i % 8));
			/* gzip's CRC catches changes of the data; header flags may not matter */
			CHECK(err == RBP_EBADRAW || (err == RBP_OK && cl == want_len && !memcmp(c, want, cl)));
			free(c);
		}
	}

	TEST("damaged uncompressed raw streams never crash the reader") {
		size_t ulen = 0;
		uint8_t *u = raw ? gunzip(raw, raw_len, &ulen) : NULL;
		CHECK(u != NULL);
		for (size_t n = 0; u && n < ulen; n++) {   /* every truncation */
			size_t zl = 0;
			char *z = gzip_bytes(u, n, &zl);
			CHECK_EQ_INT(read_raw_bytes(z, zl, NULL, NULL), RBP_EBADRAW);
			free(z);
		}
		for (size_t i = 0; u && i < ulen * 8; i++) {   /* every bit flip */
			size_t zl = 0, cl = 0;
			char *c = NULL;
			u[i / 8] ^= (uint8_t)(1 << (i % 8));
			char *z = gzip_bytes(u, ulen, &zl);
			int err = read_raw_bytes(z, zl, &c, &cl);
			u[i / 8] ^= (uint8_t)(1 << (i % 8));
			CHECK(err == RBP_OK || err == RBP_EBADRAW);
			free(c);
			free(z);
		}
		free(u);
	}

	TEST("a version 1 raw file (no on_cpu in its meta) is read the same") {
		size_t ulen = 0, zl = 0, at;
		uint8_t *u = raw ? gunzip(raw, raw_len, &ulen) : NULL;
		char *z = NULL, *c = NULL;
		size_t cl = 0;

		CHECK(u != NULL && ulen > 10 && u[9] == 2);
		/* skip the meta to its last varint, on_cpu, and cut it out */
		at = 10;
		at = skip_varint(u, ulen, at);                       /* pid */
		for (int s = 0; s < 2; s++) {                         /* ruby_version, cmdline */
			uint64_t n = 0;
			at = read_varint(u, ulen, at, &n);
			at += n;
		}
		for (int v = 0; v < 7; v++)                           /* start .. by_function */
			at = skip_varint(u, ulen, at);
		CHECK(at < ulen && u[at] == 0);                       /* on_cpu = 0 */
		if (u && at < ulen) {
			u[9] = 1;
			memmove(u + at, u + at + 1, ulen - at - 1);
			z = gzip_bytes(u, ulen - 1, &zl);
			CHECK_EQ_INT(read_raw_bytes(z, zl, &c, &cl), RBP_OK);
			CHECK(c && cl == want_len && !memcmp(c, want, cl));
			u[9] = 3;                                     /* a version from the future */
			free(z);
			z = gzip_bytes(u, ulen - 1, &zl);
			CHECK_EQ_INT(read_raw_bytes(z, zl, NULL, NULL), RBP_EBADRAW);
		}
		free(c);
		free(z);
		free(u);
	}

	TEST("an on-CPU profile: pprof's sample type is cpu, and the raw file keeps it") {
		struct rbp_profile q;
		char *text = NULL;
		size_t tlen = 0;

		p.meta.on_cpu = 1;
		CHECK_EQ_INT(write_mem("pprof", &p, &buf, &len), RBP_OK);
		text = dump_pprof(buf, len, &tlen);
		CHECK(text && strstr(text, "\"cpu\"") && !strstr(text, "\"wall\""));
		free(text);
		free(buf);
		CHECK_EQ_INT(write_raw(&p, raw_path), RBP_OK);
		CHECK_EQ_INT(rbp_raw_read(raw_path, &q), RBP_OK);
		CHECK_EQ_INT(q.meta.on_cpu, 1);
		rbp_profile_free(&q);
		CHECK_EQ_INT(write_mem("flamegraph", &p, &buf, &len), RBP_OK);
		CHECK(buf && strstr(buf, "on-CPU samples"));
		free(buf);
		p.meta.on_cpu = 0;
	}
	free(want);
	free(raw);
	if (have_dir) {
		char path[256];
		snprintf(path, sizeof(path), "%s/damaged.raw.gz", tmpdir);
		unlink(path);
		unlink(raw_path);
		rmdir(tmpdir);
	}
	rbp_profile_free(&p);

	/*
	 * report refuses an output bomb from rbp_output_estimate (estimate.c):
	 * it must never be below what a writer writes, nor far above it for
	 * real profiles (a few times, plus the flame graph's fixed 64 KB).
	 */
	TEST("output estimates bound every writer's output, closely") {
		struct rbp_profile q[2];
		CHECK_EQ_INT(build(&q[0]), RBP_OK);
		CHECK_EQ_INT(build_bench(&q[1], 20000), RBP_OK);
		for (int k = 0; k < 2; k++) {
			for (const struct rbp_format *f = rbp_formats; f->name; f++) {
				uint64_t size = 0, est = 0;
				FILE *out = fopencookie(&size, "wb", (cookie_io_functions_t){ .write = count_write });
				struct rbp_output_opts oo = { .title = "estimate" };
				CHECK_EQ_INT(f->write(&q[k], &oo, out), RBP_OK);
				fclose(out);
				CHECK_EQ_INT(rbp_output_estimate(&q[k], f, UINT64_MAX, &est), RBP_OK);
				if (est < size || est > 8 * size + (128 << 10))
					printf("  %s (profile %d): estimate %llu for %llu bytes\n", f->name, k,
					       (unsigned long long)est, (unsigned long long)size);
				CHECK(est >= size);
				/* the call graph prunes to its largest functions and calls: the
				 * estimate counts every function, an upper bound only */
				if (strcmp(f->name, "callgraph") && strcmp(f->name, "dot"))
					CHECK(est <= 8 * size + (128 << 10));
				/* a limit stops the count early, past the limit */
				CHECK_EQ_INT(rbp_output_estimate(&q[k], f, size / 2, &est), RBP_OK);
				CHECK(est > size / 2);
			}
		}
		rbp_profile_free(&q[0]);
		rbp_profile_free(&q[1]);
	}

	/*
	 * Folded stacks are sorted without building the lines (collapsed.c
	 * compares them lazily, from the frame where two stacks part): the
	 * order must still be strcmp's on the whole lines, also where one name
	 * is a prefix of another ("a" < "a b" but "a;..." > "a b"), and
	 * control characters are escaped.
	 */
	TEST("collapsed: strcmp order of whole lines, names escaped") {
		struct rbp_profile q;
		static const char *const names[] = { "a", "a b", "a;b", "a\x1b[31m", "b", "a:b", "" };
		enum { NN = sizeof(names) / sizeof(names[0]) };
		uint32_t fr[NN], th, node;
		CHECK_EQ_INT(rbp_profile_init(&q), RBP_OK);
		for (size_t i = 0; i < NN; i++)
			CHECK_EQ_INT(rbp_profile_frame(&q, names[i], "", 0, 0, RBP_PFRAME_CFUNC, &fr[i]), RBP_OK);
		CHECK_EQ_INT(rbp_profile_thread(&q, 1, 1, "main", &th), RBP_OK);
		/* every stack of up to 3 frames over the names */
		uint64_t t = 0;
		for (size_t i = 0; i < NN; i++)
			for (size_t j = 0; j <= NN; j++)
				for (size_t k = 0; k <= NN; k++) {
					CHECK_EQ_INT(rbp_profile_child(&q, 0, fr[i], &node), RBP_OK);
					if (j < NN)
						CHECK_EQ_INT(rbp_profile_child(&q, node, fr[j], &node), RBP_OK);
					if (j < NN && k < NN)
						CHECK_EQ_INT(rbp_profile_child(&q, node, fr[k], &node), RBP_OK);
					CHECK_EQ_INT(rbp_profile_add(&q, t++, th, node, 0), RBP_OK);
				}
		CHECK_EQ_INT(write_mem("collapsed", &q, &buf, &len), RBP_OK);
		CHECK(buf && strstr(buf, "a\\e[31m") && strstr(buf, "a:b"));
		size_t lines = 0;
		char *prev = NULL;
		for (char *line = buf, *nl; buf && (nl = memchr(line, '\n', len - (size_t)(line - buf)));
		     line = nl + 1) {
			*nl = 0;
			*strrchr(line, ' ') = 0;   /* the count */
			CHECK(!strchr(line, '\x1b'));
			if (prev && strcmp(prev, line) > 0)
				printf("  out of order: '%s' before '%s'\n", prev, line);
			CHECK(!prev || strcmp(prev, line) <= 0);
			prev = line;
			lines++;
		}
		/* distinct nodes: NN + NN^2 + NN^3 */
		CHECK_EQ_INT(lines, NN + NN * NN + NN * NN * NN);
		free(buf);
		rbp_profile_free(&q);
	}

	const char *b = getenv("RBPEEK_BENCH");
	if (b && atol(b) > 0)
		bench((size_t)atol(b));
	return harness_report();
}
