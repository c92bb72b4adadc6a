/*
 * maps.c - parse /proc/PID/maps.
 *
 * A line is "start-end perms offset dev inode [path]"; the path is the rest
 * of the line after the inode and the padding, and may contain spaces.  The
 * kernel appends " (deleted)" to files unlinked since they were mapped: it
 * is stripped from the path and reported in the `deleted` field.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/maps.h"
#include "proc/procfs.h"
#include "util/vec.h"
#include "util/err.h"

#define DELETED_SUFFIX " (deleted)"

/* Parse a hex number at *p, advancing *p; -1 when there are no digits. */
static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	while (s < end) {
		int c = (unsigned char)*s, d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
		if (v >> 60)
			return -1;  /* overflow */
		v = v * 16 + (uint64_t)d;
		s++;
	}
	if (s == *p)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

/* Skip one field (non-blank run) and the blanks after it. */
static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* Set m->path (owned) from [p, end); NULL when empty. */
static int set_path(struct rbp_mapping *m, const char *p, const char *end)
{
	size_t n = (size_t)(end - p), sl = strlen(DELETED_SUFFIX);

	if (n == 0)
		return RBP_OK;
	if (n > sl && !memcmp(end - sl, DELETED_SUFFIX, sl)) {
		m->deleted = 1;
		n -= sl;
	}
	m->path = strndup(p, n);
	return m->path ? RBP_OK : RBP_ENOMEM;
}

/* Parse one line [p, end) into *m; the path is allocated. */
static int parse_line(const char *p, const char *end, struct rbp_mapping *m)
{
	memset(m, 0, sizeof(*m));
	if (parse_hex(&p, end, &m->start) || p >= end || *p++ != '-' ||
	    parse_hex(&p, end, &m->end) || m->end < m->start ||
	    end - p < 6 || *p++ != ' ')
		return RBP_EINVAL;
	m->prot = (p[0] == 'r' ? RBP_PROT_R : 0) |
		  (p[1] == 'w' ? RBP_PROT_W : 0) |
		  (p[2] == 'x' ? RBP_PROT_X : 0);
	p = skip_field(p, end);
	if (parse_hex(&p, end, &m->offset))
		return RBP_EINVAL;
	while (p < end && *p == ' ')
		p++;
	p = skip_field(p, end);  /* dev */
	p = skip_field(p, end);  /* inode */
	return set_path(m, p, end);
}

static int cmp_start(const void *a, const void *b)
{
	const struct rbp_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Append *m to out, growing by doubling; takes m->path on success. */
static int push(struct rbp_maps *out, size_t *cap, const struct rbp_mapping *m)
{
	if (rbp_grow(&out->v, cap, out->n + 1, sizeof(*out->v)))
		return RBP_ENOMEM;
	out->v[out->n++] = *m;
	return RBP_OK;
}

/* Parse maps text; on success *out is owned by the caller. */
int rbp_maps_parse(const char *text, size_t len, struct rbp_maps *out)
{
	const char *p = text, *end = text + len;
	size_t cap = 0;

	out->v = NULL;
	out->n = 0;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct rbp_mapping m;
		int err;

		if (!eol)
			eol = end;
		if (eol > p) {
			err = parse_line(p, eol, &m);
			if (!err && (err = push(out, &cap, &m)))
				free(m.path);
			if (err) {
				rbp_maps_free(out);
				return err;
			}
		}
		p = eol + 1;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), cmp_start);
	return RBP_OK;
}

/* Read a whole /proc file into a malloc'ed buffer (*buf owned by caller). */
static int slurp(int fd, char **buf, size_t *len)
{
	size_t cap = 16384, n = 0;
	char *b = malloc(cap);

	if (!b)
		return RBP_ENOMEM;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb = realloc(b, cap * 2);

			if (!nb)
				goto nomem;
			b = nb;
			cap *= 2;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			free(b);
			return e == EACCES || e == EPERM ? RBP_EPERM :
			       e == ESRCH ? RBP_ENOPROC : RBP_EIO;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*buf = b;
	*len = n;
	return RBP_OK;
nomem:
	free(b);
	return RBP_ENOMEM;
}

/* Read /proc/PID/maps; *out owned by the caller. */
int rbp_maps_read_pid(pid_t pid, struct rbp_maps *out)
{
	char path[64], *text;
	size_t len;
	int fd, err;

	out->v = NULL;
	out->n = 0;
	/* a zombie main thread shows no maps: read a live thread's (rbp_live_task) */
	pid_t live = rbp_live_task(pid);
	if (live && live != pid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/maps", (int)pid, (int)live);
	else
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? RBP_EPERM :
		       errno == ENOENT || errno == ESRCH ? RBP_ENOPROC : RBP_EIO;
	err = slurp(fd, &text, &len);
	close(fd);
	if (err)
		return err;
	err = rbp_maps_parse(text, len, out);
	free(text);
	return err;
}

/* Binary search; mappings do not overlap. */
const struct rbp_mapping *rbp_maps_find(const struct rbp_maps *m,
					uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rbp_mapping *x = &m->v[mid];

		if (addr < x->start)
			hi = mid;
		else if (addr >= x->end)
			lo = mid + 1;
		else
			return x;
	}
	return NULL;
}

void rbp_maps_free(struct rbp_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}
