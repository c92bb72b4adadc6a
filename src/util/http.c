/*
 * http.c - a minimal HTTP/1.1 client (keep-alive, TLS through OpenSSL)
 * and a small server (see http.h).  Every socket is non-blocking; every
 * wait is a poll() bounded by the caller's timeout, measured against one
 * deadline per call so that a peer trickling bytes cannot stretch it.
 */
#include "util/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#ifdef RBP_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#include "util/err.h"

#define HEAD_MAX 16384            /* a response's or request's head */
#define DISCARD_MAX (4u << 20)    /* a POST's response body read (and dropped) to keep the connection */
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

/* ---- URLs ------------------------------------------------------------------ */

static int unhex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode s[0..n) into out (cap); -1 when bad or too long. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '%') {
			if (i + 2 >= n)
				return -1;
			int h = unhex(s[i + 1]), l = unhex(s[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = h * 16 + l;
			i += 2;
		}
		if (!c || c == '\r' || c == '\n' || k + 1 >= cap)
			return -1;
		out[k++] = (char)c;
	}
	out[k] = 0;
	return 0;
}

int rbp_url_parse(const char *s, struct rbp_url *u)
{
	const char *h, *end, *colon = NULL, *slash, *at;
	size_t hl;

	memset(u, 0, sizeof(*u));
	if (!strncmp(s, "https://", 8)) {
		u->tls = 1;
		h = s + 8;
	} else if (!strncmp(s, "http://", 7)) {
		h = s + 7;
	} else {
		return RBP_EURL;
	}
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	/* USER[:PASSWORD]@ (the last '@' before the path: a password may hold one encoded) */
	at = NULL;
	for (const char *p = h; p < end; p++)
		if (*p == '@')
			at = p;
	if (at) {
		const char *pc = memchr(h, ':', (size_t)(at - h));
		size_t ul = (size_t)((pc ? pc : at) - h);
		if (!ul || pct_decode(h, ul, u->user, sizeof(u->user)) ||
		    (pc && pct_decode(pc + 1, (size_t)(at - pc - 1), u->password, sizeof(u->password))))
			return RBP_EURL;
		h = at + 1;
	}
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
		if (!hl || hl >= sizeof(u->host))
			return RBP_EURL;
		memcpy(u->host, h, hl);
		if (strpbrk(u->host, " \t\r\n%"))
			return RBP_EURL;
	}
	if (colon) {
		size_t pl = (size_t)(end - colon - 1);
		if (!pl || pl >= sizeof(u->port) || strspn(colon + 1, "0123456789") < pl)
			return RBP_EURL;
		memcpy(u->port, colon + 1, pl);
		if (atoi(u->port) < 1 || atoi(u->port) > 65535)
			return RBP_EURL;
	} else {
		strcpy(u->port, u->tls ? "443" : "80");
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

void rbp_url_redact(const char *s, char *buf, size_t cap)
{
	const char *h = strstr(s, "://"), *slash, *at = NULL, *pc;

	if (!cap)
		return;
	if (!h) {
		snprintf(buf, cap, "%s", s);
		return;
	}
	h += 3;
	slash = strchr(h, '/');
	for (const char *p = h; *p && (!slash || p < slash); p++)
		if (*p == '@')
			at = p;
	pc = at ? memchr(h, ':', (size_t)(at - h)) : NULL;
	if (!pc)
		snprintf(buf, cap, "%s", s);
	else
		snprintf(buf, cap, "%.*s:***%s", (int)(pc - s), s, at);
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

/* ---- sockets ----------------------------------------------------------------- */

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

/* Where a head ends (the blank line, CRLF or LF alone): the body's offset, or 0. */
static size_t head_end(const char *buf, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* Peer text for a log: control and non-ASCII bytes become '?'. */
static void clean_text(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/*
 * "HTTP/1.x NNN[ Reason]": the code (exactly three digits, then a space
 * or the line's end), or -1.  *v10 set for HTTP/1.0.
 */
static int status_of(const char *buf, size_t n, char *reason, size_t cap, int *v10)
{
	int code = 0;
	size_t i = 9;

	if (n < 13 || strncmp(buf, "HTTP/1.", 7) || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
		return -1;
	for (; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		code = code * 10 + buf[i] - '0';
	}
	if (buf[12] != ' ' && buf[12] != '\r' && buf[12] != '\n')
		return -1;
	if (code < 100)
		return -1;
	*v10 = buf[7] == '0';
	if (reason && cap) {
		size_t k = 0;
		for (i = 13; buf[12] == ' ' && i < n && buf[i] != '\r' && buf[i] != '\n' && k + 1 < cap; i++)
			reason[k++] = buf[i];
		reason[k] = 0;
		clean_text(reason);
	}
	return code;
}

/* The value of header name in a head (NUL-ended), into out; 1 when present. */
static int header(const char *head, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);

	for (const char *p = strchr(head, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
		const char *l = p + 1;
		if (strncasecmp(l, name, nl) || l[nl] != ':')
			continue;
		l += nl + 1;
		while (*l == ' ' || *l == '\t')
			l++;
		size_t k = strcspn(l, "\r\n");
		while (k && (l[k - 1] == ' ' || l[k - 1] == '\t'))
			k--;
		snprintf(out, cap, "%.*s", (int)(k < cap ? k : cap - 1), l);
		return 1;
	}
	return 0;
}

/* ---- a connection: plain or TLS ---------------------------------------------- */

struct conn {
	int fd;
#ifdef RBP_TLS
	SSL *ssl;
#endif
	char *buf;            /* bytes read, not yet consumed: buf[off..n) */
	size_t off, n, cap;
};

static void conn_close(struct conn *c)
{
#ifdef RBP_TLS
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
#endif
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->off = c->n = 0;
}

#ifdef RBP_TLS
/* Wait as SSL_get_error says: 1 to retry, else an RBP error. */
static int tls_wait(struct conn *c, int ret, long long deadline)
{
	int e = SSL_get_error(c->ssl, ret), w;

	if (e == SSL_ERROR_WANT_READ)
		w = wait_fd(c->fd, POLLIN, deadline);
	else if (e == SSL_ERROR_WANT_WRITE)
		w = wait_fd(c->fd, POLLOUT, deadline);
	else
		return e == SSL_ERROR_ZERO_RETURN ? RBP_OK : RBP_ENET;
	return w == 1 ? 1 : w == 0 ? RBP_ETIMEOUT : RBP_ENET;
}
#endif

static int conn_send(struct conn *c, const void *buf, size_t len, long long deadline)
{
#ifdef RBP_TLS
	if (c->ssl) {
		const char *p = buf;
		while (len) {
			int w = SSL_write(c->ssl, p, len > 1u << 30 ? 1 << 30 : (int)len);
			if (w > 0) {
				p += w;
				len -= (size_t)w;
				continue;
			}
			int r = tls_wait(c, w, deadline);
			if (r != 1)
				return r ? r : RBP_ENET;
		}
		return RBP_OK;
	}
#endif
	return send_all(c->fd, buf, len, deadline);
}

/* Read more into c->buf (grown up to limit): >0 bytes, 0 at the peer's end, or an RBP error. */
static long conn_fill(struct conn *c, size_t limit, long long deadline)
{
	if (c->off && c->off == c->n)
		c->off = c->n = 0;
	if (c->n == c->cap) {
		if (c->off) {   /* drop what was consumed */
			memmove(c->buf, c->buf + c->off, c->n - c->off);
			c->n -= c->off;
			c->off = 0;
		}
		if (c->n == c->cap) {
			size_t nc = c->cap ? c->cap * 2 : 16384;
			if (nc > limit)
				nc = limit;
			if (nc <= c->cap)
				return RBP_EHTTP;
			char *nb = realloc(c->buf, nc + 1);
			if (!nb)
				return RBP_ENOMEM;
			c->buf = nb;
			c->cap = nc;
		}
	}
	for (;;) {
#ifdef RBP_TLS
		if (c->ssl) {
			int r = SSL_read(c->ssl, c->buf + c->n, (int)(c->cap - c->n));
			if (r > 0) {
				c->n += (size_t)r;
				return r;
			}
			int w = tls_wait(c, r, deadline);
			if (w != 1)
				return w;
			continue;
		}
#endif
		ssize_t r = recv(c->fd, c->buf + c->n, c->cap - c->n, 0);
		if (r > 0) {
			c->n += (size_t)r;
			return r;
		}
		if (r == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return RBP_ENET;
		int w = wait_fd(c->fd, POLLIN, deadline);
		if (w == 0)
			return RBP_ETIMEOUT;
		if (w < 0)
			return RBP_ENET;
	}
}

/* ---- the client ---------------------------------------------------------------- */

struct rbp_http_client {
	struct rbp_url url;
	char *headers;          /* extra lines, "" none */
	struct conn conn;       /* fd -1 when none is open */
	unsigned long opened;
#ifdef RBP_TLS
	SSL_CTX *ctx;
#endif
};

const char *rbp_tls_fail_name(enum rbp_tls_fail f)
{
	switch (f) {
	case RBP_TLS_UNKNOWN_CA: return "unknown_ca";
	case RBP_TLS_NAME: return "name_mismatch";
	case RBP_TLS_EXPIRED: return "expired";
	case RBP_TLS_HANDSHAKE: return "handshake";
	default: return "none";
	}
}

#ifdef RBP_TLS
/* The handshake on a connected c->fd, checking the certificate and the name. */
static int tls_start(struct rbp_http_client *hc, long long deadline, enum rbp_tls_fail *fail,
		     char *why, size_t cap)
{
	struct conn *c = &hc->conn;
	unsigned char addr[16];
	int is_ip = inet_pton(AF_INET, hc->url.host, addr) == 1 ||
		    inet_pton(AF_INET6, hc->url.host, addr) == 1;

	ERR_clear_error();
	if (!(c->ssl = SSL_new(hc->ctx)) || !SSL_set_fd(c->ssl, c->fd))
		return RBP_ENOMEM;
	SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), hc->url.host) :
		    (!SSL_set_tlsext_host_name(c->ssl, hc->url.host) || !SSL_set1_host(c->ssl, hc->url.host)))
		return RBP_ENOMEM;
	for (;;) {
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return RBP_OK;
		int w = tls_wait(c, r, deadline);
		if (w == 1)
			continue;
		if (w == RBP_ETIMEOUT) {
			say(why, cap, "%s", "TLS handshake failed (timed out)");
			*fail = RBP_TLS_HANDSHAKE;
			return RBP_ETIMEOUT;
		}
		break;
	}
	long v = SSL_get_verify_result(c->ssl);
	switch (v) {
	case X509_V_OK: {
		unsigned long e = ERR_peek_last_error();
		const char *r = e ? ERR_reason_error_string(e) : NULL;
		*fail = RBP_TLS_HANDSHAKE;
		say(why, cap, "TLS handshake failed (%s)", r ? r : "connection closed");
		break;
	}
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		*fail = RBP_TLS_NAME;
		say(why, cap, "TLS: name mismatch (the server's certificate is not for %s)", hc->url.host);
		break;
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID:
		*fail = RBP_TLS_EXPIRED;
		say(why, cap, "TLS: %s", v == X509_V_ERR_CERT_HAS_EXPIRED ?
		    "certificate expired" : "certificate not valid yet (check the clock)");
		break;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		*fail = RBP_TLS_UNKNOWN_CA;
		say(why, cap, "%s", "TLS: unknown CA (the server's certificate is not signed by an "
		    "authority in the system's store or --ca-file)");
		break;
	default:
		*fail = RBP_TLS_HANDSHAKE;
		say(why, cap, "TLS: certificate refused (%s)", X509_verify_cert_error_string(v));
		break;
	}
	return RBP_ETLS;
}
#endif

int rbp_http_client_new(const struct rbp_url *u, const char *ca_file, const char *headers,
			struct rbp_http_client **out, char *why, size_t cap)
{
	struct rbp_http_client *c;

	*out = NULL;
#ifndef RBP_TLS
	if (u->tls) {
		say(why, cap, "%s", rbp_strerror(RBP_ENOTLS));
		return RBP_ENOTLS;
	}
#endif
	if (!(c = calloc(1, sizeof(*c))) || !(c->headers = strdup(headers ? headers : ""))) {
		free(c);
		return RBP_ENOMEM;
	}
	c->url = *u;
	c->conn.fd = -1;
#ifdef RBP_TLS
	if (u->tls) {
		if (!(c->ctx = SSL_CTX_new(TLS_client_method()))) {
			rbp_http_client_free(c);
			return RBP_ENOMEM;
		}
		SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_mode(c->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		/* the system's store; a missing one (a bare chroot) leaves --ca-file alone */
		SSL_CTX_set_default_verify_paths(c->ctx);
		if (ca_file && *ca_file && SSL_CTX_load_verify_locations(c->ctx, ca_file, NULL) != 1) {
			say(why, cap, "cannot load the CA file '%s' (not PEM certificates?)", ca_file);
			rbp_http_client_free(c);
			return RBP_ETLS;
		}
	}
#else
	(void)ca_file;
#endif
	*out = c;
	return RBP_OK;
}

void rbp_http_client_free(struct rbp_http_client *c)
{
	if (!c)
		return;
	conn_close(&c->conn);
	free(c->conn.buf);
	if (c->headers) {   /* credentials: wiped */
		volatile char *p = c->headers;
		while (*p)
			*p++ = 0;
		free(c->headers);
	}
#ifdef RBP_TLS
	SSL_CTX_free(c->ctx);
#endif
	free(c);
}

unsigned long rbp_http_client_connections(const struct rbp_http_client *c)
{
	return c->opened;
}

static int host_header(const struct rbp_url *u, char *buf, size_t cap)
{
	int v6 = strchr(u->host, ':') != NULL;
	int dflt = !strcmp(u->port, u->tls ? "443" : "80");
	int n = snprintf(buf, cap, "%s%s%s%s%s", v6 ? "[" : "", u->host, v6 ? "]" : "",
			 dflt ? "" : ":", dflt ? "" : u->port);
	return n < 0 || (size_t)n >= cap ? RBP_EURL : RBP_OK;
}

/* A kept connection the server has closed (or sent something unasked on) is no use. */
static int still_open(struct conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	return c->fd >= 0 && poll(&p, 1, 0) == 0;
}

static int open_conn(struct rbp_http_client *hc, long long deadline, enum rbp_tls_fail *fail,
		     char *why, size_t cap)
{
	int err;

	conn_close(&hc->conn);
	if ((err = connect_to(&hc->url, deadline, &hc->conn.fd, why, cap)))
		return err;
	hc->opened++;
#ifdef RBP_TLS
	if (hc->url.tls && (err = tls_start(hc, deadline, fail, why, cap))) {
		conn_close(&hc->conn);
		return err;
	}
#endif
	return RBP_OK;
}

/* Skip (or keep, into *keep) n body bytes. */
static int body_bytes(struct conn *c, uint64_t n, size_t limit, long long deadline, char **keep,
		      size_t *klen)
{
	while (n) {
		if (c->off == c->n) {
			long r = conn_fill(c, HEAD_MAX, deadline);
			if (r <= 0)
				return r ? (int)r : RBP_EHTTP;
		}
		size_t take = c->n - c->off < n ? c->n - c->off : (size_t)n;
		if (keep) {
			if (*klen + take > limit)
				return RBP_EHTTP;
			char *nb = realloc(*keep, *klen + take + 1);
			if (!nb)
				return RBP_ENOMEM;
			*keep = nb;
			memcpy(nb + *klen, c->buf + c->off, take);
			*klen += take;
			nb[*klen] = 0;
		}
		c->off += take;
		n -= take;
	}
	return RBP_OK;
}

/* A line of a chunked body (without its end) into line. */
static int body_line(struct conn *c, char *line, size_t cap, long long deadline)
{
	for (;;) {
		char *nl = memchr(c->buf + c->off, '\n', c->n - c->off);
		if (nl) {
			size_t l = (size_t)(nl - (c->buf + c->off));
			if (l && nl[-1] == '\r')
				l--;
			snprintf(line, cap, "%.*s", (int)(l < cap ? l : cap - 1), c->buf + c->off);
			c->off = (size_t)(nl - c->buf) + 1;
			return RBP_OK;
		}
		if (c->n - c->off > 1024)
			return RBP_EHTTP;
		long r = conn_fill(c, HEAD_MAX, deadline);
		if (r <= 0)
			return r ? (int)r : RBP_EHTTP;
	}
}

/*
 * Send head + body on the kept connection (a new one when needed) and read
 * the response: status, body (kept into *keep when keep), whether the
 * connection stays usable.
 */
static int exchange(struct rbp_http_client *hc, const char *head, const void *body, size_t len,
		    int timeout_ms, int *status, char **keep, size_t *klen, size_t limit,
		    enum rbp_tls_fail *fail, char *why, size_t cap)
{
	long long deadline = mono_ms() + timeout_ms;
	struct conn *c = &hc->conn;
	char reason[64], val[64];
	int err, v10 = 0, reused;
	size_t he;

	if (c->fd >= 0 && !still_open(c))
		conn_close(c);
	reused = c->fd >= 0;
retry:
	if (c->fd < 0 && (err = open_conn(hc, deadline, fail, why, cap)))
		return err;
	c->off = c->n = 0;
	if ((err = conn_send(c, head, strlen(head), deadline)) ||
	    (len && (err = conn_send(c, body, len, deadline)))) {
		conn_close(c);
		if (reused && err != RBP_ETIMEOUT) {   /* the server closed it meanwhile */
			reused = 0;
			goto retry;
		}
		say(why, cap, "%s", err == RBP_ETIMEOUT ? "timed out sending" : "connection reset");
		return err;
	}
	/* the head: up to the blank line */
	while (!(he = head_end(c->buf + c->off, c->n - c->off))) {
		long r = c->n - c->off >= HEAD_MAX ? RBP_EHTTP : conn_fill(c, HEAD_MAX, deadline);
		if (r > 0)
			continue;
		int got = c->n > 0;
		conn_close(c);
		if (!got && reused && r != RBP_ETIMEOUT) {   /* closed by the server while idle */
			reused = 0;
			goto retry;
		}
		say(why, cap, "%s", r == RBP_ETIMEOUT ? "timed out waiting for the answer" :
		    r == RBP_EHTTP ? "not an HTTP response" : got ? "answer cut short" : "connection reset");
		return r ? (int)r : RBP_EHTTP;
	}
	char *h = c->buf + c->off;
	char saved = h[he - 1];
	h[he - 1] = 0;
	*status = status_of(h, he, reason, sizeof(reason), &v10);
	if (*status < 0) {
		conn_close(c);
		say(why, cap, "%s", "not an HTTP response");
		return RBP_EHTTP;
	}
	int close_after = v10 || (header(h, "Connection", val, sizeof(val)) && !strcasecmp(val, "close"));
	int chunked = header(h, "Transfer-Encoding", val, sizeof(val)) && strcasestr(val, "chunked");
	int has_len = header(h, "Content-Length", val, sizeof(val));
	unsigned long long blen = has_len ? strtoull(val, NULL, 10) : 0;
	h[he - 1] = saved;
	c->off += he;
	if (why && cap && (*status < 200 || *status > 299))
		snprintf(why, cap, "HTTP %d%s%s", *status, reason[0] ? " " : "", reason);
	else if (why && cap)
		why[0] = 0;
	/* the body */
	err = RBP_OK;
	if (*status == 204 || *status == 304 || *status < 200) {
		/* none */
	} else if (chunked) {
		for (;;) {
			char line[128];
			if ((err = body_line(c, line, sizeof(line), deadline)))
				break;
			unsigned long long n = strtoull(line, NULL, 16);
			if (!n) {   /* trailers, then the blank line */
				do
					err = body_line(c, line, sizeof(line), deadline);
				while (!err && line[0]);
				break;
			}
			if ((err = body_bytes(c, n, limit, deadline, keep, klen)) ||
			    (err = body_line(c, line, sizeof(line), deadline)))
				break;
		}
	} else if (has_len) {
		if (blen > limit) {
			close_after = 1;   /* not read: the connection cannot be reused */
		} else {
			err = body_bytes(c, blen, limit, deadline, keep, klen);
		}
	} else {
		/* until the server closes */
		close_after = 1;
		for (;;) {
			if (c->off < c->n && (err = body_bytes(c, c->n - c->off, limit, deadline, keep, klen)))
				break;
			long r = conn_fill(c, HEAD_MAX, deadline);
			if (r <= 0) {
				err = r == 0 || !keep ? RBP_OK : (int)r;
				break;
			}
		}
	}
	if (err || close_after || c->off != c->n)
		conn_close(c);
	/* the status is known: a body cut short loses nothing of a POST's answer */
	return keep ? err : RBP_OK;
}

int rbp_http_client_post(struct rbp_http_client *hc, const char *target, const char *ctype,
			 const void *body, size_t len, int timeout_ms, int *status,
			 enum rbp_tls_fail *tls_fail, char *why, size_t why_cap)
{
	char host[300], *head;
	size_t hcap = strlen(hc->url.path) + strlen(target) + strlen(hc->headers) + 512;
	enum rbp_tls_fail fail = RBP_TLS_NONE;
	int err;

	*status = 0;
	if ((err = host_header(&hc->url, host, sizeof(host))))
		return err;
	if (!(head = malloc(hcap)))
		return RBP_ENOMEM;
	snprintf(head, hcap, "POST %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rbpeek/%s\r\n"
		 "Content-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
		 hc->url.path, target, host, RBP_VERSION, ctype, len, hc->headers);
	err = exchange(hc, head, body, len, timeout_ms, status, NULL, NULL, DISCARD_MAX, &fail,
		       why, why_cap);
	explicit_bzero(head, strlen(head));   /* it held the credentials */
	free(head);
	if (tls_fail)
		*tls_fail = fail;
	return err;
}

int rbp_http_post(const struct rbp_url *u, const char *target, const char *ctype,
		  const void *body, size_t len, int timeout_ms, int *status, char *why,
		  size_t why_cap)
{
	struct rbp_http_client *c;
	int err;

	if ((err = rbp_http_client_new(u, NULL, NULL, &c, why, why_cap)))
		return err;
	err = rbp_http_client_post(c, target, ctype, body, len, timeout_ms, status, NULL, why, why_cap);
	rbp_http_client_free(c);
	return err;
}

int rbp_http_get(const struct rbp_url *u, const char *target, int timeout_ms, int *status,
		 char **body, size_t *len)
{
	struct rbp_http_client *c;
	char host[300], *head;
	size_t hcap = strlen(u->path) + strlen(target) + 256;
	enum rbp_tls_fail fail;
	int err;

	*body = NULL;
	*len = 0;
	if ((err = host_header(u, host, sizeof(host))))
		return err;
	if ((err = rbp_http_client_new(u, NULL, NULL, &c, NULL, 0)))
		return err;
	if (!(head = malloc(hcap))) {
		rbp_http_client_free(c);
		return RBP_ENOMEM;
	}
	snprintf(head, hcap, "GET %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rbpeek/%s\r\n"
		 "Connection: close\r\n\r\n", u->path, target, host, RBP_VERSION);
	err = exchange(c, head, NULL, 0, timeout_ms, status, body, len, GET_MAX, &fail, NULL, 0);
	free(head);
	rbp_http_client_free(c);
	if (!err && !*body && !(*body = calloc(1, 1)))
		err = RBP_ENOMEM;
	if (err) {
		free(*body);
		*body = NULL;
		*len = 0;
	}
	return err;
}

/* ---- the server ---------------------------------------------------------------- */

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
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 64)) {
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

/* Answer the request whose head is req (NUL-ended) on fd, by deadline. */
static int answer(int fd, const char *req, long long deadline, rbp_http_handler handler, void *ctx)
{
	char method[16], path[1024], head[256], *body = NULL;
	const char *ctype = "text/plain; charset=utf-8";
	size_t len = 0;
	int status, err;

	if (sscanf(req, "%15s %1023s HTTP/1.", method, path) != 2)
		return RBP_EHTTP;
	status = handler(ctx, method, path, &body, &len, &ctype);
	snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n", status, status == 200 ? "OK" : status == 404 ?
		 "Not Found" : status == 405 ? "Method Not Allowed" : "Error", ctype, len);
	err = send_all(fd, head, strlen(head), deadline);
	if (!err && len)
		err = send_all(fd, body, len, deadline);
	free(body);
	return err;
}

int rbp_http_serve_one(int lfd, int wait_ms, int timeout_ms, rbp_http_handler handler, void *ctx)
{
	struct conn c = { .fd = -1 };
	long long deadline;
	int fd, err;

	if (wait_fd(lfd, POLLIN, mono_ms() + wait_ms) != 1)
		return RBP_OK;
	if ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		return RBP_OK;
	c.fd = fd;
	deadline = mono_ms() + timeout_ms;
	for (;;) {
		if (head_end(c.buf, c.n)) {
			c.buf[c.n] = 0;
			err = answer(fd, c.buf, deadline, handler, ctx);
			break;
		}
		long r = conn_fill(&c, HEAD_MAX, deadline);
		if (r <= 0) {
			err = r ? (int)r : RBP_EHTTP;
			break;
		}
	}
	conn_close(&c);
	free(c.buf);
	return err;
}

#define SERVER_CONNS 32

struct sconn {
	int fd;                /* -1 free */
	long long deadline;
	size_t n;
	char req[HEAD_MAX + 1];
};

struct rbp_http_server {
	int lfd, timeout_ms;
	rbp_http_handler handler;
	void *ctx;
	struct sconn c[SERVER_CONNS];
};

int rbp_http_server_new(int fd, int timeout_ms, rbp_http_handler handler, void *ctx,
			struct rbp_http_server **out)
{
	struct rbp_http_server *s = calloc(1, sizeof(*s));

	if (!s)
		return RBP_ENOMEM;
	s->lfd = fd;
	s->timeout_ms = timeout_ms;
	s->handler = handler;
	s->ctx = ctx;
	for (int i = 0; i < SERVER_CONNS; i++)
		s->c[i].fd = -1;
	*out = s;
	return RBP_OK;
}

static void sconn_close(struct sconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->n = 0;
}

void rbp_http_server_step(struct rbp_http_server *s, int wait_ms)
{
	struct pollfd p[SERVER_CONNS + 1];
	int map[SERVER_CONNS + 1], np = 0;
	long long now = mono_ms(), until = now + wait_ms;

	p[np] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
	map[np++] = -1;
	for (int i = 0; i < SERVER_CONNS; i++) {
		if (s->c[i].fd < 0)
			continue;
		if (s->c[i].deadline <= now) {   /* too slow or idle: closed */
			sconn_close(&s->c[i]);
			continue;
		}
		if (s->c[i].deadline < until)
			until = s->c[i].deadline;
		p[np] = (struct pollfd){ .fd = s->c[i].fd, .events = POLLIN };
		map[np++] = i;
	}
	int r = poll(p, (nfds_t)np, until > now ? (int)(until - now) : 0);
	if (r <= 0)
		return;
	for (int k = 1; k < np; k++) {
		struct sconn *c = &s->c[map[k]];
		if (!p[k].revents)
			continue;
		ssize_t got = recv(c->fd, c->req + c->n, HEAD_MAX - c->n, 0);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0) {
			sconn_close(c);
			continue;
		}
		c->n += (size_t)got;
		if (head_end(c->req, c->n)) {
			c->req[c->n] = 0;
			/* a small answer: the socket's buffer takes it at once */
			answer(c->fd, c->req, mono_ms() + 1000, s->handler, s->ctx);
			sconn_close(c);
		} else if (c->n == HEAD_MAX) {
			sconn_close(c);
		}
	}
	if (p[0].revents) {
		for (;;) {
			int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;
			if (fd < 0)
				break;
			for (int i = 0; i < SERVER_CONNS && slot < 0; i++)
				if (s->c[i].fd < 0)
					slot = i;
			if (slot < 0) {   /* all taken: the oldest makes room */
				slot = 0;
				for (int i = 1; i < SERVER_CONNS; i++)
					if (s->c[i].deadline < s->c[slot].deadline)
						slot = i;
				sconn_close(&s->c[slot]);
			}
			s->c[slot].fd = fd;
			s->c[slot].n = 0;
			s->c[slot].deadline = mono_ms() + s->timeout_ms;
		}
	}
}

void rbp_http_server_free(struct rbp_http_server *s)
{
	if (!s)
		return;
	for (int i = 0; i < SERVER_CONNS; i++)
		sconn_close(&s->c[i]);
	free(s);
}
