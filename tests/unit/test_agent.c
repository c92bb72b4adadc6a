/*
 * test_agent.c - the agent's parts that need no Ruby process: URLs, the
 * Pyroscope ingest target, options and config files, the send queue's
 * limits, and the HTTP client against the HTTP server on loopback
 * (including a peer that never answers: the timeout).  The agent against
 * real Ruby processes and a receiver is tests/e2e/79-agent.rb.
 */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "output/pyroscope.h"
#include "profile/agent.h"
#include "profile/agent_int.h"
#include "util/err.h"
#include "util/http.h"

static void test_urls(void)
{
	struct rbp_url u;
	char buf[64];

	TEST("url: host, port, path") {
		CHECK(!rbp_url_parse("http://pyro.example:4040/base/", &u));
		CHECK_EQ_STR(u.host, "pyro.example");
		CHECK_EQ_STR(u.port, "4040");
		CHECK_EQ_STR(u.path, "/base");
		CHECK(!rbp_url_parse("http://127.0.0.1", &u));
		CHECK_EQ_STR(u.port, "80");
		CHECK_EQ_STR(u.path, "");
		CHECK(!rbp_url_parse("http://[::1]:9/", &u));
		CHECK_EQ_STR(u.host, "::1");
		CHECK_EQ_STR(u.port, "9");
	}
	TEST("url: refused") {
		CHECK_EQ_INT(rbp_url_parse("https://x", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:0", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:99999", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:8a", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://u@x", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x/?q", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("x:80", &u), RBP_EURL);
	}
	TEST("url: encode") {
		CHECK(!rbp_url_encode("a{b=c,d}.~ é", buf, sizeof(buf)));
		CHECK_EQ_STR(buf, "a%7Bb%3Dc%2Cd%7D.~%20%C3%A9");
		CHECK(rbp_url_encode("{{{{", buf, 6) < 0);
	}
}

static void test_target(void)
{
	struct rbp_agent_meta m = { .service = "my app", .from_unix_s = 100, .until_unix_s = 110,
				    .rate_hz = 99, .n_labels = 2,
				    .keys = { "pid", "team" }, .values = { "42", "a,b}=c" } };
	char buf[1024];

	TEST("pyroscope: target, labels escaped") {
		CHECK(!rbp_pyroscope_target(&m, buf, sizeof(buf)));
		/* my_app{pid=42,team=a_b__c} */
		CHECK_EQ_STR(buf, "/ingest?name=my_app%7Bpid%3D42%2Cteam%3Da_b__c%7D&from=100&until=110"
			     "&format=pprof&sampleRate=99&spyName=rbpeek");
		CHECK_EQ_INT(rbp_pyroscope_target(&m, buf, 40), RBP_EINVAL);
	}
}

static void test_opts(void)
{
	struct rbp_agent_opts o;
	char why[200], path[] = "/tmp/rbpeek-test-agent-XXXXXX";
	int fd;

	rbp_agent_opts_init(&o);
	TEST("opts: defaults and keys") {
		CHECK_EQ_INT(o.rate_hz, 100);
		CHECK_EQ_INT(o.interval_s, 10);
		CHECK(!rbp_agent_opt_set(&o, "rate", "250", why, sizeof(why)));
		CHECK_EQ_INT(o.rate_hz, 250);
		CHECK(!rbp_agent_opt_set(&o, "timeout", "3", why, sizeof(why)));
		CHECK_EQ_INT(o.timeout_ms, 3000);
		CHECK(!rbp_agent_opt_set(&o, "max-pending-bytes", "8M", why, sizeof(why)));
		CHECK(o.max_pending_bytes == 8ull << 20);
		CHECK(!rbp_agent_opt_set(&o, "label", "env=prod", why, sizeof(why)));
		CHECK(!rbp_agent_opt_set(&o, "label", "env=staging", why, sizeof(why)));
		CHECK_EQ_INT(o.n_labels, 1);
		CHECK_EQ_STR(o.label_values[0], "staging");
		CHECK_EQ_INT(o.ptrace, 0);   /* the in-kernel sampler by default */
		CHECK(!rbp_agent_opt_set(&o, "sampler", "ptrace", why, sizeof(why)));
		CHECK_EQ_INT(o.ptrace, 1);
		CHECK(!rbp_agent_opt_set(&o, "sampler", "bpf", why, sizeof(why)));
		CHECK_EQ_INT(o.ptrace, 0);
	}
	TEST("opts: bad values") {
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "rate", "0", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "rate", "-5", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "interval", "10s", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "label", "novalue", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "label", "9x=1", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "label", "service_name=x", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "server", "https://x", why, sizeof(why)), RBP_EINVAL);
		CHECK(strstr(why, "relay") != NULL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "sampler", "perf", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_STR(why, "bpf or ptrace");
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "nonsense", "1", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_STR(why, "unknown");
	}
	TEST("opts: config file") {
		static const char text[] = "# agent\n\n  server = http://127.0.0.1:4040  \n"
					   "interval=15\nlabel = region=eu-west-1\n";
		CHECK((fd = mkstemp(path)) >= 0);
		CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1);
		close(fd);
		rbp_agent_opts_init(&o);
		CHECK(!rbp_agent_config(&o, path, why, sizeof(why)));
		CHECK_EQ_STR(o.server, "http://127.0.0.1:4040");
		CHECK_EQ_INT(o.interval_s, 15);
		CHECK_EQ_STR(o.label_keys[0], "region");
		CHECK_EQ_STR(o.label_values[0], "eu-west-1");
		FILE *f = fopen(path, "a");
		fputs("bogus = 1\n", f);
		fclose(f);
		CHECK_EQ_INT(rbp_agent_config(&o, path, why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_STR(why, "line 6: unknown key 'bogus'");
		unlink(path);
		CHECK_EQ_INT(rbp_agent_config(&o, path, why, sizeof(why)), RBP_EIO);
	}
}

static void test_names(void)
{
	static const char c1[] = "ruby\0-Ilib\0-r\0json\0bin/worker.rb\0--queue\0a";
	static const char c2[] = "/usr/bin/ruby3.3\0-e\0loop{}";
	static const char c3[] = "/usr/local/bin/bundle\0exec\0sidekiq\0-C\0x.yml";
	static const char c4[] = "puma 6.4.0 (tcp://0.0.0.0:3000) [app]";
	static const char g1[] = "0::/system.slice/docker-"
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n";
	static const char g2[] = "4:memory:/process_api/7df30fe31fa3bed18d2ef6251e9bbc93\n0::/\n";
	char out[128];

	TEST("program names") {
		agent_program_name(c1, sizeof(c1), out, sizeof(out));
		CHECK_EQ_STR(out, "worker");
		agent_program_name(c2, sizeof(c2), out, sizeof(out));
		CHECK_EQ_STR(out, "ruby3.3");
		agent_program_name(c3, sizeof(c3), out, sizeof(out));
		CHECK_EQ_STR(out, "sidekiq");
		agent_program_name(c4, sizeof(c4), out, sizeof(out));
		CHECK_EQ_STR(out, "puma");
		agent_program_name("", 0, out, sizeof(out));
		CHECK_EQ_STR(out, "");
	}
	TEST("container ids") {
		agent_container_id(g1, sizeof(g1) - 1, out, sizeof(out));
		CHECK_EQ_STR(out, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
		agent_container_id(g2, sizeof(g2) - 1, out, sizeof(out));
		CHECK_EQ_STR(out, "");
	}
}

static struct agent_item *item(size_t len)
{
	struct agent_item *it = calloc(1, sizeof(*it));
	it->target = strdup("/ingest");
	it->body = calloc(1, len);
	it->len = len;
	return it;
}

static void test_queue(void)
{
	struct agent_shared s;

	memset(&s, 0, sizeof(s));
	TEST("queue: drops the oldest beyond its limits, counting them") {
		CHECK(!agent_shared_init(&s));
		s.max_pending = 3;
		s.max_pending_bytes = 1000;
		for (int i = 0; i < 5; i++)
			agent_enqueue(&s, item(100));
		CHECK_EQ_INT(s.st.pending, 3);
		CHECK_EQ_INT(s.st.profiles_dropped, 2);
		CHECK_EQ_INT(s.st.pending_bytes, 300);
		agent_enqueue(&s, item(900));   /* over the bytes: the oldest go until it fits */
		CHECK_EQ_INT(s.st.pending, 2);
		CHECK_EQ_INT(s.st.pending_bytes, 1000);
		CHECK_EQ_INT(s.st.profiles_dropped, 4);
		agent_enqueue(&s, item(2000));  /* alone over the limit: dropped too */
		CHECK_EQ_INT(s.st.pending, 0);
		CHECK_EQ_INT(s.st.profiles_dropped, 7);
		agent_shared_destroy(&s);
	}
}

/* ---- client against server ---------------------------------------------- */

struct srv {
	int fd, n;
	char last_path[256];
	size_t last_len;
};

static int handler(void *ctx, const char *method, const char *path, char **body, size_t *len,
		   const char **ctype)
{
	struct srv *s = ctx;
	snprintf(s->last_path, sizeof(s->last_path), "%s %s", method, path);
	if (!strcmp(path, "/p/missing"))
		return 404;
	*body = strdup("hello\n");
	*len = 6;
	return 200;
}

static void *serve(void *arg)
{
	struct srv *s = arg;
	for (int i = 0; i < s->n; i++)
		rbp_http_serve_one(s->fd, 5000, 5000, handler, s);
	return NULL;
}

static void test_http(void)
{
	struct srv s = { .n = 3 };
	struct rbp_url u;
	pthread_t th;
	char url[64], why[128], *body;
	size_t len;
	int status = 0, silent, port;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	TEST("http: listen, get, post, 404") {
		CHECK(!rbp_http_listen("127.0.0.1:0", &s.fd));
		port = rbp_http_port(s.fd);
		CHECK(port > 0);
		CHECK_EQ_INT(rbp_http_listen("nonsense", &silent), RBP_EURL);
		pthread_create(&th, NULL, serve, &s);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/p", port);
		CHECK(!rbp_url_parse(url, &u));
		CHECK(!rbp_http_get(&u, "/metrics", 5000, &status, &body, &len));
		CHECK_EQ_INT(status, 200);
		CHECK_EQ_INT(len, 6);
		CHECK(body && !strcmp(body, "hello\n"));
		free(body);
		CHECK_EQ_STR(s.last_path, "GET /p/metrics");
		CHECK(!rbp_http_post(&u, "/ingest?x=1", "binary/octet-stream", "abc", 3, 5000, &status,
				     why, sizeof(why)));
		CHECK_EQ_INT(status, 200);
		CHECK_EQ_STR(why, "");
		CHECK_EQ_STR(s.last_path, "POST /p/ingest?x=1");
		CHECK(!rbp_http_post(&u, "/missing", "text/plain", "", 0, 5000, &status, why, sizeof(why)));
		CHECK_EQ_INT(status, 404);
		CHECK_EQ_STR(why, "HTTP 404 Not Found");
		pthread_join(th, NULL);
		close(s.fd);
	}
	TEST("http: refused, and a peer that never answers times out") {
		/* a port nobody listens on: bind, note it, close */
		silent = socket(AF_INET, SOCK_STREAM, 0);
		bind(silent, (struct sockaddr *)&sa, sizeof(sa));
		getsockname(silent, (struct sockaddr *)&sa, &sl);
		close(silent);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
		CHECK(!rbp_url_parse(url, &u));
		CHECK_EQ_INT(rbp_http_post(&u, "/ingest", "t", "x", 1, 2000, &status, why, sizeof(why)),
			     RBP_ENET);
		/* listening, never accepting: the connection completes, no answer comes */
		CHECK(!rbp_http_listen("127.0.0.1:0", &silent));
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", rbp_http_port(silent));
		CHECK(!rbp_url_parse(url, &u));
		CHECK_EQ_INT(rbp_http_post(&u, "/ingest", "t", "x", 1, 300, &status, why, sizeof(why)),
			     RBP_ETIMEOUT);
		CHECK(strstr(why, "timed out") != NULL);
		close(silent);
	}
}

int main(void)
{
	test_urls();
	test_target();
	test_opts();
	test_names();
	test_queue();
	test_http();
	return harness_report();
}
