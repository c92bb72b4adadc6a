/*
 * procfs.h - what /proc tells of a live process: its threads and their
 * states, a live thread to read it through, and the process tree (for
 * --subprocesses and naming processes).  Each call reads one small file or
 * one directory; nothing is cached.  Below the target (target.h), its
 * mappings (maps.h) and the live reader: all three read through it.
 */
#ifndef RBP_PROC_PROCFS_H
#define RBP_PROC_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/types.h>

/* Thread ids of a live process (/proc/PID/task), sorted ascending. */
int rbp_task_list(pid_t pid, pid_t **tids, size_t *n);
/*
 * The same from a /proc/PID/task kept open (read again from its start),
 * into *tids, grown as needed (capacity *cap) and reused between calls.
 */
int rbp_task_collect(DIR *d, pid_t **tids, size_t *n, size_t *cap);

struct rbp_task_info {
	char state;     /* /proc/PID/task/TID/stat field 3: R S D T t Z X I */
	char comm[17];  /* /proc/PID/task/TID/comm without the newline */
};
int rbp_task_info(pid_t pid, pid_t tid, struct rbp_task_info *out);
/*
 * A thread of the process that has not exited, through which its memory,
 * mappings and root are read: pid itself, unless its main thread (the
 * thread-group leader) has exited while other threads run on -- a zombie
 * leader has no memory, maps or root of its own to show, and a
 * process_vm_readv() naming it fails.  0 when no thread is left.
 */
pid_t rbp_live_task(pid_t pid);

/*
 * The process tree as /proc shows it, for following a process's children
 * (--subprocesses) and naming processes.  Each call reads one small file
 * or one directory; nothing is cached.
 */
/* Every process (thread-group leader) in /proc, sorted; *pids malloc'd.  RBP_ENOMEM / RBP_EIO. */
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
/* errno of a failed /proc access as an RBP code (RBP_ENOPROC, RBP_EPERM, ...). */
int rbp_proc_errno(int e);

#endif
