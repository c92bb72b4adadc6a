/*
 * agent.h - rbpeek agent: profile every Ruby process of the host all the
 * time and push one profile per process per interval to a
 * continuous-profiling server (Pyroscope's HTTP ingest API).
 *
 * Three parts, each replaceable:
 *   - the process set (profile/procset.h in its all-processes mode): every
 *     Ruby process of the host, containers included, rescanned every
 *     scan_ms; members leave when they exit.
 *   - the sampler (struct rbp_agent_sampler below): fills each member's
 *     profile of the current interval.  The one built today is the ptrace
 *     sampler (agent_ptrace.c: the stack walker on a fixed-rate tick) and
 *     the in-kernel sampler (agent_bpf.c: profile/bpfsampler.h, one
 *     engine for every process) sit behind the same calls.
 *   - the exporter (struct rbp_agent_exporter): turns a profile into a
 *     request body and target (output/pyroscope.c: pprof to /ingest).
 *     It is given by the caller, which keeps this layer free of the
 *     output formats.
 * Sending is done by a thread of its own from a bounded queue, so a slow
 * or dead server never delays sampling: when the queue is full the oldest
 * profiles are dropped and counted; failed sends are retried with
 * exponential back-off.  A second thread answers the metrics endpoint.
 *
 * Memory is bounded whatever the host runs: at most max_processes members,
 * at most max_samples samples and max_nodes stack nodes per process and
 * interval (what does not fit is counted as lost), at most max_pending
 * profiles and max_pending_bytes bytes waiting to be sent.
 *
 * Nothing here prints: lines for the log go through opts.log (one per
 * change of the server's state, not one per failure).
 */
#ifndef RBP_PROFILE_AGENT_H
#define RBP_PROFILE_AGENT_H

#include <stdint.h>
#include <stdio.h>

#include "profile/procset.h"
#include "profile/profile.h"

struct rbp_bpf_sampler;

#define RBP_AGENT_MAX_LABELS 32

/* ---- the sampler seam ---------------------------------------------------- */

/* Where a sampler puts what it reads. */
struct rbp_agent_sink {
	/*
	 * The profile member m's samples go to now, and the monotonic time
	 * its interval started (sample times are relative to it); NULL when
	 * the profile is full: the sampler then counts the samples it would
	 * have added as lost.
	 */
	struct rbp_profile *(*profile)(void *ctx, struct rbp_procset_member *m, uint64_t *t0_ns);
	void *ctx;
};

struct rbp_agent_sampler_stats {
	uint64_t ticks;     /* sampling deadlines reached */
	uint64_t late;      /* ticks that started over half a period late (or skipped) */
	uint64_t samples;   /* stacks added */
	uint64_t lost;      /* stacks not added: a profile was full, or a read failed */
	uint64_t errors;    /* reads that failed */
};

struct rbp_agent_opts;

struct rbp_agent_sampler {
	const char *name;
	uint8_t on_cpu;   /* samples only threads on a CPU: the profiles are of CPU time */
	/* Set up sampling at o->rate_hz (o->pause, ...); *state is the sampler's.  RBP_ENOMEM, ... */
	int (*open)(const struct rbp_agent_opts *o, void **state);
	/*
	 * Sample every member of procs until the monotonic time until_ns (or
	 * until should_stop(ctx)), adding each sample to sink's profile for
	 * its process.  A member the sampler can no longer read is passed to
	 * rbp_procset_failed (which drops it when its process is gone).
	 * Returns RBP_OK, or RBP_ENOMEM.
	 */
	int (*run)(void *state, struct rbp_procset *procs, uint64_t until_ns,
		   const struct rbp_agent_sink *sink, int (*should_stop)(void *ctx), void *ctx,
		   struct rbp_agent_sampler_stats *st);
	/* Optional (NULL): m joined the set / is about to leave it. */
	int (*watch)(void *state, struct rbp_procset_member *m);
	void (*unwatch)(void *state, struct rbp_procset_member *m);
	void (*close)(void *state);   /* NULL-safe on state */
};

/*
 * The ptrace sampler: every thread's Ruby stack, read by the walker at
 * each tick, without stopping the process (unless o->pause: the thread
 * holding the GVL is stopped for the read, as record does).
 */
extern const struct rbp_agent_sampler rbp_agent_ptrace_sampler;
/*
 * The in-kernel sampler (agent_bpf.c): o->bpf, an engine the caller
 * opened at o->rate_hz, watches every member; on-CPU samples only (no
 * idle or blocked threads; GC frames and GVL state), at a cost that
 * follows the CPU the processes use, not their number.  RBP_EINVAL
 * without o->bpf.
 */
extern const struct rbp_agent_sampler rbp_agent_bpf_sampler;
/*
 * Set o's sampler (agent_bpf.c): the in-kernel one, its engine (o->bpf)
 * opened at o->rate_hz, when want_bpf and the kernel lets it run; else the
 * ptrace sampler, and when bpf was wanted *bpf_err and why (why_len bytes)
 * say why it could not run (*bpf_err RBP_OK otherwise).  Nothing printed.
 * rbp_agent_sampler_close() closes the engine.
 */
void rbp_agent_sampler_open(struct rbp_agent_opts *o, int want_bpf, int *bpf_err, char *why,
			    size_t why_len);
void rbp_agent_sampler_close(struct rbp_agent_opts *o);

/* ---- the exporter seam --------------------------------------------------- */

/* What is known of the process a profile comes from, for the request. */
struct rbp_agent_meta {
	const char *service;              /* service_name: its env, else its program */
	uint64_t from_unix_s, until_unix_s;
	uint32_t rate_hz;
	/* labels, service_name excluded: hostname, pid, ruby_version, ..., the user's */
	const char *keys[RBP_AGENT_MAX_LABELS + 8], *values[RBP_AGENT_MAX_LABELS + 8];
	size_t n_labels;
};

struct rbp_agent_exporter {
	const char *name;           /* "pyroscope" */
	const char *content_type;
	/* The request body for profile p. */
	int (*encode)(const struct rbp_profile *p, FILE *out);
	/* The request target ("/ingest?name=..."), appended to the server URL's path. */
	int (*target)(const struct rbp_agent_meta *m, char *buf, size_t cap);
};

/* ---- options ------------------------------------------------------------- */

#define RBP_AGENT_MAX_HEADERS 16

struct rbp_agent_opts {
	char server[1024];            /* http[s]://[USER[:PASSWORD]@]HOST[:PORT][/PATH] */
	char ca_file[1024];           /* a CA added to the system's store, "" none */
	char basic_user[128];         /* basic auth's user, "" none (or the URL's) */
	char password_file[1024];     /* basic auth's password: this file's first line */
	char bearer_file[1024];       /* Authorization: Bearer <this file's first line> */
	char tenant_id[128];          /* sent as X-Scope-OrgID, "" none */
	char headers[RBP_AGENT_MAX_HEADERS][512];   /* "Name: value", sent as given */
	size_t n_headers;
	/* Set by the caller from password_file / bearer_file (never by keys). */
	char password[256];
	char bearer[4096];
	uint8_t secret_in_config;     /* the config file held a secret (password, token header) */
	uint32_t rate_hz;             /* samples per second per thread (100) */
	uint32_t interval_s;          /* one profile per process every this many seconds (10) */
	char label_keys[RBP_AGENT_MAX_LABELS][64];
	char label_values[RBP_AGENT_MAX_LABELS][128];
	size_t n_labels;
	char metrics[128];            /* "127.0.0.1:PORT" for the metrics endpoint, "" none */
	uint32_t max_processes;       /* 512 */
	uint32_t max_samples;         /* per process per interval (100000) */
	uint32_t max_nodes;           /* stack nodes per process per interval (100000) */
	uint32_t max_pending;         /* profiles waiting to be sent (1000) */
	uint64_t max_pending_bytes;   /* their bytes (32 MiB) */
	uint32_t timeout_ms;          /* per request: connect, send, answer (10000) */
	uint32_t backoff_max_s;       /* longest wait between retries (60) */
	uint32_t scan_ms;             /* how often to look for new processes (1000) */
	char require_env[64];         /* profile only processes whose environment sets
				       * this variable (opt-in), "" all */
	uint8_t pause;                /* stop the GVL's holder for each read (consistent
				       * stacks; costs the process a stop per tick) */
	uint8_t ptrace;               /* sampler = ptrace: the ptrace sampler; else the
				       * in-kernel one where eBPF loads (the caller's choice) */

	/* Set by the caller, not by keys. */
	const struct rbp_agent_sampler *sampler;   /* NULL: rbp_agent_ptrace_sampler */
	struct rbp_bpf_sampler *bpf;               /* rbp_agent_bpf_sampler's engine (not owned) */
	const struct rbp_agent_exporter *exporter; /* required */
	struct rbp_vm_opts vo;                     /* for attaching (discovery, layout) */
	int (*should_stop)(void *ctx);             /* polled between slices; may be NULL */
	void (*log)(void *ctx, const char *line);  /* state changes; may be NULL */
	/* Called once the metrics endpoint listens (its port), may be NULL. */
	void (*listening)(void *ctx, int port);
	void *ctx;
};

/* Defaults into o (every field; the caller's hooks NULL). */
void rbp_agent_opts_init(struct rbp_agent_opts *o);
/*
 * Set one option by name: the keys of the config file and the long
 * options share them ("server", "rate", "interval", "label" (k=v, adds
 * one), "metrics", "max-processes", "max-samples", "max-nodes",
 * "max-pending", "max-pending-bytes", "timeout", "backoff-max",
 * "scan-interval", "require-env", "pause" (yes/no), "sampler" (bpf or
 * ptrace), "ca-file", "basic-auth-user", "basic-auth-password-file",
 * "bearer-token-file", "tenant-id", "header" ("Name: value", adds one)).
 * RBP_EINVAL with a reason in why when the key is unknown ("unknown") or
 * the value bad; why never quotes the value.
 */
int rbp_agent_opt_set(struct rbp_agent_opts *o, const char *key, const char *value, char *why,
		      size_t why_cap);
/*
 * Read a config file: "key = value" lines, '#' comments, blank lines.
 * Only a regular file of at most RBP_AGENT_CONFIG_MAX bytes, lines of at
 * most RBP_AGENT_LINE_MAX bytes (a longer one is refused whole, never cut
 * in two).  RBP_EIO when it cannot be read; RBP_EINVAL with "line N:
 * reason" in why, which never quotes the file's content (a line that is
 * not one of our keys is not echoed).  _fd reads a descriptor the caller
 * opened (with the invoking user's rights, under sudo).
 */
#define RBP_AGENT_CONFIG_MAX (64 * 1024)
#define RBP_AGENT_LINE_MAX 4096
int rbp_agent_config(struct rbp_agent_opts *o, const char *path, char *why, size_t why_cap);
int rbp_agent_config_fd(struct rbp_agent_opts *o, int fd, char *why, size_t why_cap);

/* ---- running ------------------------------------------------------------- */

/* What the agent did, for its metrics and the caller's closing words. */
struct rbp_agent_stats {
	uint64_t profiles_sent, profiles_dropped, profiles_rejected, profiles_empty;
	uint64_t send_failures;
	uint64_t tls_failures[5];     /* by enum rbp_tls_fail (util/http.h) */
	uint64_t connections;         /* to the server, opened (kept alive between profiles) */
	uint64_t pending, pending_bytes;
	uint64_t processes_watched, processes_attached, processes_capped;
	uint64_t samples, samples_lost, ticks, ticks_late;
	int server_up;
};

/*
 * Run until should_stop says so.  Errors before it starts: RBP_EURL (the
 * server), RBP_ETLS (the CA file cannot be loaded), RBP_ENOTLS (https in
 * a build without TLS), RBP_ENET (the metrics address cannot be bound),
 * RBP_ENOMEM.
 * The profiles of the last, partial interval are queued and sent for at
 * most timeout_ms before it returns.  *st (may be NULL) gets the totals.
 */
int rbp_agent_run(const struct rbp_agent_opts *o, struct rbp_agent_stats *st);

#endif
