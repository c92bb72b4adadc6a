/*
 * agent_int.h - what the agent's threads share (agent.c: the sampling
 * thread; agent_send.c: the sender and the metrics endpoint).  Everything
 * below the mutex is read and written under it.
 */
#ifndef RBP_PROFILE_AGENT_INT_H
#define RBP_PROFILE_AGENT_INT_H

#include <pthread.h>
#include <stdint.h>

#include "profile/agent.h"
#include "util/http.h"

/* A profile waiting to be sent: owned by the queue, then by the sender. */
struct agent_item {
	struct agent_item *next;
	char *target;            /* request target, malloc'd */
	unsigned char *body;     /* malloc'd */
	size_t len;
};

enum agent_server_state { SERVER_UNKNOWN, SERVER_UP, SERVER_DOWN, SERVER_REJECTING };

#define AGENT_LOG_LINES 8

struct agent_shared {
	/* set before the threads start, then read-only */
	struct rbp_http_client *client;   /* the sender's: one connection kept alive */
	const char *server;          /* as given, its password hidden, for messages */
	const char *ctype;
	uint32_t timeout_ms, backoff_max_s, max_pending;
	uint64_t max_pending_bytes;
	int metrics_fd;              /* -1 none */

	pthread_mutex_t mu;
	pthread_cond_t cv;           /* an item arrived, or stop */
	struct agent_item *head, *tail;
	int stop;                    /* the sender and the metrics thread end */
	uint64_t drain_until_ms;     /* with stop: send what is pending until then */
	enum agent_server_state state;
	enum rbp_tls_fail last_tls;  /* what the last TLS failure was (a change is logged) */
	char log[AGENT_LOG_LINES][256];   /* lines for the sampling thread to hand to opts.log */
	size_t n_log;
	struct rbp_agent_stats st;
};

int agent_shared_init(struct agent_shared *s);
void agent_shared_destroy(struct agent_shared *s);   /* frees what is still queued */
/* Queue an item (taken over); drops the oldest beyond the limits. */
void agent_enqueue(struct agent_shared *s, struct agent_item *it);
void agent_item_free(struct agent_item *it);
/* The sender's thread body (arg: struct agent_shared *). */
void *agent_sender(void *arg);
/* The metrics endpoint's thread body (arg: struct agent_shared *). */
void *agent_metrics(void *arg);
/*
 * The program's name from its command line (NUL-separated, n bytes): the
 * script a ruby runs ("ruby -Ilib bin/app.rb" -> "app"), the command under
 * "bundle exec", else the program itself, up to a space ("puma 6.4.0
 * (tcp://...)" -> "puma").  "" when there is nothing.
 */
void agent_program_name(const char *cmd, size_t n, char *out, size_t cap);
/* s (at most len bytes) into out (cap > 0), cut at a UTF-8 character's end. */
void agent_copy_text(char *out, size_t cap, const char *s, size_t len);
/*
 * A container's id from the text of /proc/PID/cgroup: its last run of
 * exactly 64 lower-case hex digits (Docker, containerd, CRI-O, Podman
 * name their cgroups after it), "" when none.  cap > 64.
 */
void agent_container_id(const char *text, size_t n, char *out, size_t cap);
/*
 * A Kubernetes pod's UID from the text of /proc/PID/cgroup: the UUID after
 * "pod" in a kubepods path (cgroupfs driver: pod8dbc5577-d0e2-...; systemd
 * driver: kubepods-besteffort-pod8dbc5577_d0e2_....slice, given back with
 * dashes), "" when none.  cap > 36.
 */
void agent_pod_uid(const char *text, size_t n, char *out, size_t cap);
/* Monotonic milliseconds, nanoseconds. */
uint64_t agent_mono_ms(void);
uint64_t agent_mono_ns(void);
/* Sleep until the monotonic time t_ns (or a signal). */
void agent_sleep_until(uint64_t t_ns);

#endif
