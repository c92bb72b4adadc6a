/*
 * agent_send.c - the agent's two helper threads (see agent.h):
 *
 *   sender   takes the oldest queued profile and POSTs it; on a failure
 *            (no connection, timeout, 5xx, 408, 429) puts it back at the
 *            head and waits 1, 2, 4, ... up to backoff_max_s seconds
 *            before the next try; a 4xx answer is final for that profile
 *            (counted as rejected).  The sampling thread only appends to
 *            the queue, under a mutex held for a few pointer moves, so a
 *            slow server never delays a tick.  Each change of the
 *            server's state (up, down, rejecting) leaves one log line.
 *   metrics  answers GET /metrics on the loopback address with the
 *            counters in Prometheus's text format.
 */
#include "profile/agent_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include "util/err.h"

uint64_t agent_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void agent_sleep_until(uint64_t t_ns)
{
	struct timespec ts = { (time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull) };
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

uint64_t agent_mono_ms(void)
{
	return agent_mono_ns() / 1000000;
}

int agent_shared_init(struct agent_shared *s)
{
	pthread_condattr_t ca;

	if (pthread_mutex_init(&s->mu, NULL))
		return RBP_ENOMEM;
	if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&s->cv, &ca)) {
		pthread_mutex_destroy(&s->mu);
		return RBP_ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	return RBP_OK;
}

void agent_item_free(struct agent_item *it)
{
	if (!it)
		return;
	free(it->target);
	free(it->body);
	free(it);
}

void agent_shared_destroy(struct agent_shared *s)
{
	while (s->head) {
		struct agent_item *it = s->head;
		s->head = it->next;
		agent_item_free(it);
	}
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}

/* A line for the log (under s->mu); the oldest go when nobody took them. */
static void note(struct agent_shared *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct agent_shared *s, const char *fmt, ...)
{
	va_list ap;

	if (s->n_log == AGENT_LOG_LINES) {
		memmove(s->log[0], s->log[1], sizeof(s->log[0]) * (AGENT_LOG_LINES - 1));
		s->n_log--;
	}
	va_start(ap, fmt);
	vsnprintf(s->log[s->n_log++], sizeof(s->log[0]), fmt, ap);
	va_end(ap);
}

/* Take the head off the queue (under s->mu, the queue not empty). */
static struct agent_item *pop_head(struct agent_shared *s)
{
	struct agent_item *it = s->head;

	s->head = it->next;
	if (!s->head)
		s->tail = NULL;
	s->st.pending--;
	s->st.pending_bytes -= it->len;
	return it;
}

/* Drop the head, counting it (under s->mu). */
static void drop_head(struct agent_shared *s)
{
	agent_item_free(pop_head(s));
	s->st.profiles_dropped++;
}

static int over(const struct agent_shared *s)
{
	return s->st.pending > s->max_pending || s->st.pending_bytes > s->max_pending_bytes;
}

void agent_enqueue(struct agent_shared *s, struct agent_item *it)
{
	pthread_mutex_lock(&s->mu);
	it->next = NULL;
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	s->st.pending++;
	s->st.pending_bytes += it->len;
	while (s->head && over(s))
		drop_head(s);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Put an item that failed back at the head, unless the queue is full (under s->mu). */
static void requeue(struct agent_shared *s, struct agent_item *it)
{
	if (s->st.pending + 1 > s->max_pending || s->st.pending_bytes + it->len > s->max_pending_bytes) {
		s->st.profiles_dropped++;
		agent_item_free(it);
		return;
	}
	it->next = s->head;
	s->head = it;
	if (!s->tail)
		s->tail = it;
	s->st.pending++;
	s->st.pending_bytes += it->len;
}

static void wait_ms(struct agent_shared *s, uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
}

/* Whether the answer is final for this profile: 2xx, or a 4xx other than 408 and 429. */
static int final_status(int status)
{
	return (status >= 200 && status < 300) ||
	       (status >= 400 && status < 500 && status != 408 && status != 429);
}

void *agent_sender(void *arg)
{
	struct agent_shared *s = arg;
	uint64_t backoff = 0;
	char why[160];

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop && (!s->head || agent_mono_ms() >= s->drain_until_ms ||
				s->state == SERVER_DOWN))
			break;
		struct agent_item *it = pop_head(s);
		pthread_mutex_unlock(&s->mu);

		int status = 0;
		enum rbp_tls_fail tls = RBP_TLS_NONE;
		why[0] = 0;
		int err = rbp_http_client_post(s->client, it->target, s->ctype, it->body, it->len,
					       (int)s->timeout_ms, &status, &tls, why, sizeof(why));

		pthread_mutex_lock(&s->mu);
		s->st.connections = rbp_http_client_connections(s->client);
		if (tls != RBP_TLS_NONE && tls < RBP_TLS_NFAIL)
			s->st.tls_failures[tls]++;
		if (!err && final_status(status)) {
			backoff = 0;
			if (status < 300) {
				s->st.profiles_sent++;
				if (s->state != SERVER_UP && s->state != SERVER_UNKNOWN)
					note(s, "%s: up again (sending resumed; %llu profiles dropped so far)",
					     s->server, (unsigned long long)s->st.profiles_dropped);
				s->state = SERVER_UP;
			} else {
				s->st.profiles_rejected++;
				if (s->state != SERVER_REJECTING)
					note(s, "%s: rejects profiles (%s); dropping them", s->server, why);
				s->state = SERVER_REJECTING;
			}
			s->last_tls = RBP_TLS_NONE;
			agent_item_free(it);
			continue;
		}
		s->st.send_failures++;
		requeue(s, it);
		if (s->state != SERVER_DOWN || tls != s->last_tls)
			note(s, "%s: down (%s); retrying with back-off, keeping at most %u profiles",
			     s->server, why[0] ? why : rbp_strerror(err), s->max_pending);
		s->state = SERVER_DOWN;
		s->last_tls = tls;
		backoff = backoff ? backoff * 2 : 1000;
		if (backoff > (uint64_t)s->backoff_max_s * 1000)
			backoff = (uint64_t)s->backoff_max_s * 1000;
		wait_ms(s, backoff);
	}
	/* whatever could not be sent before the end counts as dropped */
	while (s->head)
		drop_head(s);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- the metrics endpoint ------------------------------------------------ */

static void rss_and_cpu(uint64_t *rss, double *cpu)
{
	struct rusage ru;
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	*rss = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) == 2)
			*rss = (uint64_t)res * 4096;
		fclose(f);
	}
	*cpu = 0;
	if (!getrusage(RUSAGE_SELF, &ru))
		*cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int metrics_page(void *ctx, const char *method, const char *path, char **body,
			size_t *len, const char **ctype)
{
	struct agent_shared *s = ctx;
	struct rbp_agent_stats st;
	uint64_t rss;
	double cpu;
	char *b;
	size_t cap = 8192;
	int n;

	if (strcmp(path, "/metrics") && strcmp(path, "/"))
		return 404;
	if (strcmp(method, "GET"))
		return 405;
	pthread_mutex_lock(&s->mu);
	st = s->st;
	st.server_up = s->state != SERVER_DOWN;
	pthread_mutex_unlock(&s->mu);
	rss_and_cpu(&rss, &cpu);
	if (!(b = malloc(cap)))
		return 500;
#define C(name, help, v) "# HELP rbpeek_agent_" name " " help "\n# TYPE rbpeek_agent_" name \
	" counter\nrbpeek_agent_" name " %llu\n"
#define G(name, help, v) "# HELP rbpeek_agent_" name " " help "\n# TYPE rbpeek_agent_" name \
	" gauge\nrbpeek_agent_" name " %llu\n"
	n = snprintf(b, cap,
		     C("profiles_sent_total", "Profiles the server accepted.", 0)
		     C("profiles_dropped_total", "Profiles dropped unsent (the queue was full, or at exit).", 0)
		     C("profiles_rejected_total", "Profiles the server refused (HTTP 4xx).", 0)
		     C("send_failures_total", "Failed attempts to send (retried).", 0)
		     G("pending_profiles", "Profiles waiting to be sent.", 0)
		     G("pending_bytes", "Bytes of the profiles waiting to be sent.", 0)
		     G("server_up", "1 when the last attempt to send worked.", 0)
		     G("processes_watched", "Ruby processes being profiled now.", 0)
		     C("processes_attached_total", "Ruby processes profiled since the start.", 0)
		     C("processes_capped_total", "Ruby processes not profiled: max-processes reached.", 0)
		     C("samples_total", "Stacks sampled.", 0)
		     C("samples_lost_total", "Stacks not sampled: a read failed or a profile was full.", 0)
		     C("ticks_total", "Sampling deadlines reached.", 0)
		     C("ticks_late_total", "Ticks that started late.", 0)
		     "# HELP rbpeek_agent_cpu_seconds_total CPU time of the agent itself (user + system).\n"
		     "# TYPE rbpeek_agent_cpu_seconds_total counter\nrbpeek_agent_cpu_seconds_total %.3f\n"
		     G("resident_memory_bytes", "Resident memory of the agent.", 0),
		     (unsigned long long)st.profiles_sent, (unsigned long long)st.profiles_dropped,
		     (unsigned long long)st.profiles_rejected, (unsigned long long)st.send_failures,
		     (unsigned long long)st.pending, (unsigned long long)st.pending_bytes,
		     (unsigned long long)(st.server_up != 0),
		     (unsigned long long)st.processes_watched,
		     (unsigned long long)st.processes_attached,
		     (unsigned long long)st.processes_capped, (unsigned long long)st.samples,
		     (unsigned long long)st.samples_lost, (unsigned long long)st.ticks,
		     (unsigned long long)st.ticks_late, cpu, (unsigned long long)rss);
#undef C
#undef G
	if (n >= 0 && (size_t)n < cap)
		n += snprintf(b + n, cap - (size_t)n,
			      "# HELP rbpeek_agent_connections_total Connections opened to the server "
			      "(kept alive between profiles).\n# TYPE rbpeek_agent_connections_total counter\n"
			      "rbpeek_agent_connections_total %llu\n"
			      "# HELP rbpeek_agent_tls_failures_total TLS handshakes that failed, by reason.\n"
			      "# TYPE rbpeek_agent_tls_failures_total counter\n",
			      (unsigned long long)st.connections);
	for (int f = RBP_TLS_UNKNOWN_CA; f < RBP_TLS_NFAIL && n >= 0 && (size_t)n < cap; f++)
		n += snprintf(b + n, cap - (size_t)n, "rbpeek_agent_tls_failures_total{reason=\"%s\"} %llu\n",
			      rbp_tls_fail_name((enum rbp_tls_fail)f), (unsigned long long)st.tls_failures[f]);
	if (n < 0 || (size_t)n >= cap) {
		free(b);
		return 500;
	}
	*body = b;
	*len = (size_t)n;
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	return 200;
}

void *agent_metrics(void *arg)
{
	struct agent_shared *s = arg;
	struct rbp_http_server *srv;

	/* many connections at once: an idle client holds up nobody */
	if (rbp_http_server_new(s->metrics_fd, 2000, metrics_page, s, &srv))
		return NULL;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		rbp_http_server_step(srv, 200);
	}
	rbp_http_server_free(srv);
	return NULL;
}
