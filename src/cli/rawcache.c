/*
 * rawcache.c - keep the cache of raw files ($XDG_CACHE_HOME/rbpeek)
 * bounded: after each recording, the newest CLI_RAW_KEEP files and at most
 * CLI_RAW_KEEP_BYTES are kept, and older ones removed, oldest first.
 *
 * Only files rbpeek wrote there are candidates: regular files (not
 * symlinks) named rbpeek-PID-YYYYmmdd-HHMMSS[-N].raw.gz whose content
 * starts with the raw format's magic, owned by the user the file would be
 * given to.  Anything else in the directory is left alone.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/cli.h"

struct cached {
	char name[256];
	struct timespec mtime;
	off_t size;
};

/* "rbpeek-" digits "-" 8 digits "-" 6 digits ["-" digits] ".raw.gz" */
static int our_name(const char *s)
{
	const char *p = s;
	size_t n;

	if (strncmp(p, "rbpeek-", 7))
		return 0;
	p += 7;
	if (!(n = strspn(p, "0123456789")) || p[n] != '-')
		return 0;
	p += n + 1;
	if (strspn(p, "0123456789") != 8 || p[8] != '-')
		return 0;
	p += 9;
	if (strspn(p, "0123456789") != 6)
		return 0;
	p += 6;
	if (*p == '-') {
		if (!(n = strspn(p + 1, "0123456789")))
			return 0;
		p += n + 1;
	}
	return !strcmp(p, ".raw.gz");
}

/* Whether the file at dirfd/name is a raw profile (gzip holding the magic). */
static int our_content(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char magic[9];
	gzFile gz;

	if (fd < 0)
		return 0;
	if (!(gz = gzdopen(fd, "rb"))) {
		close(fd);
		return 0;
	}
	int ok = gzread(gz, magic, sizeof(magic)) == (int)sizeof(magic) &&
		 !memcmp(magic, "RBPEEKRAW", sizeof(magic));
	gzclose(gz);
	return ok;
}

static int newest_first(const void *a, const void *b)
{
	const struct cached *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
	return strcmp(y->name, x->name);
}

int cli_raw_cache_trim(const char *dir, size_t keep, unsigned long long keep_bytes)
{
	const char *sudo_uid = getenv("SUDO_UID");
	uid_t owner = geteuid() == 0 && sudo_uid ? (uid_t)atol(sudo_uid) : geteuid();
	struct cached *v = NULL;
	size_t n = 0, cap = 0;
	unsigned long long bytes = 0;
	int removed = 0, dirfd;
	DIR *d;
	struct dirent *e;

	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 0;
	if (!(d = fdopendir(dirfd))) {
		close(dirfd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!our_name(e->d_name) || strlen(e->d_name) >= sizeof(v->name) ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
		    st.st_uid != owner)
			continue;
		if (n == cap) {
			struct cached *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
		v[n].mtime = st.st_mtim;
		v[n].size = st.st_size;
		n++;
	}
	qsort(v, n, sizeof(*v), newest_first);
	for (size_t i = 0; i < n; i++) {
		bytes += (unsigned long long)v[i].size;
		/* the newest one (just written) always stays */
		if (i == 0 || (i < keep && bytes <= keep_bytes))
			continue;
		if (our_content(dirfd, v[i].name) && !unlinkat(dirfd, v[i].name, 0))
			removed++;
	}
	free(v);
	closedir(d);
	return removed;
}
