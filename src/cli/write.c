/*
 * write.c - writing output files safely: temporary file, then rename.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
