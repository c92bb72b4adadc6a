/*
 * raw.c - the raw profile file (see docs/raw-format.md).
 *
 * A gzip stream of: the magic "RBPEEKRAW", a version byte, then sections in
 * a fixed order, each a count followed by that many records of varints:
 * meta, strings, frames, nodes, threads, samples, and an end marker.
 * Strings are referred to by index; nodes by id (a node's parent always has
 * a smaller id); sample times are deltas from the previous sample.
 *
 * The reader trusts nothing: every count is bounded, every index checked
 * against what has been read, arrays grow as records arrive (a huge count in
 * a small file cannot make it allocate much), and gzip's CRC catches
 * corruption the structure does not.
 *
 * What a file can make rbpeek do is bounded by the file's size, since
 * gzip expands up to ~1000x (a 777 KB file of one repeated sample once made
 * `report` take 3.3 GB and a minute):
 *   - the stream may expand to at most RAW_MAX_RATIO times the file's size
 *     (plus RAW_MAX_SLACK): rbpeek's own raw files expand 1-3x, since
 *     sample times vary in their low bits;
 *   - the stacks the samples name, each counted once with its depth (what
 *     every output writes out), may hold at most RAW_MAX_EXPAND frames per
 *     expanded byte (plus RAW_MAX_SLACK): a 2 MB chain of 2 million nested
 *     nodes with samples at a thousand depths would otherwise ask the
 *     writers for billions of frames.
 * Either gives RBP_ERAWBIG, before any output is written.  Frames are not
 * bytes: long names make each frame cost up to 8 KB in the formats that
 * repeat names per stack, so `report` also bounds each format's estimated
 * output by the file's size (output/estimate.c) before writing.
 */
#include "profile/raw.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "util/err.h"
#include "util/gz.h"
#include "util/hmap.h"
#include "util/strtab.h"
#include "util/vec.h"

#define END_MARK 0x454e44   /* "END" */
#define MAX_COUNT (1u << 30)
#define MAX_STR (1u << 20)
#define RAW_MAX_RATIO 32
#define RAW_MAX_EXPAND 64
#define RAW_MAX_SLACK (4ull << 20)

/* ---- writing ------------------------------------------------------- */

static void put_str(struct rbp_gz *g, const char *s)
{
	size_t len = strlen(s);
	rbp_gz_varint(g, len);
	rbp_gz_write(g, s, len);
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Collect every string the frames and threads use; frames first. */
static int collect_strings(const struct rbp_profile *p, struct rbp_strtab *t, uint64_t *ids)
{
	for (size_t i = 0; i < p->n_frames; i++) {
		ids[2 * i] = rbp_strtab_id(t, p->frames[i].label);
		ids[2 * i + 1] = rbp_strtab_id(t, p->frames[i].path);
	}
	for (size_t i = 0; i < p->n_threads; i++)
		ids[2 * (p->n_frames + i)] = rbp_strtab_id(t, p->threads[i].name);
	return t->err;
}

static void write_meta(struct rbp_gz *g, const struct rbp_profile_meta *m)
{
	rbp_gz_varint(g, zigzag(m->pid));
	put_str(g, m->ruby_version ? m->ruby_version : "");
	put_str(g, m->cmdline ? m->cmdline : "");
	rbp_gz_varint(g, m->start_unix_ns);
	rbp_gz_varint(g, m->duration_ns);
	rbp_gz_varint(g, m->rate_hz);
	rbp_gz_varint(g, m->ticks);
	rbp_gz_varint(g, m->late);
	rbp_gz_varint(g, m->errors);
	rbp_gz_varint(g, m->by_function);
	rbp_gz_varint(g, m->on_cpu);
}

int rbp_raw_write(const struct rbp_profile *p, FILE *out)
{
	struct rbp_strtab t = { 0 };
	struct rbp_gz g;
	uint64_t *ids = calloc(2 * (p->n_frames + p->n_threads) + 1, sizeof(*ids));
	uint8_t version = RBP_RAW_VERSION;
	int err;

	if (!ids)
		return RBP_ENOMEM;
	if ((err = collect_strings(p, &t, ids)) || (err = rbp_gz_open(&g, out)))
		goto done;
	rbp_gz_write(&g, RBP_RAW_MAGIC, strlen(RBP_RAW_MAGIC));
	rbp_gz_write(&g, &version, 1);
	write_meta(&g, &p->meta);
	rbp_gz_varint(&g, t.n);
	for (size_t i = 0; i < t.n; i++)
		put_str(&g, t.v[i]);
	rbp_gz_varint(&g, p->n_frames);
	for (size_t i = 0; i < p->n_frames; i++) {
		rbp_gz_varint(&g, ids[2 * i]);
		rbp_gz_varint(&g, ids[2 * i + 1]);
		rbp_gz_varint(&g, zigzag(p->frames[i].line));
		rbp_gz_varint(&g, zigzag(p->frames[i].first_line));
		rbp_gz_varint(&g, p->frames[i].kind);
	}
	rbp_gz_varint(&g, p->n_nodes - 1);
	for (size_t i = 1; i < p->n_nodes; i++) {
		rbp_gz_varint(&g, p->nodes[i].parent);
		rbp_gz_varint(&g, p->nodes[i].frame);
	}
	rbp_gz_varint(&g, p->n_threads);
	for (size_t i = 0; i < p->n_threads; i++) {
		rbp_gz_varint(&g, zigzag(p->threads[i].pid));
		rbp_gz_varint(&g, zigzag(p->threads[i].tid));
		rbp_gz_varint(&g, ids[2 * (p->n_frames + i)]);
	}
	rbp_gz_varint(&g, p->n_samples);
	for (size_t i = 0, prev = 0; i < p->n_samples; i++) {
		const struct rbp_sample *s = &p->samples[i];
		rbp_gz_varint(&g, zigzag((int64_t)(s->t_ns - prev)));
		rbp_gz_varint(&g, s->thread);
		rbp_gz_varint(&g, s->node);
		rbp_gz_varint(&g, p->sample_flags[i]);
		prev = s->t_ns;
	}
	rbp_gz_varint(&g, END_MARK);
	err = rbp_gz_close(&g);
done:
	rbp_strtab_free(&t);
	free(ids);
	return err;
}

/* ---- reading ------------------------------------------------------- */

struct rd {
	gzFile f;
	int err;            /* sticky */
	uint64_t read;      /* bytes of the expanded stream read so far */
	uint64_t limit;     /* the most it may expand to (RAW_MAX_RATIO) */
	const char **strs;  /* interned in the profile */
	size_t n_strs;
};

static int get_bytes(struct rd *r, void *buf, size_t n)
{
	if (r->err)
		return r->err;
	if (n && gzread(r->f, buf, (unsigned)n) != (int)n)
		r->err = RBP_EBADRAW;
	else if ((r->read += n) > r->limit)
		r->err = RBP_ERAWBIG;
	return r->err;
}

static uint64_t get_varint(struct rd *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b;
		if (get_bytes(r, &b, 1))
			return 0;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->err = RBP_EBADRAW;
	return 0;
}

static uint64_t get_count(struct rd *r)
{
	uint64_t n = get_varint(r);
	if (n > MAX_COUNT)
		r->err = RBP_EBADRAW;
	return r->err ? 0 : n;
}

/* A length-prefixed string, interned into the profile. */
static const char *get_str(struct rd *r, struct rbp_profile *p)
{
	uint64_t len = get_varint(r);
	char *buf;
	const char *s;

	if (!r->err && len > MAX_STR)
		r->err = RBP_EBADRAW;
	if (r->err)
		return NULL;
	if (!(buf = malloc(len + 1))) {
		r->err = RBP_ENOMEM;
		return NULL;
	}
	if (get_bytes(r, buf, len) || memchr(buf, 0, len)) {
		r->err = RBP_EBADRAW;
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	s = rbp_profile_str(p, buf);
	free(buf);
	return s;
}

static const char *str_ref(struct rd *r)
{
	uint64_t i = get_varint(r);
	if (!r->err && i >= r->n_strs)
		r->err = RBP_EBADRAW;
	return r->err ? "" : r->strs[i];
}

static void read_meta(struct rd *r, struct rbp_profile *p, uint8_t version)
{
	struct rbp_profile_meta *m = &p->meta;
	const char *s;

	m->pid = (int32_t)unzigzag(get_varint(r));
	m->ruby_version = (s = get_str(r, p)) ? s : "";
	m->cmdline = (s = get_str(r, p)) ? s : "";
	m->start_unix_ns = get_varint(r);
	m->duration_ns = get_varint(r);
	m->rate_hz = (uint32_t)get_varint(r);
	m->ticks = get_varint(r);
	m->late = get_varint(r);
	m->errors = get_varint(r);
	m->by_function = (uint8_t)get_varint(r);
	if (version >= 2) {   /* version 1 did not say whether it was on-CPU */
		uint64_t on_cpu = get_varint(r);
		if (on_cpu > 1)
			r->err = RBP_EBADRAW;
		m->on_cpu = (uint8_t)on_cpu;
	}
}

static void read_strings(struct rd *r, struct rbp_profile *p)
{
	uint64_t n = get_count(r);
	size_t cap = 0;

	for (uint64_t i = 0; i < n && !r->err; i++) {
		if ((r->err = rbp_grow(&r->strs, &cap, r->n_strs + 1, sizeof(*r->strs))))
			return;
		const char *s = get_str(r, p);
		if (s)
			r->strs[r->n_strs++] = s;
	}
}

static void read_frames(struct rd *r, struct rbp_profile *p)
{
	uint64_t n = get_count(r);
	for (uint64_t i = 0; i < n && !r->err; i++) {
		const char *label = str_ref(r), *path = str_ref(r);
		int64_t line = unzigzag(get_varint(r));
		int64_t first = unzigzag(get_varint(r));
		uint64_t kind = get_varint(r);
		uint32_t id;
		if (r->err)
			return;
		if (kind > RBP_PFRAME_NATIVE || line < INT32_MIN || line > INT32_MAX ||
		    first < INT32_MIN || first > INT32_MAX) {
			r->err = RBP_EBADRAW;
			return;
		}
		if ((r->err = rbp_profile_frame(p, label, path, (int32_t)line, (int32_t)first,
					     (uint8_t)kind, &id)))
			return;
		if (id != i)
			r->err = RBP_EBADRAW;   /* duplicate frame */
	}
}

static void read_nodes(struct rd *r, struct rbp_profile *p)
{
	uint64_t n = get_count(r);
	for (uint64_t i = 0; i < n && !r->err; i++) {
		uint64_t parent = get_varint(r), frame = get_varint(r);
		uint32_t id;
		if (r->err)
			return;
		if (parent >= p->n_nodes || frame >= p->n_frames) {
			r->err = RBP_EBADRAW;
			return;
		}
		if ((r->err = rbp_profile_child(p, (uint32_t)parent, (uint32_t)frame, &id)))
			return;
		if (id != i + 1)
			r->err = RBP_EBADRAW;   /* duplicate node */
	}
}

static void read_threads(struct rd *r, struct rbp_profile *p)
{
	uint64_t n = get_count(r);
	for (uint64_t i = 0; i < n && !r->err; i++) {
		int64_t pid = unzigzag(get_varint(r)), tid = unzigzag(get_varint(r));
		const char *name = str_ref(r);
		uint32_t idx;
		if (r->err)
			return;
		if ((r->err = rbp_profile_thread(p, (int32_t)pid, (int32_t)tid, name, &idx)))
			return;
		if (idx != i)
			r->err = RBP_EBADRAW;
	}
}

static void read_samples(struct rd *r, struct rbp_profile *p)
{
	uint64_t n = get_count(r), t = 0;
	for (uint64_t i = 0; i < n && !r->err; i++) {
		t += (uint64_t)unzigzag(get_varint(r));
		uint64_t thread = get_varint(r), node = get_varint(r), flags = get_varint(r);
		if (r->err)
			return;
		if (thread >= p->n_threads || node >= p->n_nodes || flags > 0xff) {
			r->err = RBP_EBADRAW;
			return;
		}
		r->err = rbp_profile_add(p, t, (uint32_t)thread, (uint32_t)node, (uint8_t)flags);
	}
}

/*
 * The frames of every distinct sampled stack of every thread, added up
 * (what the per-thread outputs write): RBP_ERAWBIG when over max.
 */
static int check_expansion(const struct rbp_profile *p, uint64_t max)
{
	struct rbp_hmap seen = { 0 };
	uint64_t frames = 0, v;
	int err = RBP_OK;

	for (size_t i = 0; i < p->n_samples && !err; i++) {
		const struct rbp_sample *s = &p->samples[i];
		uint64_t key = ((uint64_t)s->thread + 1) << 32 | s->node;
		if (rbp_hmap_get(&seen, key, &v))
			continue;
		if ((err = rbp_hmap_put(&seen, key, 1)))
			break;
		if ((frames += p->nodes[s->node].depth) > max)
			err = RBP_ERAWBIG;
	}
	rbp_hmap_clear(&seen);
	return err;
}

int rbp_raw_read(const char *path, struct rbp_profile *p)
{
	struct rd r = { 0 };
	char magic[sizeof(RBP_RAW_MAGIC)] = { 0 };
	uint8_t version = 0;
	struct stat st;
	int err;

	if ((err = rbp_profile_init(p)))
		return err;
	if (stat(path, &st))
		return RBP_EIO;
	r.limit = (uint64_t)st.st_size * RAW_MAX_RATIO + RAW_MAX_SLACK;
	if (!(r.f = gzopen(path, "rb")))
		return RBP_EIO;
	get_bytes(&r, magic, strlen(RBP_RAW_MAGIC));
	get_bytes(&r, &version, 1);
	if (!r.err && (memcmp(magic, RBP_RAW_MAGIC, strlen(RBP_RAW_MAGIC)) ||
		       version < 1 || version > RBP_RAW_VERSION))
		r.err = RBP_EBADRAW;
	read_meta(&r, p, version);
	read_strings(&r, p);
	read_frames(&r, p);
	read_nodes(&r, p);
	read_threads(&r, p);
	read_samples(&r, p);
	if (!r.err && get_varint(&r) != END_MARK)
		r.err = RBP_EBADRAW;
	/* reading past the end verifies gzip's CRC and length trailer */
	if (!r.err) {
		uint8_t extra;
		int z = Z_OK;
		if (gzread(r.f, &extra, 1) != 0)
			r.err = RBP_EBADRAW;
		gzerror(r.f, &z);
		if (z != Z_OK && z != Z_STREAM_END)
			r.err = RBP_EBADRAW;
	}
	if (!r.err)
		r.err = check_expansion(p, r.read * RAW_MAX_EXPAND + RAW_MAX_SLACK);
	free(r.strs);
	gzclose(r.f);
	return r.err;
}
