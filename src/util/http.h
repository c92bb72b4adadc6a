/*
 * http.h - just enough HTTP/1.1 for the agent: a client that POSTs one
 * body and reads the status (pushing profiles to Pyroscope), a client GET
 * (rbpeek agent --status), and a listener that answers one request at a
 * time (the agent's metrics endpoint).
 *
 * Plain HTTP over a TCP socket, one request per connection
 * ("Connection: close"): the agent sends a few requests a minute, so
 * keep-alive buys nothing and a fresh connection needs no state to
 * recover after a failure.  https is not supported: send through a local
 * relay (a reverse proxy on loopback) for TLS.
 *
 * Every call is bounded in time: connect, send and receive each wait at
 * most timeout_ms (poll on a non-blocking socket), so a slow or silent
 * peer costs the caller that much and no more.  Names are resolved with
 * getaddrinfo(), which may itself take the resolver's own time: use an IP
 * address or a name in /etc/hosts where that matters.  Nothing here
 * prints; errors are RBP_EURL, RBP_ENET, RBP_ETIMEOUT, RBP_EHTTP, RBP_ENOMEM.
 */
#ifndef RBP_UTIL_HTTP_H
#define RBP_UTIL_HTTP_H

#include <stddef.h>

struct rbp_url {
	char host[256];    /* a name, an IPv4 address or an IPv6 one (no brackets) */
	char port[8];      /* "80" when not given */
	char path[1024];   /* "" or "/prefix" without a trailing '/' */
};

/*
 * Parse "http://HOST[:PORT][/PATH]" (also "[v6addr]:port").  RBP_EURL
 * for anything else, https:// included.
 */
int rbp_url_parse(const char *s, struct rbp_url *u);

/*
 * POST body (len bytes, content type ctype) to the URL's path followed by
 * target (which starts with '/', query included).  *status gets the
 * response's status code; the response body is read and discarded (at
 * most 64 KiB are read).  why (may be NULL) gets a few words on a failure
 * or on a status other than 2xx ("connection refused", "HTTP 500
 * Internal Server Error").
 */
int rbp_http_post(const struct rbp_url *u, const char *target, const char *ctype,
		  const void *body, size_t len, int timeout_ms, int *status, char *why,
		  size_t why_cap);

/* GET the URL's path + target; the body (NUL-terminated, malloc'd, at most 4 MiB) in *body. */
int rbp_http_get(const struct rbp_url *u, const char *target, int timeout_ms, int *status,
		 char **body, size_t *len);

/*
 * A listening socket on "HOST:PORT" (HOST an address; "127.0.0.1:9090",
 * "[::1]:9090"; port 0 picks one: rbp_http_port tells which).  RBP_EURL
 * for a bad address, RBP_ENET when it cannot be bound.  *fd is
 * non-blocking.
 */
int rbp_http_listen(const char *addr, int *fd);
int rbp_http_port(int fd);

/*
 * Answer the request waiting on the listening socket fd, if any within
 * wait_ms: reads the request head (at most timeout_ms), calls
 * handler(ctx, method, path, &body, &len, &ctype) which returns a status
 * code and a malloc'd body (freed here), writes the response and closes
 * the connection.  Returns RBP_OK (also when nothing came), or an error
 * of that one connection (the listener stays usable).
 */
typedef int (*rbp_http_handler)(void *ctx, const char *method, const char *path, char **body,
				size_t *len, const char **ctype);
int rbp_http_serve_one(int fd, int wait_ms, int timeout_ms, rbp_http_handler handler, void *ctx);

/* Percent-encode s for a URL's query (RFC 3986 unreserved kept) into buf; 0, or -1 if cut short. */
int rbp_url_encode(const char *s, char *buf, size_t cap);

#endif
