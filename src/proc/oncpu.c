/*
 * oncpu.c - loads the on-CPU sampling program (src/bpf/oncpu.bpf.c, a
 * libbpf skeleton), attaches it to a clock perf event per CPU through
 * libbpf, keeps its process and thread maps, and reads its ring buffer
 * (see oncpu.h).
 */
#include "proc/oncpu.h"

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
#include "oncpu.skel.h"
#include "proc/bpfcommon.h"
#include "proc/perfring.h"
#include "util/err.h"
#include "util/vec.h"

enum { C_WATCHED, C_COPIED, C_DROPPED, C_NO_THREAD, C_N };   /* as oncpu.bpf.c */

/* A watched process and the tids it has in the threads map. */
struct proc {
	pid_t pid;
	uint16_t cfp_size;
	pid_t *tids;
	size_t n_tids;
};

struct rbp_oncpu {
	struct oncpu_bpf *skel;
	struct bpf_link **links;    /* per CPU, NULL where the CPU is offline */
	struct rbp_bpf_cpu_events cpus;   /* the clock event per CPU (those not a link's yet) */
	struct ring_buffer *rb;
	struct proc *procs;
	size_t n_procs, cap_procs;
	int stats_fd;               /* BPF_ENABLE_STATS while held, -1 */
	uint64_t records;
	/* the reader's callback, during rbp_oncpu_read */
	int (*fn)(void *ctx, const struct rbp_framecap_record *r);
	void *ctx;
};

/* ---- open ------------------------------------------------------------------ */

/* The program attached to CPU cpu's clock event fd (a libbpf link, which then owns fd). */
static int attach_clock(void *ctx, size_t cpu, int fd, char *why, size_t why_len)
{
	struct rbp_oncpu *s = ctx;

	if (!s->links && !(s->links = calloc(s->cpus.n, sizeof(*s->links))))
		return RBP_ENOMEM;
	if (!(s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.on_tick, fd))) {
		int e = errno;
		snprintf(why, why_len, "cannot attach the eBPF program to CPU %zu's clock: %s",
			 cpu, strerror(e));
		return rbp_bpf_code(e);
	}
	s->cpus.fd[cpu] = -1;   /* the link's now */
	return RBP_OK;
}

/* A clock event on every online CPU, the program attached to each (libbpf links). */
static int attach_clocks(struct rbp_oncpu *s, uint32_t rate_hz, char *why, size_t why_len)
{
	int err = rbp_bpf_cpu_events_open(&s->cpus, PERF_COUNT_SW_CPU_CLOCK,
					  1000000000ull / rate_hz,   /* ns of CPU time */
					  0, 1, attach_clock, s, why, why_len);

	if (err && s->cpus.open_failed)
		snprintf(why, why_len, "cannot open a CPU clock perf event on CPU %zu: %s",
			 s->cpus.open_cpu, strerror(s->cpus.open_errno));
	if (err)
		return err;
	if (!s->cpus.opened) {
		snprintf(why, why_len, "no CPU clock perf event could be opened");
		return RBP_ENOUPROBE;
	}
	return RBP_OK;
}

static int on_sample(void *ctx, void *data, size_t size);

/*
 * The initial PID namespace's inode number, fixed by the kernel
 * (PROC_PID_INIT_INO): the namespace of /proc/self/ns/pid tells whether we
 * run in it (NSpid in /proc/self/status does not: it counts the levels
 * below the namespace /proc was mounted in).
 */
#define INITIAL_PIDNS_INO 0xEFFFFFFCu

static int load(struct rbp_oncpu *s, const struct stat *ns, struct rbp_bpf_log *m, char *why,
		size_t why_len)
{
	int e;

	if (!(s->skel = oncpu_bpf__open())) {
		e = errno;
		rbp_bpf_explain(why, why_len, "libbpf cannot open the eBPF object", e, m);
		return rbp_bpf_code(e);
	}
	s->skel->rodata->pidns_dev = (uint64_t)ns->st_dev;
	s->skel->rodata->pidns_ino = (uint64_t)ns->st_ino;
	s->skel->rodata->initial_pidns = ns->st_ino == INITIAL_PIDNS_INO;
	if ((e = oncpu_bpf__load(s->skel))) {
		e = -e;
		rbp_bpf_explain(why, why_len, e == EPERM ? "bpf() refused to load the eBPF program"
					      : "the kernel refused the eBPF program", e, m);
		return rbp_bpf_code(e);
	}
	if (!(s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.samples), on_sample, s, NULL))) {
		e = errno;
		rbp_bpf_explain(why, why_len, "cannot map the eBPF ring buffer", e, m);
		return rbp_bpf_code(e);
	}
	return RBP_OK;
}

int rbp_oncpu_open(uint32_t rate_hz, struct rbp_oncpu **out, char *why, size_t why_len)
{
	struct rbp_oncpu *s;
	struct rbp_bpf_log m;
	struct stat ns;
	int err;

	*out = NULL;
	snprintf(why, why_len, "?");
	if (!rate_hz || rate_hz > 10000) {
		snprintf(why, why_len, "sampling rate out of range (1..10000 Hz)");
		return RBP_EINVAL;
	}
	if (stat("/proc/self/ns/pid", &ns)) {
		snprintf(why, why_len, "cannot stat /proc/self/ns/pid: %s", strerror(errno));
		return RBP_EINVAL;
	}
	if (!(s = calloc(1, sizeof(*s))))
		return RBP_ENOMEM;
	s->stats_fd = -1;
	if (!(err = rbp_bpf_log_begin(&m)))
		err = load(s, &ns, &m, why, why_len);
	rbp_bpf_log_end(&m);
	if (err || (err = attach_clocks(s, rate_hz, why, why_len))) {
		rbp_oncpu_close(s);
		return err;
	}
	*out = s;
	return RBP_OK;
}

/* ---- processes and threads ---------------------------------------------- */

static struct proc *find(struct rbp_oncpu *s, pid_t pid)
{
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

int rbp_oncpu_watch(struct rbp_oncpu *s, pid_t pid, const struct rbp_framecap_layout *L)
{
	uint32_t key = (uint32_t)pid;
	struct proc *p;
	int err;

	if (!L->cfp_size || L->cfp_size > FC_MAX_CFP)
		return RBP_EINVAL;
	if (!(p = find(s, pid))) {
		if ((err = rbp_grow(&s->procs, &s->cap_procs, s->n_procs + 1, sizeof(*s->procs))))
			return err;
		p = &s->procs[s->n_procs++];
		*p = (struct proc){ .pid = pid };
	}
	p->cfp_size = L->cfp_size;
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.procs), &key, L, BPF_ANY))
		return rbp_perf_errno(errno);
	return RBP_OK;
}

void rbp_oncpu_unwatch(struct rbp_oncpu *s, pid_t pid)
{
	struct proc *p = find(s, pid);
	uint32_t key = (uint32_t)pid;

	if (!p)
		return;
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.procs), &key);
	rbp_oncpu_set_threads(s, pid, NULL, NULL, 0);
	free(p->tids);
	*p = s->procs[--s->n_procs];
}

int rbp_oncpu_set_threads(struct rbp_oncpu *s, pid_t pid, const pid_t *tids,
			  const uint64_t *threads, size_t n)
{
	struct proc *p = find(s, pid);

	if (!p)
		return RBP_EINVAL;
	return rbp_bpf_sync_threads(bpf_map__fd(s->skel->maps.threads), &p->tids, &p->n_tids,
				    tids, threads, n);
}

/* ---- reading --------------------------------------------------------------- */

/* One record of the ring (8-byte aligned, read in place); arg is its process. */
static int on_sample(void *ctx, void *data, size_t size)
{
	struct rbp_oncpu *s = ctx;
	struct rbp_framecap_record r;
	struct fc_record h;
	struct proc *p;

	if (size < FC_HDR)
		return 0;
	memcpy(&h, data, FC_HDR);
	if (!(p = find(s, (pid_t)h.arg)) || !rbp_bpf_parse_record(data, size, p->cfp_size, &r))
		return 0;   /* a process unwatched meanwhile */
	s->records++;
	return s->fn(s->ctx, &r);
}

int rbp_oncpu_read(struct rbp_oncpu *s, int (*fn)(void *ctx, const struct rbp_framecap_record *r),
		   void *ctx)
{
	s->fn = fn;
	s->ctx = ctx;
	int n = ring_buffer__consume(s->rb);
	s->fn = NULL;
	/* libbpf stops at the first nonzero callback return and hands it back */
	return n < 0 ? n : RBP_OK;
}

int rbp_oncpu_enable_stats(struct rbp_oncpu *s)
{
	if (s->stats_fd >= 0)
		return RBP_OK;
	s->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	return s->stats_fd < 0 ? rbp_perf_errno(-s->stats_fd) : RBP_OK;
}

void rbp_oncpu_stats(const struct rbp_oncpu *s, struct rbp_oncpu_stats *out)
{
	uint64_t *v = calloc(s->cpus.n, sizeof(*v));
	uint64_t *sums[C_N] = { &out->watched, &out->copied, &out->dropped, &out->no_thread };
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(out, 0, sizeof(*out));
	out->records = s->records;
	for (uint32_t k = 0; v && k < C_N; k++)
		if (!bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.counts), &k, v))
			for (size_t i = 0; i < s->cpus.n; i++)
				*sums[k] += v[i];
	free(v);
	memset(&info, 0, sizeof(info));
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.on_tick), &info, &len)) {
		out->runs = info.run_cnt;
		out->run_ns = info.run_time_ns;
	}
}

void rbp_oncpu_close(struct rbp_oncpu *s)
{
	if (!s)
		return;
	/* a perf event's link owns its event (destroying it closes the fd) */
	for (size_t i = 0; s->links && i < s->cpus.n; i++)
		if (s->links[i])
			bpf_link__destroy(s->links[i]);
	rbp_bpf_cpu_events_close(&s->cpus);
	ring_buffer__free(s->rb);
	if (s->stats_fd >= 0)
		close(s->stats_fd);
	oncpu_bpf__destroy(s->skel);
	for (size_t i = 0; i < s->n_procs; i++)
		free(s->procs[i].tids);
	free(s->procs);
	free(s->links);
	free(s);
}
