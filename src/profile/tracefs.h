/*
 * tracefs.h - a private, readable copy of the kernel's tracepoint
 * descriptions.
 *
 * The tracer's kernel streams (ext/rbpeek/ktrace.h) read each tracepoint's
 * `id` and `format` from tracefs, which only root may read.  When `sudo
 * rbpeek trace` runs the program as the invoking user, it first copies the
 * two event systems the tracer uses (raw_syscalls and sched: their id and
 * format files) into a new directory under /tmp; the tracer finds it
 * through $RBPEEK_TRACEFS.  The copy is root's and read-only to everyone
 * else (directories 0755, files 0644), made and removed through directory
 * descriptors only (O_DIRECTORY|O_NOFOLLOW on every component): the user
 * can read it and change nothing in it, and no symlink of theirs can send
 * root's writes elsewhere.  tracefs is looked for at /sys/kernel/tracing
 * and /sys/kernel/debug/tracing, and mounted at /sys/kernel/tracing when
 * neither has it (a visible side effect, as for the tracer itself).
 */
#ifndef RBP_PROFILE_TRACEFS_H
#define RBP_PROFILE_TRACEFS_H

/*
 * Make the copy (root's, readable by all); *dir (malloc'd) is its path.  RBP_OK,
 * RBP_ENOFILE (no tracefs with those events, or it cannot be read),
 * RBP_ENOMEM, or RBP_EIO (the copy could not be made; nothing is left).
 */
int rbp_tracefs_copy(char **dir);

/* rm -r of a directory rbp_tracefs_copy made; NULL-safe; frees dir. */
void rbp_tracefs_remove(char *dir);

#endif
