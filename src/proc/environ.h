/*
 * environ.h - a process's environment as the process itself holds it.
 *
 * /proc/PID/environ shows the bytes of the stack area the kernel wrote the
 * environment into at exec.  A program that sets a long title
 * (setproctitle: Ruby's `$0 =`, puma's tag) writes the title over that
 * area, after copying the environment elsewhere and pointing libc's
 * `environ` at the copy: /proc/PID/environ then shows the title.  The
 * process's own `environ` variable (found in the dynamic symbols of the
 * executable, where a copy relocation puts it, or of libc: glibc's
 * `environ`/`__environ`, musl's `__environ`) still points at the
 * environment as the program sees it (setenv included).
 */
#ifndef RBP_PROC_ENVIRON_H
#define RBP_PROC_ENVIRON_H

#include <stddef.h>
#include <sys/types.h>

struct rbp_target;

/*
 * The environment through t's `environ`: "K=V" strings, each NUL-ended,
 * into buf (cap bytes; what does not fit is left out whole), *len its
 * length.  RBP_ENOSYM when no `environ` symbol is found, RBP_EFAULT when
 * what it points at cannot be read.
 */
int rbp_target_environ(struct rbp_target *t, char *buf, size_t cap, size_t *len);

/*
 * The environment of process pid: rbp_target_environ, else the text of
 * /proc/PID/environ (a process without a libc `environ`, or one that
 * cannot be read); *len 0 when neither can be read.  Returns RBP_OK, or
 * the error of the /proc read.
 */
int rbp_proc_environ(pid_t pid, char *buf, size_t cap, size_t *len);

#endif
