/*
 * test_agent.c - the agent's parts that need no Ruby process: URLs, the
 * Pyroscope ingest target, options and config files, the send queue's
 * limits, and the HTTP client against the HTTP server on loopback
 * (including a peer that never answers: the timeout).  The agent against
 * real Ruby processes and a receiver is tests/e2e/79-agent.rb.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "output/pyroscope.h"
#include "proc/environ.h"
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
	TEST("url: https, user and password, redacted for messages") {
		CHECK(!rbp_url_parse("https://x", &u));
		CHECK_EQ_INT(u.tls, 1);
		CHECK_EQ_STR(u.port, "443");
		CHECK(!rbp_url_parse("https://12345:glc_a%40b@profiles.example:8443/p", &u));
		CHECK_EQ_STR(u.user, "12345");
		CHECK_EQ_STR(u.password, "glc_a@b");
		CHECK_EQ_STR(u.host, "profiles.example");
		CHECK_EQ_STR(u.port, "8443");
		rbp_url_redact("https://12345:glc_a%40b@profiles.example:8443/p", buf, sizeof(buf));
		CHECK_EQ_STR(buf, "https://12345:***@profiles.example:8443/p");
		rbp_url_redact("http://h:1/", buf, sizeof(buf));
		CHECK_EQ_STR(buf, "http://h:1/");
	}
	TEST("url: refused") {
		CHECK_EQ_INT(rbp_url_parse("ftp://x", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("https://u:%4@x", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:0", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:99999", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://x:8a", &u), RBP_EURL);
		CHECK_EQ_INT(rbp_url_parse("http://@x", &u), RBP_EURL);
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
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "server", "gopher://x", why, sizeof(why)), RBP_EINVAL);
		CHECK(!rbp_agent_opt_set(&o, "server", "https://x", why, sizeof(why)));
		CHECK(!rbp_agent_opt_set(&o, "header", "X-Api-Key: abc", why, sizeof(why)));
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "header", "Host: evil", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "header", "X-A: b\r\nX-B: c", why, sizeof(why)), RBP_EINVAL);
		CHECK(strstr(why, "b\r") == NULL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "header", "no colon", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "tenant-id", "a\nb", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_INT(rbp_agent_opt_set(&o, "basic-auth-user", "a:b", why, sizeof(why)), RBP_EINVAL);
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
		CHECK(!strncmp(why, "line 6: unknown key", 19) && !strstr(why, "bogus"));
		unlink(path);
		CHECK_EQ_INT(rbp_agent_config(&o, path, why, sizeof(why)), RBP_EIO);
	}
	TEST("opts: config file: a long line is refused whole, never cut into a setting") {
		char line[5000];
		memset(line, 'a', sizeof(line));
		memcpy(line, "# ", 2);
		memcpy(line + 2046, "\nserver = http://10.9.9.9:1/\n", 29);
		strcpy(path, "/tmp/rbpeek-test-agent-XXXXXX");
		CHECK((fd = mkstemp(path)) >= 0);
		/* 2045 bytes of comment, then a line of its own: a setting */
		CHECK(write(fd, line, 2046 + 29) == 2046 + 29);
		close(fd);
		rbp_agent_opts_init(&o);
		CHECK(!rbp_agent_config(&o, path, why, sizeof(why)));
		CHECK_EQ_STR(o.server, "http://10.9.9.9:1/");
		/* the same words inside a comment: nothing */
		line[2046] = ' ';
		CHECK((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
		CHECK(write(fd, line, 2046 + 29) == 2046 + 29);
		close(fd);
		rbp_agent_opts_init(&o);
		CHECK(!rbp_agent_config(&o, path, why, sizeof(why)));
		CHECK_EQ_STR(o.server, "");
		/* over 4096 bytes: refused */
		CHECK((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
		line[2046 + 28] = 'a';
		line[sizeof(line) - 1] = '\n';
		CHECK(write(fd, line, sizeof(line)) == (ssize_t)sizeof(line));
		close(fd);
		CHECK_EQ_INT(rbp_agent_config(&o, path, why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_STR(why, "line 1: longer than 4096 bytes");
		CHECK_EQ_INT(rbp_agent_config(&o, "/dev/zero", why, sizeof(why)), RBP_EINVAL);
		CHECK_EQ_STR(why, "not a regular file");
	}
	TEST("opts: config file with a secret others may read: refused") {
		static const char text[] = "server = https://u:s3cret@h.example/\n";
		CHECK((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
		CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1);
		close(fd);
		chmod(path, 0644);
		rbp_agent_opts_init(&o);
		CHECK_EQ_INT(rbp_agent_config(&o, path, why, sizeof(why)), RBP_EINVAL);
		CHECK(strstr(why, "others may read") && !strstr(why, "s3cret"));
		chmod(path, 0600);
		rbp_agent_opts_init(&o);
		CHECK(!rbp_agent_config(&o, path, why, sizeof(why)));
		unlink(path);
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
	TEST("program names: a script path with a space is whole, a title's first word") {
		static const char c5[] = "ruby\0/srv/my app/bin/web worker.rb\0--port\0 3000";
		static const char c6[] = "puma 6.4.0 (tcp://0.0.0.0:3000) [my app]\0\0\0";
		agent_program_name(c5, sizeof(c5), out, sizeof(out));
		CHECK_EQ_STR(out, "web worker");
		agent_program_name(c6, sizeof(c6), out, sizeof(out));
		CHECK_EQ_STR(out, "puma");
	}
	TEST("names cut at a UTF-8 character's end") {
		/* "é" is 2 bytes: a 6-byte buffer holds "aaé" + NUL minus one byte */
		static const char c7[] = "ruby\0aa\xc3\xa9\xc3\xa9.rb";
		char small[6];
		agent_program_name(c7, sizeof(c7), small, sizeof(small));
		CHECK_EQ_STR(small, "aa\xc3\xa9");
		agent_copy_text(small, sizeof(small), "abcd\xe2\x82\xac", 7);
		CHECK_EQ_STR(small, "abcd");
		agent_copy_text(small, 4, "a\xf0\x9f\x98\x80", 5);
		CHECK_EQ_STR(small, "a");
	}
	TEST("pod UIDs from kubepods cgroup paths (cgroupfs and systemd drivers)") {
		static const char k1[] = "0::/kubepods/burstable/pod8dbc5577-d0e2-4706-8787-57d52c03ddf2/"
			"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
		static const char k2[] = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-"
			"pod8dbc5577_d0e2_4706_8787_57d52c03ddf2.slice/cri-containerd-"
			"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n";
		static const char k3[] = "0::/system.slice/pod8dbc5577-d0e2-4706-8787-57d52c03ddf2.scope\n";
		static const char k4[] = "0::/kubepods/pod8dbc5577-d0e2-4706-8787\n";
		agent_pod_uid(k1, sizeof(k1) - 1, out, sizeof(out));
		CHECK_EQ_STR(out, "8dbc5577-d0e2-4706-8787-57d52c03ddf2");
		agent_pod_uid(k2, sizeof(k2) - 1, out, sizeof(out));
		CHECK_EQ_STR(out, "8dbc5577-d0e2-4706-8787-57d52c03ddf2");
		agent_pod_uid(k3, sizeof(k3) - 1, out, sizeof(out));   /* not under kubepods */
		CHECK_EQ_STR(out, "");
		agent_pod_uid(k4, sizeof(k4) - 1, out, sizeof(out));   /* cut short */
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

/* A variable in the environment text env (n bytes). */
static int env_has(const char *env, size_t n, const char *kv)
{
	for (size_t i = 0; i < n; i += strnlen(env + i, n - i) + 1)
		if (!strcmp(env + i, kv))
			return 1;
	return 0;
}

extern char **environ;

/*
 * A child does what setproctitle does (Ruby's `$0 =`, puma's tag): copies
 * its environment to the heap, points environ at the copy, and writes over
 * the original area, the one /proc/PID/environ shows.
 */
static void test_environ(void)
{
	int ready[2];
	pid_t pid;
	char c, *env = malloc(1 << 20), path[64];
	size_t n = 0;

	TEST("environment from the process's own environ, after a title overwrote the original") {
		CHECK(!pipe(ready));
		if (!(pid = fork())) {
			size_t k = 0;
			while (environ[k])
				k++;
			char **copy = calloc(k + 2, sizeof(char *));
			char *first = environ[0], *last = k ? environ[k - 1] : NULL;
			for (size_t i = 0; i < k; i++)
				copy[i] = strdup(environ[i]);
			copy[k] = strdup("RBPEEK_ENV_TEST=from-memory");
			environ = copy;
			if (first)
				memset(first, 'x', (size_t)(last + strlen(last) - first));
			if (write(ready[1], "r", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		CHECK(pid > 0 && read(ready[0], &c, 1) == 1);
		CHECK(!rbp_proc_environ(pid, env, 1 << 20, &n));
		CHECK(env_has(env, n, "RBPEEK_ENV_TEST=from-memory"));
		/* what the kernel shows has been written over */
		snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
		int fd = open(path, O_RDONLY);
		ssize_t r = fd >= 0 ? read(fd, env, 1 << 20) : -1;
		CHECK(r > 0 && env[0] == 'x' && !env_has(env, (size_t)r, "RBPEEK_ENV_TEST=from-memory"));
		if (fd >= 0)
			close(fd);
		/* a small buffer: what does not fit is left out whole */
		CHECK(!rbp_proc_environ(pid, env, 10, &n));
		CHECK(n <= 10);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(ready[0]);
		close(ready[1]);
	}
	free(env);
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

/* Steps a server until told to stop ({server, stop}). */
static void *server_loop(void *arg)
{
	struct { struct rbp_http_server *hs; int stop; } *st = arg;
	while (!__atomic_load_n(&st->stop, __ATOMIC_SEQ_CST))
		rbp_http_server_step(st->hs, 50);
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

/* A raw peer: accepts one connection, answers each request on it with reply, n_req times. */
struct raw {
	int lfd, n_req;
	const char *reply;
};

static void *raw_peer(void *arg)
{
	struct raw *r = arg;
	char buf[8192];
	int fd = accept(r->lfd, NULL, NULL);

	for (int i = 0; fd >= 0 && i < r->n_req; i++) {
		size_t n = 0;
		ssize_t k;
		char *he = NULL;
		/* the head, then Content-Length bytes */
		while (!(he = memmem(buf, n, "\r\n\r\n", 4)) && (k = read(fd, buf + n, sizeof(buf) - n)) > 0)
			n += (size_t)k;
		if (!he)
			break;
		buf[n < sizeof(buf) ? n : n - 1] = 0;
		char *cl = strcasestr(buf, "Content-Length:");
		size_t want = (size_t)(he + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		while (n < want && (k = read(fd, buf + n, sizeof(buf) - n)) > 0)
			n += (size_t)k;
		if (write(fd, r->reply, strlen(r->reply)) < 0)
			break;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* POST once to a raw peer answering reply; the error, *status and why. */
static int post_to_raw(const char *reply, int *status, char *why, size_t cap)
{
	struct raw r = { .n_req = 1, .reply = reply };
	struct rbp_url u;
	pthread_t th;
	char url[64];
	int err;

	if (rbp_http_listen("127.0.0.1:0", &r.lfd))
		return -999;
	fcntl(r.lfd, F_SETFL, 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", rbp_http_port(r.lfd));
	rbp_url_parse(url, &u);
	pthread_create(&th, NULL, raw_peer, &r);
	err = rbp_http_post(&u, "/ingest", "t", "x", 1, 5000, status, why, cap);
	pthread_join(th, NULL);
	close(r.lfd);
	return err;
}

static void test_http_odd(void)
{
	char why[128];
	int status;

	TEST("http: a status of four digits is no status") {
		CHECK_EQ_INT(post_to_raw("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", &status, why,
					 sizeof(why)), RBP_EHTTP);
		CHECK_EQ_STR(why, "not an HTTP response");
	}
	TEST("http: LF-only replies are replies") {
		CHECK(!post_to_raw("HTTP/1.1 200 OK\nContent-Length: 2\n\nok", &status, why, sizeof(why)));
		CHECK_EQ_INT(status, 200);
		CHECK(!post_to_raw("HTTP/1.0 204\n\n", &status, why, sizeof(why)));
		CHECK_EQ_INT(status, 204);
	}
	TEST("http: a reason phrase's control bytes do not reach why") {
		CHECK(!post_to_raw("HTTP/1.1 500 \x1b[2J\x1b]0;x\x07 \xc2\x9b\r\nContent-Length: 0\r\n\r\n",
				   &status, why, sizeof(why)));
		CHECK_EQ_INT(status, 500);
		CHECK_EQ_STR(why, "HTTP 500 ?[2J?]0;x? ??");
	}
	TEST("http: one connection kept alive for many requests") {
		struct raw r = { .n_req = 3, .reply = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes" };
		struct rbp_http_client *c;
		struct rbp_url u;
		pthread_t th;
		char url[64];

		CHECK(!rbp_http_listen("127.0.0.1:0", &r.lfd));
		fcntl(r.lfd, F_SETFL, 0);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", rbp_http_port(r.lfd));
		CHECK(!rbp_url_parse(url, &u));
		CHECK(!rbp_http_client_new(&u, NULL, "X-Scope-OrgID: t1\r\n", &c, why, sizeof(why)));
		pthread_create(&th, NULL, raw_peer, &r);
		for (int i = 0; i < 3; i++) {
			status = 0;
			CHECK(!rbp_http_client_post(c, "/ingest", "t", "abc", 3, 5000, &status, NULL, why,
						    sizeof(why)));
			CHECK_EQ_INT(status, 200);
		}
		CHECK_EQ_INT(rbp_http_client_connections(c), 1);
		pthread_join(th, NULL);
		/* the peer closed it: the next request opens another (nobody listens: refused) */
		close(r.lfd);
		CHECK(rbp_http_client_post(c, "/ingest", "t", "abc", 3, 2000, &status, NULL, why,
					   sizeof(why)) != RBP_OK);
		rbp_http_client_free(c);
	}
	TEST("http server: idle connections hold up no one") {
		struct srv s = { 0 };
		struct rbp_http_server *hs;
		int idle[40], port;
		char *body;
		size_t len;
		struct rbp_url u;
		char url[64];

		CHECK(!rbp_http_listen("127.0.0.1:0", &s.fd));
		port = rbp_http_port(s.fd);
		CHECK(!rbp_http_server_new(s.fd, 60000, handler, &s, &hs));
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		for (int i = 0; i < 40; i++) {   /* more than it holds: the oldest make room */
			idle[i] = socket(AF_INET, SOCK_STREAM, 0);
			connect(idle[i], (struct sockaddr *)&sa, sizeof(sa));
			rbp_http_server_step(hs, 0);
		}
		/* a real request among them is answered at once (the idle ones wait 60 s) */
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
		CHECK(!rbp_url_parse(url, &u));
		struct { struct rbp_http_server *hs; int stop; } st = { hs, 0 };
		pthread_t th;
		pthread_create(&th, NULL, server_loop, &st);
		CHECK(!rbp_http_get(&u, "/metrics", 5000, &status, &body, &len));
		CHECK_EQ_INT(status, 200);
		free(body);
		__atomic_store_n(&st.stop, 1, __ATOMIC_SEQ_CST);
		pthread_join(th, NULL);
		for (int i = 0; i < 40; i++)
			close(idle[i]);
		rbp_http_server_free(hs);
		close(s.fd);
	}
}

int main(void)
{
	test_urls();
	test_target();
	test_opts();
	test_names();
	test_queue();
	test_environ();
	test_http();
	test_http_odd();
	return harness_report();
}
