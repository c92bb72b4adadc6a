/*
 * target.h - one process to inspect: its memory, its mappings, the files
 * behind them, and its threads.  Either a live process (by PID) or an ELF
 * core file.  This layer knows nothing of Ruby.
 *
 * Files the target maps are opened through "/proc/PID/root/<path>" for a
 * live process, so a process in another mount namespace (a container) is
 * read with its own binaries.  For a core file the paths in its NT_FILE
 * note are opened as they are (or under opts->sysroot when given).
 *
 * Core files: PT_LOAD segments with file contents are read from the core;
 * addresses in segments the kernel or gcore did not dump (filesz == 0, e.g.
 * the read-only text and rodata of a shared library) are read from the
 * mapped file itself, at the offset the NT_FILE note gives.
 */
#ifndef RBP_PROC_TARGET_H
#define RBP_PROC_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/types.h>

#include "proc/maps.h"
#include "proc/procfs.h"
#include "proc/reader.h"

struct rbp_target {
	struct rbp_reader *mem;  /* owned */
	struct rbp_maps maps;    /* owned; file mappings at least */
	pid_t pid;               /* live PID, or the PID recorded in the core */
	int is_core;             /* 1 for a core file */
	char root[64];           /* prefix for mapped paths: "/proc/PID/root" or "" */
	char root_dir[256];      /* live: where /proc/PID/root points as we see it,
				  * "" when "/" or unknown.  A chroot'ed target's maps
				  * carry it as a prefix when we see its files from
				  * another mount namespace: rbp_target_path drops it */
	pid_t *core_tids;        /* cores: thread ids from NT_PRSTATUS, in note order */
	size_t n_core_tids;
	char core_comm[17];      /* cores: NT_PRPSINFO pr_fname */
	pid_t ns_pid;            /* the PID as the process sees itself (its PID
				  * namespace's view: 1 for a container's init); = pid
				  * outside containers and for cores */
	pid_t *ns_map;           /* pairs (our tid, its tid in its namespace), cached */
	size_t n_ns_map;
};

/* Open a live process.  RBP_ENOPROC / RBP_EPERM on failure. */
int rbp_target_open_pid(pid_t pid, struct rbp_target **out);
/* Open a core file; sysroot may be NULL.  RBP_EBADCORE if not a core. */
int rbp_target_open_core(const char *path, const char *sysroot,
			 struct rbp_target **out);
void rbp_target_close(struct rbp_target *t);

/*
 * A thread id as the target sees it (in its own PID namespace, as Ruby
 * records it) turned into ours; 0 when no task of the target has it.  The
 * identity outside containers.
 */
pid_t rbp_target_our_tid(struct rbp_target *t, pid_t ns_tid);

/*
 * Build "<root><path>" into buf (size n), path without a leading root_dir;
 * RBP_EINVAL if it does not fit.
 */
int rbp_target_path(const struct rbp_target *t, const char *path, char *buf,
		    size_t n);


/*
 * Pausing: stop every thread of a live process with PTRACE_SEIZE +
 * PTRACE_INTERRUPT and wait until each is in a ptrace-stop; threads that
 * appear meanwhile are caught too.  On any failure everything already
 * stopped is resumed before returning.  Threads are never left stopped:
 * rbp_resume() detaches every one; should rbpeek die while the target is
 * paused, the kernel detaches its tracees and they run on.
 *
 * EPERM (ptrace_scope, no CAP_SYS_PTRACE, a container without SYS_PTRACE)
 * -> RBP_EPERM; a process already traced by a debugger -> RBP_EPTRACE.
 */
struct rbp_pause;
int rbp_pause(pid_t pid, struct rbp_pause **out);
void rbp_resume(struct rbp_pause *p);  /* NULL-safe; frees p */
/*
 * The same, reusable: a pause opened once per process keeps its /proc
 * files open between holds, for a sampler's loop.  hold() fails with
 * RBP_EINVAL while already holding; close() releases first.
 */
int rbp_pause_open(pid_t pid, struct rbp_pause **out);
int rbp_pause_hold(struct rbp_pause *p);
/*
 * Hold only these threads of the process (those that are gone, or belong
 * to another process now, are skipped: rbp_pause_nthreads() tells), without
 * reading what they were doing (rbp_pause_running() says -1).
 */
int rbp_pause_hold_tids(struct rbp_pause *p, const pid_t *tids, size_t n);
void rbp_pause_release(struct rbp_pause *p);  /* NULL-safe */
/*
 * Bound a hold: when some threads have not stopped ns nanoseconds after
 * the first one did, rbp_pause_hold() lets every thread go (each that had
 * not stopped yet as soon as it stops) and returns RBP_PAUSE_OVER, with
 * nothing held.  0: no bound (the default).
 */
#define RBP_PAUSE_OVER 1
void rbp_pause_set_budget(struct rbp_pause *p, long long ns);
/* Whether rbp_pause_hold_tids() reads what each thread was doing (default 0). */
void rbp_pause_tids_state(struct rbp_pause *p, int on);
/* How long the hold in progress has kept a thread stopped, ns; 0 when none is held. */
long long rbp_pause_holding_ns(const struct rbp_pause *p);
void rbp_pause_close(struct rbp_pause *p);    /* NULL-safe */
/*
 * How long the last hold kept a thread stopped: from the first thread's
 * stop (threads stop one after another) to the release, in nanoseconds;
 * 0 for NULL or before any release.
 */
long long rbp_pause_held_ns(const struct rbp_pause *p);
/* Number of threads a pause holds stopped (0 for NULL). */
size_t rbp_pause_nthreads(const struct rbp_pause *p);
/*
 * What a held thread was doing when it stopped: 1 running (in user code, or
 * executing a system call), 0 blocked in a system call (sleeping, waiting
 * on a lock or I/O), -1 unknown (not held, or not x86-64).
 */
int rbp_pause_running(const struct rbp_pause *p, pid_t tid);

#endif
