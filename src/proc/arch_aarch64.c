/*
 * arch_aarch64.c - aarch64's part of arch.h: the decoders (compiled on
 * every host) and, on aarch64, the ptrace and perf register sets.
 *
 * A64 instructions are 4 bytes, little endian.  A global is reached in
 * position-independent code by
 *     adrp xN, page            page = (pc & ~0xfff) + (imm21 << 12)
 * completed by
 *     ldr  xT|wT, [xN, #imm]   (unsigned offset: imm12 scaled by 8 or 4)
 *     add  xD, xN, #imm        (imm12, optionally << 12)
 * Hints may come first: bti c (d503245f), paciasp (d503233f) and other
 * HINT #n (d503201f | n << 5).
 */
#include "proc/arch.h"

#include <string.h>

static uint32_t insn_at(const uint8_t *code, size_t i)
{
	uint32_t w;

	memcpy(&w, code + i, 4);   /* little endian (aarch64 Linux) */
	return w;
}

static int is_hint(uint32_t w)
{
	return (w & 0xfffff01f) == 0xd503201f;
}

/* ADRP: 1 immlo(2) 10000 immhi(19) Rd(5); its page for an insn at pc. */
static int adrp(uint32_t w, uint64_t pc, unsigned *rd, uint64_t *page)
{
	if ((w & 0x9f000000) != 0x90000000)
		return 0;
	uint64_t imm = ((w >> 29) & 3) | ((uint64_t)(w >> 5) & 0x7ffff) << 2;   /* 21 bits */
	int64_t off = (int64_t)(imm << 43) >> 31;                            /* sign-extend, << 12 */
	*rd = w & 31;
	*page = (pc & ~(uint64_t)0xfff) + (uint64_t)off;
	return 1;
}

/* The offset an LDR (unsigned offset, 32 or 64 bit) or ADD (immediate, 64
 * bit) based on register rn adds; 0 when w is neither. */
static int completes(uint32_t w, unsigned rn, uint64_t *off)
{
	if (((w >> 5) & 31) != rn)
		return 0;
	if ((w & 0xffc00000) == 0xf9400000) {          /* ldr xT, [xN, #imm12*8] */
		*off = (uint64_t)((w >> 10) & 0xfff) * 8;
		return 1;
	}
	if ((w & 0xffc00000) == 0xb9400000) {          /* ldr wT, [xN, #imm12*4] */
		*off = (uint64_t)((w >> 10) & 0xfff) * 4;
		return 1;
	}
	if ((w & 0xff800000) == 0x91000000) {          /* add xD, xN, #imm12{, lsl 12} */
		*off = (uint64_t)((w >> 10) & 0xfff) << ((w >> 22) & 1 ? 12 : 0);
		return 1;
	}
	return 0;
}

size_t rbp_aarch64_pcrel_loads(const uint8_t *code, size_t len, uint64_t vaddr,
			       uint64_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i + 4 <= len && n < max; i += 4) {
		unsigned rd;
		uint64_t page, off;

		if (!adrp(insn_at(code, i), vaddr + i, &rd, &page))
			continue;
		for (size_t j = i + 4; j + 4 <= len && j <= i + 16; j += 4)
			if (completes(insn_at(code, j), rd, &off)) {
				out[n++] = page + off;
				break;
			}
	}
	return n;
}

size_t rbp_aarch64_calls_before_load(const uint8_t *code, size_t len, uint64_t vaddr,
				     uint64_t *out, size_t max)
{
	(void)code; (void)len; (void)vaddr; (void)out; (void)max;
	return 0;
}

int rbp_aarch64_first_load(const uint8_t *code, size_t len, uint64_t vaddr, uint64_t *target)
{
	size_t i = 0;
	unsigned rd;
	uint64_t page, off;

	while (i + 4 <= len && i < 8 && is_hint(insn_at(code, i)))
		i += 4;
	if (i + 8 > len || !adrp(insn_at(code, i), vaddr + i, &rd, &page))
		return -1;
	uint32_t w = insn_at(code, i + 4);
	if ((w & 0xbfc00000) != 0xb9400000 || !completes(w, rd, &off))   /* an ldr, not an add */
		return -1;
	*target = page + off;
	return 0;
}

#if defined(__aarch64__)
#include <elf.h>
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <asm/ptrace.h>

#define SVC_0 0xd4000001u   /* svc #0 */

/*
 * aarch64 has no orig_rax to read: its user registers (PTRACE_GETREGSET,
 * NT_PRSTATUS: struct user_pt_regs, x0-x30, sp, pc, pstate) hold a system
 * call's result in x0.  When a signal stop interrupts a blocked call, the
 * kernel (arch/arm64/kernel/signal.c, do_signal) forgets the call number
 * and, for a call to restart, puts its first argument back in x0 and pc
 * back on the `svc #0`; for one that fails with EINTR, x0 is -4 and pc
 * follows the svc.  So: stopped at an svc, or with -EINTR just after one,
 * it was blocked (a thread stopped in user code exactly there is taken as
 * blocked too); otherwise it was running.  One PTRACE_PEEKTEXT reads the
 * two instructions around pc.
 */
int rbp_arch_was_running(pid_t tid)
{
	struct user_pt_regs regs;
	struct iovec iov = { .iov_base = &regs, .iov_len = sizeof(regs) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &iov) || (regs.pc & 3))
		return -1;
	errno = 0;
	long word = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)(regs.pc - 4), NULL);
	if (errno)
		return 1;
	uint32_t before = (uint32_t)word, at = (uint32_t)((unsigned long)word >> 32);
	if (at == SVC_0)
		return 0;
	if (before == SVC_0 && (long long)regs.regs[0] == -4 /* EINTR */)
		return 0;
	return 1;
}

/* perf register numbers (arch/arm64/include/uapi/asm/perf_regs.h) */
#define PERF_X0 0
#define PERF_X1 1
#define PERF_X2 2

uint64_t rbp_arch_perf_arg_regs(void)
{
	return 1ull << PERF_X0 | 1ull << PERF_X1 | 1ull << PERF_X2;
}

void rbp_arch_perf_args(const uint64_t *w, size_t n, uint64_t args[3])
{
	if (n < 3)
		return;
	args[0] = w[0];   /* bit order: x0, x1, x2 */
	args[1] = w[1];
	args[2] = w[2];
}
#endif
