/*
 * arch.h - everything rbpeek knows about the machine it runs on, in one
 * place: the instruction set and the ABI of x86-64 (arch_x86_64.c) and of
 * aarch64 (arch_aarch64.c).  Nothing else in src/ tests __x86_64__ or
 * __aarch64__; the rest of the concerns that differ are settled elsewhere
 * once, by the toolchain:
 *   - system call names: generated from the target's <asm/unistd.h>
 *     (tools/gen-syscalls.sh; aarch64 has the generic table: no open, stat)
 *   - core file notes: <sys/procfs.h>'s struct elf_prstatus/elf_prpsinfo
 *     (corefile.c), compiled for the target
 *   - the eBPF programs' registers: libbpf's PT_REGS_PARM* for
 *     __TARGET_ARCH_x86 / __TARGET_ARCH_arm64 (the Makefile sets it)
 *   - native unwinding: libdw's own backends (x86-64 and aarch64 CFI and
 *     initial registers through ptrace)
 *   - Ruby's structure layouts: src/ruby/tables/, one table per
 *     architecture (layouts.c, layouts_aarch64.c; docs/rubies.md)
 * and, outside src/, the tracer's clock: the TSC on x86-64, clock_gettime
 * elsewhere (ext/rbpeek/trace.c).
 *
 * The code decoders are pure functions of bytes, and both architectures'
 * are compiled everywhere (tests/unit/test_arch.c checks both on any
 * host); rbp_arch_* names the running machine's.
 */
#ifndef RBP_PROC_ARCH_H
#define RBP_PROC_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The addresses that the position-independent loads in code (at link-time
 * address vaddr) read from, in the order found, at most max of them; the
 * count.  x86-64: every "mov disp32(%rip),%r64"; aarch64: every ADRP whose
 * page a following LDR or ADD (same base register, within 4 instructions)
 * completes.  A load through the GOT gives the GOT slot's address.
 */
size_t rbp_x86_64_pcrel_loads(const uint8_t *code, size_t len, uint64_t vaddr,
			      uint64_t *out, size_t max);
size_t rbp_aarch64_pcrel_loads(const uint8_t *code, size_t len, uint64_t vaddr,
			       uint64_t *out, size_t max);

/*
 * The address that a function (code at link-time address vaddr) loads
 * from with its first instruction(s) -- a function that returns a global,
 * as rb_sym_immortal_count() does -- after a landing pad or
 * pointer-authentication hint.  0 and *target, or -1 when it does not
 * start so.  x86-64: [endbr64] mov disp32(%rip),%eax|%rax; aarch64: [bti
 * c|paciasp] adrp xN, page; ldr wT|xT, [xN, #off].
 */
int rbp_x86_64_first_load(const uint8_t *code, size_t len, uint64_t vaddr, uint64_t *target);
int rbp_aarch64_first_load(const uint8_t *code, size_t len, uint64_t vaddr, uint64_t *target);

/*
 * The targets of the calls in code before its first position-independent
 * load, at most max; the count.  An unoptimised (-O0) ruby_vm_at_exit()
 * calls rb_current_vm() for the VM instead of loading it: the caller
 * decodes those functions too.  x86-64: what may be "call rel32" (an e8
 * byte; without decoding every instruction some are parts of others);
 * aarch64: none yet (an -O0 arm64 Ruby's VM is found by the scan).
 */
size_t rbp_x86_64_calls_before_load(const uint8_t *code, size_t len, uint64_t vaddr,
				    uint64_t *out, size_t max);
size_t rbp_aarch64_calls_before_load(const uint8_t *code, size_t len, uint64_t vaddr,
				     uint64_t *out, size_t max);

#if defined(__x86_64__)
#define RBP_ARCH_NAME "x86_64"
#define RBP_ARCH_X86_64 1
#define rbp_arch_pcrel_loads rbp_x86_64_pcrel_loads
#define rbp_arch_first_load rbp_x86_64_first_load
#define rbp_arch_calls_before_load rbp_x86_64_calls_before_load
/* above the highest user-space address (47-bit virtual addresses) */
#define RBP_ARCH_USER_END 0x800000000000ull
/* the first byte of the kernel's uprobe breakpoint (int3) */
#define RBP_ARCH_UPROBE_BYTE 0xcc
#elif defined(__aarch64__)
#define RBP_ARCH_NAME "aarch64"
#define RBP_ARCH_X86_64 0
#define rbp_arch_pcrel_loads rbp_aarch64_pcrel_loads
#define rbp_arch_first_load rbp_aarch64_first_load
#define rbp_arch_calls_before_load rbp_aarch64_calls_before_load
/* 48-bit virtual addresses (52 with LVA kernels): user space below 2^52 */
#define RBP_ARCH_USER_END 0x10000000000000ull
/* the first byte of the kernel's uprobe breakpoint (brk #0x5: d42000a0) */
#define RBP_ARCH_UPROBE_BYTE 0xa0
#else
#error "rbpeek runs on x86-64 and aarch64 Linux only (src/proc/arch.h)"
#endif

/*
 * Whether a thread that has just stopped under ptrace had been running (1)
 * or was blocked in a system call (0), from its registers; -1 when they
 * cannot be read.  See pause.c for why and arch_*.c for how.
 */
int rbp_arch_was_running(pid_t tid);

/*
 * The user registers a perf sample carries for a uprobe on a function's
 * first three integer arguments (perf_event_attr.sample_regs_user), and
 * those arguments from the sample's register words (in bit order, n of
 * them): args[0] is the first.
 */
uint64_t rbp_arch_perf_arg_regs(void);
void rbp_arch_perf_args(const uint64_t *words, size_t n, uint64_t args[3]);

#endif
