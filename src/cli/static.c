/*
 * static.c - what the fully static binary (make static) puts in place of
 * the glibc functions that cannot work in a static executable.
 *
 * Built only into the static binary, which is linked with
 * -Wl,--wrap=dlopen -Wl,--wrap=initgroups -Wl,--wrap=getpwuid: every call
 * to dlopen(), initgroups() and getpwuid() then lands here, glibc's own versions are never linked,
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
 */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

void *__wrap_dlopen(const char *file, int mode);
int __wrap_initgroups(const char *user, gid_t gid);
struct passwd *__wrap_getpwuid(uid_t uid);

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
