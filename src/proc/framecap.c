/*
 * framecap.c - loads the frame-copying eBPF program (src/bpf/framecap.bpf.c,
 * embedded as a libbpf skeleton) and reads its records (see framecap.h).
 *
 * The object holds one program per probe (probe0..probe7); those beyond
 * the caller's probes are not loaded.  Before load the read-only data gets
 * the interpreter's layout, each probe's argument register and our PID
 * namespace; after it the events map gets one BPF-output perf event per
 * CPU, each with its own mmap ring (src/proc/perfring.c), which
 * rbp_framecap_read() drains.  The programs are attached by the caller to
 * its per-thread uprobe events (rbp_uprobes_set_bpf: PERF_EVENT_IOC_SET_BPF,
 * libbpf's own way for a perf event it did not open, done there because
 * threads come and go).
 *
 * Messages: while the object loads, libbpf's warnings (the verifier's log
 * among them) are collected (proc/bpfcommon.h) into the caller's why.
 */
#include "proc/framecap.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/framecap_record.h"
#include "framecap.skel.h"
#include "proc/bpfcommon.h"
#include "proc/perfring.h"
#include "util/err.h"

#define ENV_BYTES (8 * FC_ENV_WORDS)
#define RING_PAGES 64      /* per CPU: 256 KiB, a dozen deep stacks */

_Static_assert(FC_HDR == offsetof(struct fc_record, data), "record header");

struct rbp_framecap {
	struct framecap_bpf *skel;
	struct rbp_framecap_layout L;
	int prog[RBP_FRAMECAP_MAX_PROBES];
	size_t n_probes;
	struct rbp_bpf_cpu_events cpus;   /* BPF-output perf event per CPU */
	struct rbp_perf_ring *ring;  /* ... and its ring */
	uint8_t *buf;                /* one record copied out of a ring */
	size_t buf_cap;
	int stats_fd;                /* BPF_ENABLE_STATS while held, -1 */
	pid_t *known;                /* tids in the threads map now */
	size_t n_known;
	uint64_t records, lost;
	uint32_t pick, stopped;      /* the programs' settings (config map) */
};

/* ---- rings --------------------------------------------------------------- */

/* The ring of CPU cpu's BPF-output perf event fd, registered in the events map. */
static int ring_of(void *ctx, size_t cpu, int fd, char *why, size_t why_len)
{
	struct rbp_framecap *c = ctx;
	uint32_t key = (uint32_t)cpu;
	int err = rbp_perf_ring_map(&c->ring[cpu], fd, RING_PAGES, 8);

	if (!err && bpf_map_update_elem(bpf_map__fd(c->skel->maps.events), &key, &fd, BPF_ANY))
		err = rbp_perf_errno(errno);
	if (err)
		snprintf(why, why_len, "cannot set up the BPF output ring of CPU %zu: %s", cpu,
			 rbp_strerror(err));
	return err;
}

/* One BPF-output perf event and ring per CPU (a CPU whose event cannot be opened is left out). */
static int open_rings(struct rbp_framecap *c, char *why, size_t why_len)
{
	int err;

	if (!(c->ring = calloc(rbp_bpf_cpu_count(), sizeof(*c->ring))))
		return RBP_ENOMEM;
	if ((err = rbp_bpf_cpu_events_open(&c->cpus, PERF_COUNT_SW_BPF_OUTPUT, 1, PERF_SAMPLE_RAW, 0,
					   ring_of, c, why, why_len)))
		return err;
	if (!c->cpus.opened) {
		snprintf(why, why_len, "cannot open BPF output perf events: %s",
			 strerror(c->cpus.open_errno));
		return rbp_perf_errno(c->cpus.open_errno);
	}
	return RBP_OK;
}

/* ---- open ------------------------------------------------------------------ */

static int layout_ok(const struct rbp_framecap_layout *L)
{
	/* unsigned: an offset below 0 is out of bounds too */
	return L->cfp_size && L->cfp_size <= FC_MAX_CFP && L->cfp_ep <= L->cfp_size - 8 &&
	       L->ec_cfp <= FC_EC_HEAD - 8 && L->ec_vm_stack <= FC_EC_HEAD - 8 &&
	       L->ec_vm_stack_size <= FC_EC_HEAD - 8;
}

/* Open the skeleton, set its read-only data, load the probes' programs. */
static int load(struct rbp_framecap *c, const uint8_t *arg_reg, pid_t count_pid,
		const struct stat *ns, struct rbp_bpf_log *m, char *why, size_t why_len)
{
	const struct rbp_framecap_layout *L = &c->L;
	struct bpf_program *progs[FC_MAX_PROBES];
	int e;

	if (!(c->skel = framecap_bpf__open())) {
		e = errno;
		rbp_bpf_explain(why, why_len, "libbpf cannot open the eBPF object", e, m);
		return rbp_bpf_code(e);
	}
	*c->skel->rodata = (struct framecap_bpf__rodata){
		.layout = { .thread_ec = L->thread_ec, .ec_embedded = L->ec_embedded,
			    .ec_vm_stack = L->ec_vm_stack, .ec_vm_stack_size = L->ec_vm_stack_size,
			    .ec_cfp = L->ec_cfp, .cfp_size = L->cfp_size, .cfp_ep = L->cfp_ep },
		.pidns_dev = (uint64_t)ns->st_dev,
		.pidns_ino = (uint64_t)ns->st_ino,
		.counting = count_pid > 0,
		.tgid = count_pid > 0 ? (uint32_t)count_pid : 0,
	};
	memcpy(progs, &c->skel->progs, sizeof(progs));
	for (size_t i = 0; i < FC_MAX_PROBES; i++) {
		c->skel->rodata->arg_reg[i] = i < c->n_probes && arg_reg[i] < 3 ? arg_reg[i] : 0;
		bpf_program__set_autoload(progs[i], i < c->n_probes);
	}
	if ((e = framecap_bpf__load(c->skel))) {
		e = -e;
		rbp_bpf_explain(why, why_len,
			e == EPERM ? "bpf() refused to load the eBPF program"
						  : "the kernel refused the eBPF program",
			e, m);
		return rbp_bpf_code(e);
	}
	for (size_t i = 0; i < c->n_probes; i++)
		c->prog[i] = bpf_program__fd(progs[i]);
	return RBP_OK;
}

int rbp_framecap_open(const struct rbp_framecap_layout *L, const uint8_t *arg_reg, size_t n_probes,
		      pid_t count_pid, struct rbp_framecap **out, char *why, size_t why_len)
{
	struct rbp_framecap *c;
	struct rbp_bpf_log m;
	struct stat ns;
	int err;

	*out = NULL;
	snprintf(why, why_len, "?");
	if (!n_probes || n_probes > RBP_FRAMECAP_MAX_PROBES || !layout_ok(L)) {
		snprintf(why, why_len, "unsupported interpreter layout");
		return RBP_EINVAL;
	}
	if (stat("/proc/self/ns/pid", &ns)) {
		snprintf(why, why_len, "cannot stat /proc/self/ns/pid: %s", strerror(errno));
		return RBP_EINVAL;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return RBP_ENOMEM;
	c->L = *L;
	c->n_probes = n_probes;
	c->stats_fd = -1;
	for (size_t i = 0; i < RBP_FRAMECAP_MAX_PROBES; i++)
		c->prog[i] = -1;
	if (!(err = rbp_bpf_log_begin(&m)))
		err = load(c, arg_reg, count_pid, &ns, &m, why, why_len);
	rbp_bpf_log_end(&m);
	if (err || (err = open_rings(c, why, why_len)) || (err = rbp_framecap_set_pick(c, 0))) {
		rbp_framecap_close(c);
		return err;
	}
	*out = c;
	return RBP_OK;
}

/* ---- use ------------------------------------------------------------------- */

int rbp_framecap_prog_fd(const struct rbp_framecap *c, size_t probe)
{
	return probe < c->n_probes ? c->prog[probe] : -1;
}

/* The programs' settings (struct config of framecap.bpf.c), all at once. */
static int set_config(struct rbp_framecap *c)
{
	uint32_t key = 0, cfg[2] = { c->pick, c->stopped };

	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.config), &key, cfg, BPF_ANY))
		return rbp_perf_errno(errno);
	return RBP_OK;
}

int rbp_framecap_set_pick(struct rbp_framecap *c, uint32_t pick)
{
	c->pick = pick;
	return set_config(c);
}

int rbp_framecap_stop(struct rbp_framecap *c)
{
	c->stopped = 1;
	return set_config(c);
}

int rbp_framecap_totals(const struct rbp_framecap *c, uint64_t *hits, uint64_t *uncounted)
{
	int fd = bpf_map__fd(c->skel->maps.totals), n = libbpf_num_possible_cpus();
	uint64_t v[256];
	uint64_t sum[FC_TOTALS] = { 0 };

	*hits = *uncounted = 0;
	if (n <= 0)
		return RBP_EINVAL;
	uint64_t *vals = (size_t)n <= sizeof(v) / sizeof(v[0]) ? v : calloc((size_t)n, 8);
	if (!vals)
		return RBP_ENOMEM;
	for (uint32_t k = 0; k < FC_TOTALS; k++) {
		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (int i = 0; i < n; i++)
			sum[k] += vals[i];
	}
	if (vals != v)
		free(vals);
	*hits = sum[FC_TOTAL_HITS];
	*uncounted = sum[FC_TOTAL_UNCOUNTED];
	return RBP_OK;
}

int rbp_framecap_counts(const struct rbp_framecap *c,
			int (*fn)(void *ctx, uint64_t arg, uint64_t hits), void *ctx)
{
	int fd = bpf_map__fd(c->skel->maps.counts), rc;
	uint64_t key, next, n;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &n) && (rc = fn(ctx, key, n)))
			return rc;
	}
	return RBP_OK;
}

int rbp_framecap_set_threads(struct rbp_framecap *c, const pid_t *tids, const uint64_t *threads,
			     size_t n)
{
	return rbp_bpf_sync_threads(bpf_map__fd(c->skel->maps.threads), &c->known, &c->n_known,
				    tids, threads, n);
}

struct read_ctx {
	struct rbp_framecap *c;
	int (*fn)(void *ctx, const struct rbp_framecap_record *r);
	void *ctx;
};

/* One PERF_RECORD_SAMPLE of raw data: u32 size, then the bytes the program emitted. */
static int on_record(void *ctx, uint32_t type, void *body, size_t len)
{
	struct read_ctx *rc = ctx;
	struct rbp_framecap *c = rc->c;
	const uint8_t *b = body;
	struct rbp_framecap_record r;
	uint32_t size;

	if (type == PERF_RECORD_LOST && len >= 16) {
		uint64_t lost;
		memcpy(&lost, b + 8, 8);
		c->lost += lost;
		return 0;
	}
	if (type != PERF_RECORD_SAMPLE || len < 4)
		return 0;
	memcpy(&size, b, 4);
	if (size > len - 4)
		return 0;
	/* aligned for the reader (the raw data sits at offset 4 mod 8) */
	memmove(body, b + 4, size);
	if (!rbp_bpf_parse_record(body, size, c->L.cfp_size, &r))
		return 0;
	c->records++;
	return rc->fn(rc->ctx, &r);
}

int rbp_framecap_read(struct rbp_framecap *c,
		      int (*fn)(void *ctx, const struct rbp_framecap_record *r), void *ctx)
{
	struct read_ctx rc = { c, fn, ctx };
	size_t need = FC_HDR + RBP_FRAMECAP_MAX_FRAMES * (size_t)(c->L.cfp_size + ENV_BYTES) + 64;
	int err;

	if (!c->buf) {
		/* 8-byte aligned: env words are read in place */
		if (!(c->buf = aligned_alloc(8, (need + 7) & ~(size_t)7)))
			return RBP_ENOMEM;
		c->buf_cap = need;
	}
	for (size_t i = 0; i < c->cpus.n; i++)
		if (c->ring[i].base && (err = rbp_perf_ring_drain(&c->ring[i], c->buf, c->buf_cap,
								  on_record, &rc)))
			return err;
	return RBP_OK;
}

int rbp_framecap_enable_stats(struct rbp_framecap *c)
{
	if (c->stats_fd >= 0)
		return RBP_OK;
	c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	return c->stats_fd < 0 ? rbp_perf_errno(-c->stats_fd) : RBP_OK;
}

void rbp_framecap_stats(const struct rbp_framecap *c, struct rbp_framecap_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->records = c->records;
	out->lost = c->lost;
	for (size_t i = 0; i < c->n_probes; i++) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(c->prog[i], &info, &len)) {
			out->runs += info.run_cnt;
			out->run_ns += info.run_time_ns;
		}
	}
}

void rbp_framecap_close(struct rbp_framecap *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->ring && i < c->cpus.n; i++)
		rbp_perf_ring_unmap(&c->ring[i]);
	rbp_bpf_cpu_events_close(&c->cpus);
	if (c->stats_fd >= 0)
		close(c->stats_fd);
	framecap_bpf__destroy(c->skel);
	free(c->ring);
	free(c->buf);
	free(c->known);
	free(c);
}
