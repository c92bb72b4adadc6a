/*
 * syscall_names.h - syscall numbers to names, for this machine's
 * architecture; the writer names the kernel streams' syscall slices with it.
 */
#ifndef RBK_SYSCALL_NAMES_H
#define RBK_SYSCALL_NAMES_H

/* The syscall's name ("read", "futex"...), or NULL when the number is
 * unknown.  The table is generated at build time from the kernel headers
 * by tools/gen-syscalls.sh. */
const char *rbk_syscall_name(long nr);

#endif
