/*
 * write.c - writing output files safely: temporary file, then rename; the
 * default output names; the raw copy of every recording.
 *
 * rbpeek often runs as root (sudo), and output paths are often in shared
 * directories (/tmp), so every step assumes the path may be hostile:
 *   - under sudo, every check and every file-system change is made by a
 *     child that has become the invoking user (cli_as_invoker): rbpeek can
 *     create or replace only what that user could, and what it creates
 *     belongs to the user without any chown;
 *   - the temporary file is created O_CREAT|O_EXCL|O_NOFOLLOW with a
 *     random name beside the destination: a symlink or file planted at
 *     any name is never opened, and rename() replaces the destination's
 *     directory entry itself, never what a symlink there points to;
 *   - an existing destination that is not a regular file (a device, a
 *     FIFO, /dev/stdout) is written in place, opened without O_CREAT; when
 *     it is reached through a symlink, that symlink must belong to us or
 *     to root, as the kernel's protected_symlinks demands in sticky
 *     directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "output/output.h"
#include "profile/profile.h"
#include "util/err.h"
#include "util/safeout.h"

/* Why a file cannot be written at path, as an errno value; 0 if it can. */
static int writable_errno(const char *path)
{
	char *copy;
	const char *slash = strrchr(path, '/');
	struct stat st;
	int e = 0;

	if (!*path)
		return ENOENT;
	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode))
			return EISDIR;
		if (!S_ISREG(st.st_mode))
			return access(path, W_OK) ? errno : 0;
	}
	if (strlen(slash ? slash + 1 : path) > NAME_MAX || strlen(path) >= PATH_MAX)
		return ENAMETOOLONG;
	if (!(copy = strdup(path)))
		return ENOMEM;
	if (access(dirname(copy), W_OK | X_OK))
		e = errno;
	free(copy);
	return e;
}

static int check_writable_fn(void *arg)
{
	return -writable_errno(arg);
}

int cli_check_writable(const char *path)
{
	int rc = cli_as_invoker(check_writable_fn, (void *)path);

	if (!rc)
		return 0;
	errno = rc < 0 ? -rc : EACCES;
	return -1;
}

/* Write to a stream we do not own (stdout, a device, a FIFO) in place. */
static int write_in_place(const struct rbp_profile *p, const struct rbp_format *f,
			  const struct rbp_output_opts *oo, FILE *out, const char *what)
{
	int err = f->write(p, oo, out);

	if (!err && fflush(out))
		err = RBP_EIO;
	if (err)
		fprintf(stderr, "rbpeek: error: writing %s output to %s: %s\n", f->name, what,
			rbp_strerror(err));
	return err ? EXIT_OUTPUT : 0;
}

struct write_job {
	const struct rbp_profile *p;
	const struct rbp_format *f;
	const struct rbp_output_opts *oo;
	const char *path;
};

static int write_file_fn(void *arg)
{
	const struct write_job *j = arg;
	char tmp[PATH_MAX + 16];
	struct stat st;
	FILE *out;
	int err, rc, fd;

	if (!strcmp(j->path, "-"))
		return write_in_place(j->p, j->f, j->oo, stdout, "stdout");
	/*
	 * A device or FIFO (/dev/null, /dev/stdout, a pipe) is written in
	 * place: renaming a temporary file over it would replace the node.
	 */
	if (!stat(j->path, &st) && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			errno = EISDIR;
		if (S_ISDIR(st.st_mode) || (fd = rbp_open_in_place(j->path)) < 0 ||
		    !(out = fdopen(fd, "wb"))) {
			fprintf(stderr, "rbpeek: error: cannot open '%s': %s\n", j->path,
				errno == ELOOP ? "it is a symlink owned by another user" : strerror(errno));
			return EXIT_OUTPUT;
		}
		rc = write_in_place(j->p, j->f, j->oo, out, j->path);
		if (fclose(out) && !rc) {
			fprintf(stderr, "rbpeek: error: writing '%s': %s\n", j->path, strerror(errno));
			rc = EXIT_OUTPUT;
		}
		return rc;
	}
	if ((fd = rbp_create_temp(j->path, tmp, sizeof(tmp))) < 0 || !(out = fdopen(fd, "wb"))) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		fprintf(stderr, "rbpeek: error: cannot create '%s': %s\n", j->path, strerror(e));
		return EXIT_OUTPUT;
	}
	err = j->f->write(j->p, j->oo, out);
	if (fclose(out) && !err)
		err = RBP_EIO;
	if (!err && rename(tmp, j->path))
		err = RBP_EIO;
	if (err) {
		int e = errno;
		unlink(tmp);
		fprintf(stderr, "rbpeek: error: writing '%s': %s%s%s\n", j->path, rbp_strerror(err),
			err == RBP_EIO ? ": " : "", err == RBP_EIO ? strerror(e) : "");
		return EXIT_OUTPUT;
	}
	return 0;
}

int cli_write_file(const struct rbp_profile *p, const struct rbp_format *f,
		   const struct rbp_output_opts *oo, const char *path)
{
	struct write_job j = { p, f, oo, path };

	return cli_as_invoker(write_file_fn, &j);
}

/* ---- output names ----------------------------------------------------- */

/*
 * "DIR/rbpeek-PID-YYYYmmdd-HHMMSS.EXT" (DIR "" for the current directory),
 * with "-2", "-3", ... before the extension when that name is taken.  The
 * name is reserved by creating it (O_EXCL), so two recordings finishing at
 * the same instant cannot pick the same one; the writer then replaces the
 * empty file.
 */
void cli_default_output(char *buf, size_t n, const char *dir, int pid, const char *ext)
{
	char stamp[32];
	time_t now = time(NULL);

	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
	snprintf(buf, n, "%s%srbpeek-%d-%s.%s", dir, *dir ? "/" : "", pid, stamp, ext);
	for (int i = 2; i < 1000; i++) {
		int fd = open(buf, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd >= 0) {
			close(fd);
			return;
		}
		if (errno != EEXIST)
			return;   /* the writer will report why it cannot create it */
		snprintf(buf, n, "%s%srbpeek-%d-%s-%d.%s", dir, *dir ? "/" : "", pid, stamp, i, ext);
	}
}

/* mkdir -p; 0 when path is a directory afterwards. */
static int make_dirs(char *path)
{
	struct stat st;

	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		mkdir(path, 0755);
		*p = '/';
	}
	mkdir(path, 0755);
	return stat(path, &st) || !S_ISDIR(st.st_mode) ? -1 : 0;
}

/* $XDG_CACHE_HOME/rbpeek or ~/.cache/rbpeek, created if needed. */
static int cache_dir(char *buf, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int len;

	if (xdg && *xdg)
		len = snprintf(buf, n, "%s/rbpeek", xdg);
	else if (home && *home)
		len = snprintf(buf, n, "%s/.cache/rbpeek", home);
	else
		len = snprintf(buf, n, "%s", "");
	if (len <= 0 || len >= (int)n || make_dirs(buf) || access(buf, W_OK | X_OK)) {
		fprintf(stderr, "rbpeek: warning: no raw profile kept: cannot use the cache directory "
			"'%s'%s\n", *buf ? buf : "(no $XDG_CACHE_HOME or $HOME)",
			*buf ? ": set XDG_CACHE_HOME to a writable directory" : "");
		return -1;
	}
	return 0;
}

char *cli_profile_title(const struct rbp_profile *p, size_t idle, int keep_idle, char *buf,
			size_t n)
{
	int len = snprintf(buf, n, "rbpeek: pid %d%s%s, %.1f s, %zu samples", (int)p->meta.pid,
			   *p->meta.cmdline ? " " : "", p->meta.cmdline,
			   (double)p->meta.duration_ns / 1e9, p->n_samples - (keep_idle ? 0 : idle));
	if (!keep_idle && idle && len > 0 && (size_t)len < n)
		snprintf(buf + len, n - (size_t)len, " (+%zu idle hidden: --idle)", idle);
	return buf;
}

struct outputs_job {
	const struct rbp_profile *p;
	const struct rbp_format *fmt;
	const char *output;   /* NULL: the default name in the current directory */
	const char *raw;      /* NULL: the cache; "": none; else --raw-file */
	unsigned hide;        /* sample flags left out of fmt's output */
	int silent;
	const char *title;
	const struct rbp_profile *diff;   /* fmt is written from this diff of p and a BASE */
};

static int write_outputs_fn(void *arg)
{
	static const struct rbp_format raw_fmt = { "raw", "raw.gz", "", rbp_write_raw };
	const struct outputs_job *j = arg;
	const struct rbp_profile *p = j->p;
	struct rbp_profile view;
	size_t hidden = 0;
	char dir[4096], raw_path[8192], outbuf[4096], alt[512];
	struct rbp_output_opts oo = { .title = j->title };

	cli_graph_opts(&oo);
	const char *output = j->output;
	unsigned hide = j->hide;
	int rc = 0, raw_kept = 0;

	if (j->raw && *j->raw) {   /* --raw-file */
		snprintf(raw_path, sizeof(raw_path), "%s", j->raw);
		raw_kept = !cli_write_file(p, &raw_fmt, &oo, raw_path);
	} else if (!j->raw && !cache_dir(dir, sizeof(dir))) {
		cli_default_output(raw_path, sizeof(raw_path), dir, (int)p->meta.pid, "raw.gz");
		if ((raw_kept = !cli_write_file(p, &raw_fmt, &oo, raw_path)))
			cli_raw_cache_trim(dir, CLI_RAW_KEEP, CLI_RAW_KEEP_BYTES);
	}
	if (raw_kept)
		fprintf(stderr, "rbpeek: raw profile: %s (convert with 'rbpeek report -i')\n", raw_path);
	if (!output) {
		cli_default_output(outbuf, sizeof(outbuf), "", (int)p->meta.pid, j->fmt->ext);
		output = outbuf;
	}
	if (j->diff) {   /* the diff's samples were chosen when it was made */
		p = j->diff;
		oo.diff = 1;
		hide = 0;
	} else if (j->fmt->write == rbp_write_flamegraph) {   /* its idle control shows or hides them */
		size_t idle = 0;
		oo.hide_idle = (j->hide & RBP_SAMPLE_IDLE) != 0;
		hide &= ~(unsigned)RBP_SAMPLE_IDLE;
		for (size_t i = 0; i < p->n_samples; i++)
			idle += (p->sample_flags[i] & RBP_SAMPLE_IDLE) != 0;
		if (idle)   /* the title of the other view, for the control to show */
			oo.title_alt = cli_profile_title(p, idle, oo.hide_idle, alt, sizeof(alt));
	}
	if (hide && j->fmt->write != rbp_write_raw) {   /* -f raw keeps everything, as the raw copy */
		if (rbp_profile_view_without(p, (uint8_t)hide, &view, &hidden)) {
			fprintf(stderr, "rbpeek: error: out of memory\n");
			return EXIT_INTERNAL;
		}
		p = &view;
	}
	rc = cli_write_file(p, j->fmt, &oo, output);
	if (p == &view)
		rbp_profile_view_free(&view);
	if (rc) {
		/* disk full, say: nothing recorded is lost while the raw file is there */
		if (raw_kept)
			fprintf(stderr, "hint: the recording is kept: rbpeek report -i %s -f %s -o FILE\n",
				raw_path, j->fmt->name);
		return rc;
	}
	if (!j->silent || strcmp(output, "-"))
		fprintf(stderr, "rbpeek: wrote %s to %s\n", j->fmt->name, output);
	if (j->fmt->write == rbp_write_callgraph && !rbp_callgraph_renders())
		fprintf(stderr, "rbpeek: this rbpeek is built without Graphviz (as the static binary is): the "
			"call graph is DOT text; lay it out with 'dot -Tsvg %s -o graph.svg', or use "
			"the distro build\n", strcmp(output, "-") ? output : "FILE");
	return 0;
}

int cli_write_outputs(const struct rbp_profile *p, const struct rbp_format *fmt,
		      const char *output, const char *raw, unsigned hide, int silent,
		      const char *title)
{
	struct outputs_job j = { p, fmt, output, raw, hide, silent, title, NULL };

	return cli_as_invoker(write_outputs_fn, &j);
}

int cli_write_outputs_diff(const struct rbp_profile *p, const struct rbp_profile *diff,
			   const struct rbp_format *fmt, const char *output, const char *raw,
			   int silent, const char *title)
{
	struct outputs_job j = { p, fmt, output, raw, 0, silent, title, diff };

	return cli_as_invoker(write_outputs_fn, &j);
}
