/*
 * subject.h - what a command reads: a live process or a core file, its
 * Ruby VM and, with --native, its native unwinder, opened and closed as
 * one; waiting for a program just started to become Ruby; and the facts
 * about processes and their threads that commands show.
 *
 * The front end (src/cli) reaches the target through here and through the
 * engines (sampler.h, allocwatch.h), never through proc/ itself.  Nothing
 * here prints; errors are RBP_E* values.
 */
#ifndef RBP_PROFILE_SUBJECT_H
#define RBP_PROFILE_SUBJECT_H

#include <stddef.h>
#include <sys/types.h>

#include "profile/procset.h"
#include "ruby/vm.h"

struct rbp_os_threads;

struct rbp_subject {
	struct rbp_target *t;         /* owned; NULL until opened */
	struct rbp_vm *vm;            /* owned; NULL until attached (or not Ruby) */
	struct rbp_native *native;    /* owned; --native (rbp_subject_native), else NULL */
};

/*
 * Open process pid (core NULL) or the core file core (sysroot: where its
 * files are, or NULL) into s (zeroed by the caller) and attach to its Ruby
 * VM with vo.  Whatever was opened stays in s, on failure too: free it
 * with rbp_subject_close().  Returns an RBP_E* code.
 */
int rbp_subject_open(struct rbp_subject *s, int pid, const char *core, const char *sysroot,
		     struct rbp_vm_opts *vo);
/* Open process pid without attaching (a program that is not Ruby itself). */
int rbp_subject_open_process(struct rbp_subject *s, int pid);
/*
 * rbp_subject_open() of a process that may not be Ruby yet: retried while
 * its VM is not up (RBP_ENOTREADY, RBP_ENOVM, RBP_ECORRUPT, RBP_EFAULT) and, for a program
 * just started (starting), while it may still exec Ruby: until it has run
 * the same non-Ruby program for RBP_SUBJECT_NOT_RUBY_NS.  Gives up with the
 * last error when should_stop(ctx) says so, and with RBP_ENOPROC when
 * gone(ctx) does (either may be NULL).  On failure s is closed.
 */
#define RBP_SUBJECT_NOT_RUBY_NS 500000000ull
int rbp_subject_wait_ruby(struct rbp_subject *s, int pid, int starting, struct rbp_vm_opts *vo,
			  int (*should_stop)(void *ctx), int (*gone)(void *ctx), void *ctx);
/*
 * rbp_subject_open() of live process pid, waiting while its Ruby VM is
 * not set up yet (RBP_ENOTREADY: a process starting up), at most bound_ns:
 * and, silently, while a process younger than RBP_SUBJECT_NOT_RUBY_NS is
 * not Ruby yet (it may be an exec or a loader away from it):
 * waiting(ctx) is called once when the VM wait begins (may be NULL), and
 * should_stop(ctx) ends it early.  Returns the last attempt's result
 * (RBP_ENOTREADY when the bound passed).
 */
#define RBP_SUBJECT_READY_NS 2000000000ull
int rbp_subject_wait_ready(struct rbp_subject *s, int pid, struct rbp_vm_opts *vo, uint64_t bound_ns,
			   void (*waiting)(void *ctx), int (*should_stop)(void *ctx), void *ctx);
/* Open the native unwinder (--native) of an opened live process. */
int rbp_subject_native(struct rbp_subject *s);
/* 1 when this build can unwind native stacks (built with libdw). */
int rbp_subject_native_available(void);
/* The native unwinding done: s's, and with procs every member's. */
void rbp_subject_native_stats(const struct rbp_subject *s, const struct rbp_procset *procs,
			      struct rbp_native_stats *out);
void rbp_subject_close(struct rbp_subject *s);   /* NULL-safe; s is zeroed */
/* 1 when s's process or core file is open (attached to its VM or not). */
int rbp_subject_opened(const struct rbp_subject *s);
/* The PID of s's process (for a core file, the one it records); s opened. */
int rbp_subject_pid(const struct rbp_subject *s);
/* 1 when s is a core file. */
int rbp_subject_is_core(const struct rbp_subject *s);
/* One read of every thread's stack, nothing paused (rbp_vm_read_stacks; inspect). */
int rbp_subject_read_stacks(struct rbp_subject *s, struct rbp_stacks *out);
/*
 * One look at every thread of an attached subject (snapshot): for a live
 * process first what the OS says of each thread (ot; read before pausing,
 * as a paused thread shows 't'; left empty for a core file), then the
 * stacks, read with every thread paused unless nonblocking, or, with
 * native, unwound natively and merged (the unwinder opened in s, kept
 * until rbp_subject_close).  RBP_E* on failure; out and ot are the
 * caller's to free (rbp_stacks_free, rbp_os_threads_free) either way.
 */
int rbp_subject_snapshot(struct rbp_subject *s, int native, int nonblocking,
			 struct rbp_stacks *out, struct rbp_os_threads *ot);
/*
 * --subprocesses: the set of s and its Ruby descendants (rbp_procset_new;
 * s's target and VM stay s's, and s must outlive the set).
 */
int rbp_subject_procset(struct rbp_subject *s, const struct rbp_vm_opts *vo,
			struct rbp_procset **out);
/*
 * rbp_subject_snapshot() of member m of a process set: its target and VM
 * stay the set's, and the unwinder (native) is kept in m (m->native),
 * closed with the set: the frames read name its symbols until then.
 */
int rbp_member_snapshot(struct rbp_procset_member *m, int native, int nonblocking,
			struct rbp_stacks *out, struct rbp_os_threads *ot);

/* The processes descended from root now (root not included), at most max: how many. */
size_t rbp_descendants(int root, int *pids, size_t max);
/*
 * The first Ruby process descended from root (a shell's child), or 0:
 * what --subprocesses would follow; name gets its program.
 */
int rbp_ruby_descendant(int root, const struct rbp_vm_opts *vo, char *name, size_t n);
/* A process's command line (as `ps` shows it), "" when unreadable.  Returns buf. */
char *rbp_process_cmdline(pid_t pid, char *buf, size_t n);
/* A process's executable, "" when unreadable.  Returns buf. */
char *rbp_process_exe(pid_t pid, char *buf, size_t n);

/* What the OS says of each thread of a live process (state, name). */
struct rbp_os_thread {
	char state;     /* /proc/PID/task/TID/stat field 3: R S D T t Z X I; 0 unreadable */
	char comm[17];  /* its name (/proc/PID/task/TID/comm) */
};
struct rbp_os_threads {
	pid_t *tids;                  /* sorted */
	struct rbp_os_thread *info;   /* per tid */
	size_t n;
};
/* Read them (none when the list cannot be read); free with rbp_os_threads_free(). */
void rbp_os_threads_read(pid_t pid, struct rbp_os_threads *ot);
void rbp_os_threads_free(struct rbp_os_threads *ot);

#endif
