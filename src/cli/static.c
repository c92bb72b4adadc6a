/*
 * static.c - what the fully static binary (make static) puts in place of
 * the glibc functions that cannot work in a static executable.
 *
 * Built only into the static binary, which is linked with
 * -Wl,--wrap=dlopen -Wl,--wrap=initgroups -Wl,--wrap=getpwuid
 * -Wl,--wrap=getaddrinfo -Wl,--wrap=freeaddrinfo: every call to those then
 * lands here, glibc's own versions are never linked,
 * and the link has no "requires at runtime the shared libraries from the
 * glibc version used for linking" warning (the static link treats
 * warnings as errors).
 *
 *   dlopen      libdw's debuginfod client loads libdebuginfod.so with it,
 *               to download debug info when $DEBUGINFOD_URLS is set.  A
 *               static executable cannot load a shared library safely (it
 *               has no dynamic loader of its own), so this dlopen always
 *               fails: libdw then behaves as when libdebuginfod is not
 *               installed, and --native uses local debug info only.
 *   initgroups  `record -- CMD` and `trace -- CMD` run CMD as the user who
 *               invoked sudo, with that user's groups.  glibc looks the
 *               groups up through NSS modules it would dlopen; here they
 *               are read from /etc/group alone (no LDAP or sssd groups).
 *   getpwuid    under sudo, what rbpeek does for the user runs with that
 *               user's HOME (the raw-profile cache, the program's HOME):
 *               read from /etc/passwd alone (no LDAP or sssd users: HOME
 *               then stays as sudo set it).
 *   getaddrinfo the agent's --server and --metrics: numeric addresses, and
 *               names from /etc/hosts alone (no DNS: glibc resolves through
 *               NSS modules it would dlopen); numeric ports only.
 *   gethostbyname  linked in with OpenSSL's socket BIO (BIO_gethostbyname),
 *               which rbpeek never calls (it connects the socket itself and
 *               hands OpenSSL the descriptor): always fails here.
 */
#include <ctype.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <netinet/in.h>

void *__wrap_dlopen(const char *file, int mode);
int __wrap_initgroups(const char *user, gid_t gid);
struct passwd *__wrap_getpwuid(uid_t uid);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
void __wrap_freeaddrinfo(struct addrinfo *ai);
struct hostent *__wrap_gethostbyname(const char *name);

struct hostent *__wrap_gethostbyname(const char *name)
{
	(void)name;
	h_errno = NO_RECOVERY;
	return NULL;
}

void *__wrap_dlopen(const char *file, int mode)
{
	(void)file;
	(void)mode;
	return NULL;
}

#define MAX_GROUPS 1024

/* gid plus every group of /etc/group that lists user as a member. */
int __wrap_initgroups(const char *user, gid_t gid)
{
	gid_t groups[MAX_GROUPS];
	size_t n = 0;
	struct group *g;
	FILE *f;

	groups[n++] = gid;
	if ((f = fopen("/etc/group", "re"))) {
		while (n < MAX_GROUPS && (g = fgetgrent(f))) {
			for (char **m = g->gr_mem; m && *m; m++) {
				if (strcmp(*m, user) == 0 && g->gr_gid != gid) {
					groups[n++] = g->gr_gid;
					break;
				}
			}
		}
		fclose(f);
	}
	return setgroups(n, groups);
}

/* The /etc/passwd entry of uid, or NULL (static storage, as getpwuid's). */
struct passwd *__wrap_getpwuid(uid_t uid)
{
	static struct passwd found;
	static char buf[4096];
	struct passwd *pw, *ret = NULL;
	FILE *f = fopen("/etc/passwd", "re");

	while (f && (pw = fgetpwent(f))) {
		if (pw->pw_uid != uid)
			continue;
		/* copy: fgetpwent's storage is reused by the next call */
		int n = snprintf(buf, sizeof(buf), "%s%c%s%c%s", pw->pw_name, 0, pw->pw_dir, 0,
				 pw->pw_shell ? pw->pw_shell : "");
		if (n > 0 && (size_t)n < sizeof(buf)) {
			found = *pw;
			found.pw_name = buf;
			found.pw_dir = buf + strlen(buf) + 1;
			found.pw_shell = found.pw_dir + strlen(found.pw_dir) + 1;
			found.pw_passwd = (char *)"x";
			found.pw_gecos = (char *)"";
			ret = &found;
		}
		break;
	}
	if (f)
		fclose(f);
	return ret;
}

/* One result: the addrinfo and its address in one allocation. */
static struct addrinfo *one_addr(int family, const void *addr, int port,
				 const struct addrinfo *hints)
{
	struct addrinfo *ai = calloc(1, sizeof(*ai) + sizeof(struct sockaddr_in6));
	struct sockaddr_in *in4 = (struct sockaddr_in *)(ai + 1);
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(ai + 1);

	if (!ai)
		return NULL;
	ai->ai_family = family;
	ai->ai_socktype = hints && hints->ai_socktype ? hints->ai_socktype : SOCK_STREAM;
	ai->ai_addr = (struct sockaddr *)(ai + 1);
	if (family == AF_INET) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		memcpy(&in4->sin_addr, addr, sizeof(in4->sin_addr));
		ai->ai_addrlen = sizeof(*in4);
	} else {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		memcpy(&in6->sin6_addr, addr, sizeof(in6->sin6_addr));
		ai->ai_addrlen = sizeof(*in6);
	}
	return ai;
}

/* A numeric address into *family and buf (16 bytes); 0 when it is one. */
static int numeric(const char *s, int *family, unsigned char *buf)
{
	if (inet_pton(AF_INET, s, buf) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, s, buf) == 1)
		*family = AF_INET6;
	else
		return -1;
	return 0;
}

/* The first address /etc/hosts gives name, into *family and buf. */
static int from_hosts(const char *name, int *family, unsigned char *buf)
{
	char line[1024];
	int found = -1;
	FILE *f = fopen("/etc/hosts", "re");

	while (f && found && fgets(line, sizeof(line), f)) {
		char *save, *addr = strtok_r(line, " \t\r\n", &save), *alias;
		if (!addr || *addr == '#' || numeric(addr, family, buf))
			continue;
		while (found && (alias = strtok_r(NULL, " \t\r\n", &save)) && *alias != '#')
			if (!strcasecmp(alias, name))
				found = 0;
	}
	if (f)
		fclose(f);
	return found;
}

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	unsigned char addr[16];
	int family, port;
	char *end;

	if (!node || !service)
		return EAI_NONAME;
	port = (int)strtol(service, &end, 10);
	if (*end || port < 0 || port > 65535)
		return EAI_SERVICE;
	if (numeric(node, &family, addr) &&
	    ((hints && (hints->ai_flags & AI_NUMERICHOST)) || from_hosts(node, &family, addr)))
		return EAI_NONAME;
	if (hints && hints->ai_family != AF_UNSPEC && hints->ai_family != family)
		return EAI_FAMILY;
	return (*res = one_addr(family, addr, port, hints)) ? 0 : EAI_MEMORY;
}

void __wrap_freeaddrinfo(struct addrinfo *ai)
{
	while (ai) {
		struct addrinfo *next = ai->ai_next;
		free(ai);
		ai = next;
	}
}
