/*
 * invoker.h - the user behind sudo, and acting with that user's rights.
 *
 * rbpeek needs root (or CAP_SYS_PTRACE) to read another user's process,
 * and users get it with sudo, often through a sudoers rule that allows
 * rbpeek and nothing else.  Such a rule must not become a way to write,
 * replace or take over files the user could not touch, nor to run
 * programs as root.  So, when rbpeek runs as root under sudo (SUDO_UID set
 * and not 0), everything it does to the file system on the user's behalf
 * (checking and creating output files, the raw-profile cache) is done by a
 * forked child that has become the invoking user, with that user's groups,
 * and a program it starts (`-- COMMAND`) runs as that user.  Files are
 * never chowned: they belong to the user because the user created them.
 */
#ifndef RBP_CLI_INVOKER_H
#define RBP_CLI_INVOKER_H

#include <sys/types.h>

struct cli_invoker {
	uid_t uid;          /* SUDO_UID */
	gid_t gid;          /* SUDO_GID */
	const char *user;   /* SUDO_USER, or NULL */
};

/* 1 and *inv filled when running as root under sudo for another user; else 0. */
int cli_invoker(struct cli_invoker *inv);
/*
 * In a process about to act for the user: take inv's groups (initgroups
 * when the user name is known, else the primary group alone), gid and uid,
 * for good, and set HOME, USER and LOGNAME to the user's (from the password
 * database; HOME under sudo is often root's).  keep_caps keeps the
 * permitted capabilities across the change (PR_SET_KEEPCAPS).  Returns 0,
 * or -1 with errno set.
 */
int cli_become_invoker(const struct cli_invoker *inv, int keep_caps);
/*
 * Run fn(arg) with the invoker's rights: in a forked child that became
 * the invoker (its stdio flushed before it exits) when under sudo, else
 * directly.  fn returns an exit code (0-255) or, as a negative number,
 * -errno; the same comes back to the caller.  A child that could not
 * become the user, or died, gives EXIT_INTERNAL with the reason printed.
 */
int cli_as_invoker(int (*fn)(void *arg), void *arg);
/*
 * For commands that need no privilege at all (report -i FILE, and anything
 * that reads a core file): under sudo, become the invoking user for good,
 * every capability gone, before any input is opened, so a root-only file
 * can be read through sudo rbpeek no more than through rbpeek.  0, or
 * EXIT_INTERNAL with the reason printed.
 */
int cli_drop_to_invoker(const char *cmd);
/*
 * `record --no-drop-root -- PROGRAM` (and trace's) under sudo: refused,
 * with the reason and what to do instead printed, as EXIT_USAGE.  A
 * sudoers rule that allows only rbpeek must not give a root shell, and
 * rbpeek cannot tell such a rule from one that allows everything.  0 when
 * not under sudo (a root shell), where the option is allowed.
 */
int cli_check_no_drop_root(const char *cmd, const char *program);

#endif
