/*
 * syscall_names.c - the syscall-name table (see syscall_names.h).
 */
#include "syscall_names.h"

#include <stddef.h>

static const char *const syscall_names[] = {
#include "rbk_syscalls.h"
};

const char *rbk_syscall_name(long nr)
{
	if (nr < 0 || (unsigned long)nr >= sizeof(syscall_names) / sizeof(*syscall_names)) return NULL;
	return syscall_names[nr];
}
