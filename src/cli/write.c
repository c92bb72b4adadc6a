/*
 * write.c - writing output files safely: temporary file, then rename; the
 * default output names; the raw copy of every recording.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "output/output.h"
#include "util/err.h"

void cli_chown_to_invoker(const char *path)
{
	const char *uid = getenv("SUDO_UID"), *gid = getenv("SUDO_GID");

	if (geteuid() != 0 || !uid || !gid)
		return;
	if (chown(path, (uid_t)atol(uid), (gid_t)atol(gid)))
		return;   /* best effort: the file is still there, owned by root */
}

int cli_check_writable(const char *path)
{
	char *copy = strdup(path);
	int rc;

	if (!copy)
		return -1;
	if (!access(path, F_OK))
		rc = access(path, W_OK);
	else
		rc = access(dirname(copy), W_OK | X_OK);
	free(copy);
	return rc;
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

int cli_write_file(const struct rbp_profile *p, const struct rbp_format *f,
		   const struct rbp_output_opts *oo, const char *path)
{
	char tmp[4200];
	struct stat st;
	FILE *out;
	int err, rc;

	if (!strcmp(path, "-"))
		return write_in_place(p, f, oo, stdout, "stdout");
	/*
	 * A device or FIFO (/dev/null, /dev/stdout, a pipe) is written in
	 * place: renaming a temporary file over it would replace the node.
	 */
	if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
		if (!(out = fopen(path, "wb"))) {
			fprintf(stderr, "rbpeek: error: cannot open '%s': %s\n", path, strerror(errno));
			return EXIT_OUTPUT;
		}
		rc = write_in_place(p, f, oo, out, path);
		if (fclose(out) && !rc) {
			fprintf(stderr, "rbpeek: error: writing '%s': %s\n", path, strerror(errno));
			rc = EXIT_OUTPUT;
		}
		return rc;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	if (!(out = fopen(tmp, "wb"))) {
		fprintf(stderr, "rbpeek: error: cannot create '%s': %s\n", path, strerror(errno));
		return EXIT_OUTPUT;
	}
	err = f->write(p, oo, out);
	if (fclose(out) && !err)
		err = RBP_EIO;
	if (!err && rename(tmp, path))
		err = RBP_EIO;
	if (err) {
		int e = errno;
		unlink(tmp);
		fprintf(stderr, "rbpeek: error: writing '%s': %s%s%s\n", path, rbp_strerror(err),
			err == RBP_EIO ? ": " : "", err == RBP_EIO ? strerror(e) : "");
		return EXIT_OUTPUT;
	}
	cli_chown_to_invoker(path);
	return 0;
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
		if (!mkdir(path, 0755))
			cli_chown_to_invoker(path);   /* under sudo: the user's, as a file */
		*p = '/';
	}
	if (!mkdir(path, 0755))
		cli_chown_to_invoker(path);
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

int cli_write_outputs(const struct rbp_profile *p, const struct rbp_format *fmt,
		      const char *output, const char *raw, unsigned hide, int silent,
		      const char *title)
{
	struct rbp_profile view;
	size_t hidden = 0;
	static const struct rbp_format raw_fmt = { "raw", "raw.gz", "", rbp_write_raw };
	char dir[4096], raw_path[8192];
	struct rbp_output_opts oo = { .title = title };
	int rc = 0, raw_kept = 0;

	if (raw && *raw) {   /* --raw-file */
		snprintf(raw_path, sizeof(raw_path), "%s", raw);
		raw_kept = !cli_write_file(p, &raw_fmt, &oo, raw_path);
	} else if (!raw && !cache_dir(dir, sizeof(dir))) {
		cli_default_output(raw_path, sizeof(raw_path), dir, (int)p->meta.pid, "raw.gz");
		if ((raw_kept = !cli_write_file(p, &raw_fmt, &oo, raw_path)))
			cli_raw_cache_trim(dir, CLI_RAW_KEEP, CLI_RAW_KEEP_BYTES);
	}
	if (raw_kept)
		fprintf(stderr, "rbpeek: raw profile: %s (convert with 'rbpeek report -i')\n", raw_path);
	if (hide && fmt->write != rbp_write_raw) {   /* -f raw keeps everything, as the raw copy */
		if (rbp_profile_view_without(p, (uint8_t)hide, &view, &hidden)) {
			fprintf(stderr, "rbpeek: error: out of memory\n");
			return EXIT_INTERNAL;
		}
		p = &view;
	}
	rc = cli_write_file(p, fmt, &oo, output);
	if (p == &view)
		rbp_profile_view_free(&view);
	if (rc) {
		/* disk full, say: nothing recorded is lost while the raw file is there */
		if (raw_kept)
			fprintf(stderr, "hint: the recording is kept: rbpeek report -i %s -f %s -o FILE\n",
				raw_path, fmt->name);
		return rc;
	}
	if (!silent || strcmp(output, "-"))
		fprintf(stderr, "rbpeek: wrote %s to %s\n", fmt->name, output);
	return 0;
}
