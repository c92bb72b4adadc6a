/*
 * http.c - a minimal HTTP/1.1 client and one-request-at-a-time server
 * (see http.h).  Every socket is non-blocking; every wait is a poll()
 * bounded by the caller's timeout, measured against one deadline per call
 * so that a peer trickling bytes cannot stretch it.
 */
#include "util/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "util/err.h"

#define HEAD_MAX 16384            /* a response's or request's head */
#define DISCARD_MAX (64 * 1024)   /* response body read (and dropped) after a POST */
#define GET_MAX (4u << 20)        /* response body kept by a GET */

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(char *why, size_t cap, const char *fmt, const char *arg)
{
	if (why && cap)
		snprintf(why, cap, fmt, arg);
}

int rbp_url_parse(const char *s, struct rbp_url *u)
{
	const char *h, *end, *colon = NULL, *slash;
	size_t hl;

	memset(u, 0, sizeof(*u));
	if (strncmp(s, "http://", 7))
		return RBP_EURL;
	h = s + 7;
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	if (*h == '[') {   /* [v6]:port */
		const char *rb = memchr(h, ']', (size_t)(end - h));
		if (!rb)
			return RBP_EURL;
		hl = (size_t)(rb - h - 1);
		if (!hl || hl >= sizeof(u->host))
			return RBP_EURL;
		memcpy(u->host, h + 1, hl);
		if (rb + 1 < end && rb[1] != ':')
			return RBP_EURL;
		colon = rb + 1 < end ? rb + 1 : NULL;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		hl = (size_t)((colon ? colon : end) - h);
		if (!hl || hl >= sizeof(u->host) || memchr(h, '@', hl))
			return RBP_EURL;
		memcpy(u->host, h, hl);
	}
	if (colon) {
		size_t pl = (size_t)(end - colon - 1);
		if (!pl || pl >= sizeof(u->port) || strspn(colon + 1, "0123456789") < pl)
			return RBP_EURL;
		memcpy(u->port, colon + 1, pl);
		if (atoi(u->port) < 1 || atoi(u->port) > 65535)
			return RBP_EURL;
	} else {
		strcpy(u->port, "80");
	}
	if (slash) {
		size_t pl = strlen(slash);
		while (pl && slash[pl - 1] == '/')
			pl--;
		if (pl >= sizeof(u->path) || strpbrk(slash, "?# \t\r\n"))
			return RBP_EURL;
		memcpy(u->path, slash, pl);
	}
	return RBP_OK;
}

int rbp_url_encode(const char *s, char *buf, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
		if (n + (plain ? 1 : 3) >= cap) {
			if (cap)
				buf[n] = 0;
			return -1;
		}
		if (plain) {
			buf[n++] = (char)c;
		} else {
			buf[n++] = '%';
			buf[n++] = hex[c >> 4];
			buf[n++] = hex[c & 15];
		}
	}
	if (cap)
		buf[n] = 0;
	return 0;
}

/* Wait for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - mono_ms();
		struct pollfd p = { .fd = fd, .events = events };
		if (left <= 0)
			return 0;
		int r = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
		if (r > 0)
			return 1;
		if (r == 0)
			continue;
		if (errno != EINTR)
			return -1;
	}
}

static int connect_to(const struct rbp_url *u, long long deadline, int *out, char *why, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a;
	int last = RBP_ENET, gai;

	if ((gai = getaddrinfo(u->host, u->port, &hints, &res))) {
		say(why, cap, "cannot resolve '%s'", u->host);
		return RBP_ENET;
	}
	say(why, cap, "%s", "connection refused");
	for (a = res; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol), soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (fd < 0)
			continue;
		if (!connect(fd, a->ai_addr, a->ai_addrlen) ||
		    (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1 &&
		     !getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) && !soerr)) {
			freeaddrinfo(res);
			*out = fd;
			return RBP_OK;
		}
		if (errno == EINPROGRESS && !soerr) {
			last = RBP_ETIMEOUT;
			say(why, cap, "%s", "timed out connecting");
		} else {
			say(why, cap, "%s", strerror(soerr ? soerr : errno));
		}
		close(fd);
	}
	freeaddrinfo(res);
	return last;
}

static int send_all(int fd, const void *buf, size_t len, long long deadline)
{
	const char *p = buf;

	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int r = wait_fd(fd, POLLOUT, deadline);
			if (r == 0)
				return RBP_ETIMEOUT;
			if (r < 0)
				return RBP_ENET;
			continue;
		}
		return RBP_ENET;
	}
	return RBP_OK;
}

/* Read what comes into buf (cap bytes at most) until the peer closes or stop() says so. */
static int recv_until(int fd, char *buf, size_t cap, size_t *n, long long deadline,
		      int (*stop)(const char *buf, size_t n))
{
	while (*n < cap) {
		ssize_t r = recv(fd, buf + *n, cap - *n, 0);
		if (r > 0) {
			*n += (size_t)r;
			if (stop && stop(buf, *n))
				return RBP_OK;
			continue;
		}
		if (r == 0)
			return RBP_OK;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return RBP_ENET;
		int w = wait_fd(fd, POLLIN, deadline);
		if (w == 0)
			return RBP_ETIMEOUT;
		if (w < 0)
			return RBP_ENET;
	}
	return RBP_OK;
}

static int head_done(const char *buf, size_t n)
{
	return memmem(buf, n, "\r\n\r\n", 4) != NULL;
}

/* "HTTP/1.x NNN Reason": the code, or -1. */
static int status_of(const char *buf, size_t n, char *reason, size_t cap)
{
	int code = 0;
	size_t i = 9;

	if (n < 12 || strncmp(buf, "HTTP/1.", 7) || buf[8] != ' ')
		return -1;
	for (; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		code = code * 10 + buf[i] - '0';
	}
	if (reason && cap) {
		size_t k = 0;
		for (i = 13; i < n && buf[i] != '\r' && buf[i] != '\n' && k + 1 < cap; i++)
			reason[k++] = buf[i];
		reason[k] = 0;
	}
	return code;
}

/* One exchange: send head + body, read the response into buf (cap) and its status. */
static int exchange(const struct rbp_url *u, const char *head, const void *body, size_t len,
		    int timeout_ms, char *buf, size_t cap, size_t *n, int *status, char *why,
		    size_t why_cap)
{
	long long deadline = mono_ms() + timeout_ms;
	char reason[64];
	int fd = -1, err;

	*n = 0;
	if ((err = connect_to(u, deadline, &fd, why, why_cap)))
		return err;
	if ((err = send_all(fd, head, strlen(head), deadline)) ||
	    (len && (err = send_all(fd, body, len, deadline)))) {
		say(why, why_cap, "%s", err == RBP_ETIMEOUT ? "timed out sending" : "connection reset");
		close(fd);
		return err;
	}
	err = recv_until(fd, buf, cap, n, deadline, NULL);
	close(fd);
	if (err && !head_done(buf, *n)) {
		say(why, why_cap, "%s", err == RBP_ETIMEOUT ? "timed out waiting for the answer" :
		    "connection reset");
		return err;
	}
	if ((*status = status_of(buf, *n, reason, sizeof(reason))) < 0 || !head_done(buf, *n)) {
		say(why, why_cap, "%s", "not an HTTP response");
		return RBP_EHTTP;
	}
	if (why && why_cap && (*status < 200 || *status > 299))
		snprintf(why, why_cap, "HTTP %d %s", *status, reason);
	else if (why && why_cap)
		why[0] = 0;
	return RBP_OK;
}

static int host_header(const struct rbp_url *u, char *buf, size_t cap)
{
	int v6 = strchr(u->host, ':') != NULL;
	int n = snprintf(buf, cap, "%s%s%s%s%s", v6 ? "[" : "", u->host, v6 ? "]" : "",
			 strcmp(u->port, "80") ? ":" : "", strcmp(u->port, "80") ? u->port : "");
	return n < 0 || (size_t)n >= cap ? RBP_EURL : RBP_OK;
}

int rbp_http_post(const struct rbp_url *u, const char *target, const char *ctype,
		  const void *body, size_t len, int timeout_ms, int *status, char *why,
		  size_t why_cap)
{
	char host[300], *head, *buf;
	size_t hcap = strlen(u->path) + strlen(target) + 512, n;
	int err;

	if ((err = host_header(u, host, sizeof(host))))
		return err;
	if (!(head = malloc(hcap)) || !(buf = malloc(DISCARD_MAX))) {
		free(head);
		return RBP_ENOMEM;
	}
	snprintf(head, hcap, "POST %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rbpeek/%s\r\n"
		 "Content-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 u->path, target, host, RBP_VERSION, ctype, len);
	err = exchange(u, head, body, len, timeout_ms, buf, DISCARD_MAX, &n, status, why, why_cap);
	free(head);
	free(buf);
	return err;
}

int rbp_http_get(const struct rbp_url *u, const char *target, int timeout_ms, int *status,
		 char **body, size_t *len)
{
	char host[300], *head, *buf, *b;
	size_t hcap = strlen(u->path) + strlen(target) + 256, n;
	int err;

	*body = NULL;
	*len = 0;
	if ((err = host_header(u, host, sizeof(host))))
		return err;
	if (!(head = malloc(hcap)) || !(buf = malloc(GET_MAX + HEAD_MAX + 1))) {
		free(head);
		return RBP_ENOMEM;
	}
	snprintf(head, hcap, "GET %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rbpeek/%s\r\n"
		 "Connection: close\r\n\r\n", u->path, target, host, RBP_VERSION);
	err = exchange(u, head, NULL, 0, timeout_ms, buf, GET_MAX + HEAD_MAX, &n, status, NULL, 0);
	free(head);
	if (!err) {
		b = memmem(buf, n, "\r\n\r\n", 4) + 4;
		*len = n - (size_t)(b - buf);
		memmove(buf, b, *len);
		buf[*len] = 0;
		*body = buf;
		return RBP_OK;
	}
	free(buf);
	return err;
}

int rbp_http_listen(const char *addr, int *out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE }, *res;
	char host[64], port[8];
	const char *colon = strrchr(addr, ':');
	size_t hl;
	int fd, one = 1;

	if (!colon || !colon[1] || strlen(colon + 1) >= sizeof(port) ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return RBP_EURL;
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (!hl || hl >= sizeof(host))
		return RBP_EURL;
	memcpy(host, addr, hl);
	host[hl] = 0;
	strcpy(port, colon + 1);
	if (getaddrinfo(host, port, &hints, &res))
		return RBP_EURL;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16)) {
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return RBP_ENET;
	}
	freeaddrinfo(res);
	*out = fd;
	return RBP_OK;
}

int rbp_http_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl))
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int rbp_http_serve_one(int lfd, int wait_ms, int timeout_ms, rbp_http_handler handler, void *ctx)
{
	char req[HEAD_MAX + 1], method[16], path[1024], head[256], *body = NULL;
	const char *ctype = "text/plain; charset=utf-8";
	size_t n = 0, len = 0;
	long long deadline;
	int fd, status, err;

	if (wait_fd(lfd, POLLIN, mono_ms() + wait_ms) != 1)
		return RBP_OK;
	if ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		return RBP_OK;
	deadline = mono_ms() + timeout_ms;
	err = recv_until(fd, req, HEAD_MAX, &n, deadline, head_done);
	req[n] = 0;
	if (err || sscanf(req, "%15s %1023s HTTP/1.", method, path) != 2) {
		close(fd);
		return err ? err : RBP_EHTTP;
	}
	status = handler(ctx, method, path, &body, &len, &ctype);
	snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n", status, status == 200 ? "OK" : status == 404 ?
		 "Not Found" : status == 405 ? "Method Not Allowed" : "Error", ctype, len);
	err = send_all(fd, head, strlen(head), deadline);
	if (!err && len)
		err = send_all(fd, body, len, deadline);
	free(body);
	close(fd);
	return err;
}
