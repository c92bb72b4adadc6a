/*
 * procs.h - the process tree as /proc shows it: which processes exist,
 * their parents, command lines and executables.  For following a process's
 * children (--subprocesses) and for naming processes.
 */
#ifndef RBP_PROC_PROCS_H
#define RBP_PROC_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every process (thread-group leader) in /proc, unsorted; *pids malloc'd.  RBP_ENOMEM / RBP_EIO. */
int rbp_proc_list(pid_t **pids, size_t *n);

/*
 * Parent and start time (clock ticks since boot; with the PID it names a
 * process uniquely) from /proc/PID/stat.  RBP_ENOPROC when gone.
 */
int rbp_proc_parent(pid_t pid, pid_t *ppid, uint64_t *start);

/*
 * The command line with arguments joined by spaces (what `ps` shows, so a
 * title a program set, like puma's, shows too), cut to fit buf; "" when
 * unreadable.  Returns buf.
 */
char *rbp_proc_cmdline(pid_t pid, char *buf, size_t n);

/* The executable's path (readlink of /proc/PID/exe), "" when unreadable.  Returns buf. */
char *rbp_proc_exe(pid_t pid, char *buf, size_t n);

#endif
