/*
 * safeout.h - creating an output file where another user may be waiting
 * with a symlink: the two steps every writer of rbpeek takes (the CLI's
 * outputs, src/cli/write.c, and the tracer's RbPeek::Trace.save,
 * ext/rbpeek/trace_save.c), kept in one place.
 *
 * A new file is a temporary beside the destination, created
 * O_CREAT|O_EXCL|O_NOFOLLOW with a random name (a planted name or symlink
 * is never opened) and then renamed over the destination, which replaces
 * the directory entry itself, never what a symlink there points to.  An
 * existing destination that is not a regular file (a device, a FIFO,
 * /dev/stdout) is written in place, opened without O_CREAT or O_TRUNC, and
 * through a symlink only when the symlink is the caller's or root's (what
 * the kernel's protected_symlinks demands in sticky directories).
 *
 * Nothing here prints; errors are errno values.
 */
#ifndef RBP_UTIL_SAFEOUT_H
#define RBP_UTIL_SAFEOUT_H

#include <stddef.h>

/*
 * Open an existing non-regular file for writing in place.  The fd, or -1
 * with errno set: ELOOP for a symlink of another user's, EEXIST when it
 * turned out to be (or became) a regular file.
 */
int rbp_open_in_place(const char *path);

/*
 * A new temporary file beside path, "path.tmpXXXXXX" (or
 * "DIR/.rbpeek.tmpXXXXXX" when the name leaves no room for the suffix),
 * mode 0666 less the process's umask.  The fd, with its name in tmp
 * (n bytes); or -1 with errno set and nothing left behind.
 */
int rbp_create_temp(const char *path, char *tmp, size_t n);

#endif
