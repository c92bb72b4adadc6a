/*
 * http.h - just enough HTTP/1.1 for the agent: a client that POSTs
 * profiles to one server over a connection it keeps alive, over TLS for
 * https (OpenSSL), a client GET (rbpeek agent --status), and a small
 * server that answers many connections at once (the metrics endpoint).
 *
 * TLS: OpenSSL (the system's in the distro build, so security updates come
 * with apt; its static libraries in `make static`).  The server's
 * certificate is verified against the system's store (OpenSSL's default
 * paths: /etc/ssl/certs) and a CA file the caller adds, its name (or IP
 * address) is checked, TLS 1.2 is the least version, and an https URL is
 * never sent in plain HTTP.  A failed handshake says which of unknown CA,
 * name mismatch, expired certificate or handshake it was (rbp_tls_fail).
 * TLS=0 builds (no libssl) refuse https URLs with RBP_ENOTLS.
 *
 * Every call is bounded in time: connect, handshake, send and receive each
 * wait at most timeout_ms (poll on a non-blocking socket, one deadline per
 * call), so a slow or silent peer costs the caller that much and no more.
 * Names are resolved with getaddrinfo(), which may itself take the
 * resolver's own time.  Nothing here prints; errors are RBP_EURL,
 * RBP_ENET, RBP_ETIMEOUT, RBP_EHTTP, RBP_ETLS, RBP_ENOTLS, RBP_ENOMEM.
 * Text that comes from the peer (a reason phrase) reaches `why` with its
 * control and non-ASCII bytes replaced by '?': it goes to logs and
 * terminals.
 */
#ifndef RBP_UTIL_HTTP_H
#define RBP_UTIL_HTTP_H

#include <stddef.h>

struct rbp_url {
	int tls;           /* https:// */
	char host[256];    /* a name, an IPv4 address or an IPv6 one (no brackets) */
	char port[8];      /* "80" (http) or "443" (https) when not given */
	char path[1024];   /* "" or "/prefix" without a trailing '/' */
	char user[128];    /* from USER[:PASSWORD]@ before the host, "" none */
	char password[256];
};

/*
 * Parse "http[s]://[USER[:PASSWORD]@]HOST[:PORT][/PATH]" (also
 * "[v6addr]:port"; USER and PASSWORD percent-decoded).  RBP_EURL for
 * anything else.
 */
int rbp_url_parse(const char *s, struct rbp_url *u);
/* The URL s with its password (if any) replaced by "***", into buf, for messages. */
void rbp_url_redact(const char *s, char *buf, size_t cap);

/* What a failed TLS handshake was (the metrics' reasons). */
enum rbp_tls_fail {
	RBP_TLS_NONE = 0,
	RBP_TLS_UNKNOWN_CA,   /* signed by an authority not trusted */
	RBP_TLS_NAME,         /* the certificate is not for this host name / address */
	RBP_TLS_EXPIRED,      /* expired, or not valid yet */
	RBP_TLS_HANDSHAKE,    /* anything else (protocol version, not TLS at all, ...) */
	RBP_TLS_NFAIL
};
/* "unknown_ca", "name_mismatch", "expired", "handshake" (metric label values). */
const char *rbp_tls_fail_name(enum rbp_tls_fail f);

/* A client of one server: its TLS setup, and one connection kept alive. */
struct rbp_http_client;

/*
 * A client for URL u.  ca_file (NULL: none) adds a CA to the system's
 * store; headers (NULL: none) are extra "Name: value\r\n" lines sent with
 * every request (credentials: copied, wiped when freed).  RBP_ETLS with a
 * reason in why when the CA file cannot be loaded, RBP_ENOTLS for https
 * without TLS support.
 */
int rbp_http_client_new(const struct rbp_url *u, const char *ca_file, const char *headers,
			struct rbp_http_client **out, char *why, size_t why_cap);
void rbp_http_client_free(struct rbp_http_client *c);   /* NULL-safe */
/*
 * POST body (len bytes, content type ctype) to the URL's path followed by
 * target (which starts with '/', query included), on the kept connection
 * (a new one when there is none, or the server closed it).  *status gets
 * the response's status code; its body is read and dropped.  why (may be
 * NULL) gets a few words on a failure or on a status other than 2xx
 * ("connection refused", "HTTP 500 Internal Server Error", "TLS: unknown
 * CA ...").  *tls_fail (may be NULL) says what a TLS failure was.
 */
int rbp_http_client_post(struct rbp_http_client *c, const char *target, const char *ctype,
			 const void *body, size_t len, int timeout_ms, int *status,
			 enum rbp_tls_fail *tls_fail, char *why, size_t why_cap);
/* Connections opened so far (1 while one is kept alive across requests). */
unsigned long rbp_http_client_connections(const struct rbp_http_client *c);

/* One POST on a client of its own (no CA file, no headers). */
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
 * handler(ctx, method, path, &body, &len, &ctype) returns a status code
 * and a malloc'd body (freed by the caller).
 */
typedef int (*rbp_http_handler)(void *ctx, const char *method, const char *path, char **body,
				size_t *len, const char **ctype);
/*
 * Answer the request waiting on the listening socket fd, if any within
 * wait_ms: reads the request head (at most timeout_ms), answers, closes
 * the connection.  Returns RBP_OK (also when nothing came), or an error of
 * that one connection (the listener stays usable).  One at a time: a
 * server that must not be held up by an idle client uses rbp_http_server.
 */
int rbp_http_serve_one(int fd, int wait_ms, int timeout_ms, rbp_http_handler handler, void *ctx);

/*
 * A server on the listening socket fd that holds up to 32 connections at
 * once, each given at most timeout_ms to send its request head: an idle
 * or slow client delays nobody else (when all 32 are taken, the oldest is
 * closed for a new one).  rbp_http_server_step waits at most wait_ms for
 * something to do and does it (accepts, reads, answers, closes expired
 * connections).  fd stays the caller's.
 */
struct rbp_http_server;
int rbp_http_server_new(int fd, int timeout_ms, rbp_http_handler handler, void *ctx,
			struct rbp_http_server **out);
void rbp_http_server_step(struct rbp_http_server *s, int wait_ms);
void rbp_http_server_free(struct rbp_http_server *s);   /* NULL-safe; closes its connections */

/* Percent-encode s for a URL's query (RFC 3986 unreserved kept) into buf; 0, or -1 if cut short. */
int rbp_url_encode(const char *s, char *buf, size_t cap);

#endif
