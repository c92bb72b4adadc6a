/*
 * native.h - the native (machine) stack of a live process's threads:
 * unwinding and symbolization.  This layer knows nothing of Ruby.
 *
 *   rbp_native_open(target, &n)         index the target's mapped ELF files
 *   rbp_native_unwind(n, tid, pcs, ...) the call chain of one thread, which
 *                                       the caller holds in a ptrace-stop
 *                                       (see rbp_pause in proc/target.h)
 *   rbp_native_symbol(n, pc, &sym)      what function pc is in (cached)
 *
 * Unwinding is elfutils' libdwfl: CFI (.eh_frame, .debug_frame) of every
 * module, memory read with process_vm_readv, registers with PTRACE_GETREGS.
 * Symbols come from the same library: .symtab, else .dynsym, of each file
 * or of its split debug info (/usr/lib/debug/.build-id, .gnu_debuglink),
 * and source lines from DWARF when debug info is installed.  Files are
 * opened under the target's root (/proc/PID/root), so a process in a
 * container or chroot is unwound with its own libraries.
 */
#ifndef RBP_PROC_NATIVE_H
#define RBP_PROC_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/target.h"

#define RBP_NATIVE_MAX_FRAMES 256   /* deepest native stack unwound */

struct rbp_native;

/* What rbpeek knows about one code address.  Strings live as long as n. */
struct rbp_native_sym {
	const char *name;     /* "ext_inner"; "libfoo.so.1+0x1a20" (the offset of the
			       * function's start from the file's load address) when
			       * no symbol covers pc, "libfoo.so.1" ("[vdso]") when
			       * the start is unknown too; "[unknown]" outside any file */
	const char *file;     /* source file from DWARF, "" unknown */
	int32_t line;         /* its line, 0 unknown */
	uint64_t start;       /* first address of the function (symbol, else CFI), 0 unknown */
	const char *module;   /* the file as the target maps it, "" none */
	uint8_t named;        /* 1 when name comes from a symbol */
	uint8_t full_symbols; /* 1 when the module has .symtab or debug info (static
			       * functions are named), 0 with .dynsym only */
};

/*
 * 1 when this rbpeek was built with elfutils, 0 when built with NATIVE=0
 * (src/proc/native_none.c): then rbp_native_open fails with RBP_ENONATIVE.
 */
int rbp_native_available(void);

/* Prepare to unwind a live process; RBP_EINVAL for a core file. */
int rbp_native_open(struct rbp_target *t, struct rbp_native **out);
void rbp_native_close(struct rbp_native *n);  /* NULL-safe */

/*
 * The native stack of thread tid, innermost first, into pcs (at most cap).
 * pcs[0] is where the thread is; the others are return addresses minus one
 * (an address inside the call instruction), so each names its caller's
 * line.  The thread must be in a ptrace-stop held by the caller.  A stack
 * that cannot be unwound to its end is returned as far as it went;
 * RBP_ENOPROC when the thread is gone, RBP_EFAULT when nothing was read.
 */
int rbp_native_unwind(struct rbp_native *n, pid_t tid, uint64_t *pcs, size_t cap,
		      size_t *count);

/*
 * After the threads were released: take in the libraries the target
 * loaded since the last look, when an unwind ended in no known module
 * (rate-limited).  NULL-safe.
 */
void rbp_native_refresh(struct rbp_native *n);
/* Symbol of an address from rbp_native_unwind (cached by address). */
int rbp_native_symbol(struct rbp_native *n, uint64_t pc, const struct rbp_native_sym **out);

/* Counters since open, for benchmarks and bug reports. */
struct rbp_native_stats {
	uint64_t unwinds;       /* rbp_native_unwind calls */
	uint64_t frames;        /* addresses they returned */
	uint64_t sym_misses;    /* addresses symbolized (cache misses) */
	uint64_t rescans;       /* /proc/PID/maps re-read for newly loaded files */
};
void rbp_native_stats(const struct rbp_native *n, struct rbp_native_stats *out);
/* Add x's counts, or n's (n may be NULL), to *sum. */
static inline void rbp_native_stats_sum(struct rbp_native_stats *sum,
					const struct rbp_native_stats *x)
{
	sum->unwinds += x->unwinds;
	sum->frames += x->frames;
	sum->sym_misses += x->sym_misses;
	sum->rescans += x->rescans;
}
void rbp_native_stats_add(const struct rbp_native *n, struct rbp_native_stats *sum);

#endif
