/*
 * arch_x86_64.c - x86-64's part of arch.h: the decoders (compiled on every
 * host) and, on x86-64, the ptrace and perf register sets.
 */
#include "proc/arch.h"

#include <string.h>

size_t rbp_x86_64_pcrel_loads(const uint8_t *code, size_t len, uint64_t vaddr,
			      uint64_t *out, size_t max)
{
	size_t n = 0;
	int32_t disp;

	/* REX.W (48) or REX.WR (4c), 8b, ModRM mod=00 rm=101: disp32(%rip) */
	for (size_t i = 0; i + 7 <= len && n < max; i++) {
		if ((code[i] != 0x48 && code[i] != 0x4c) || code[i + 1] != 0x8b ||
		    (code[i + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&disp, code + i + 3, 4);
		out[n++] = vaddr + i + 7 + (uint64_t)(int64_t)disp;
	}
	return n;
}

size_t rbp_x86_64_calls_before_load(const uint8_t *code, size_t len, uint64_t vaddr,
				    uint64_t *out, size_t max)
{
	size_t n = 0;
	int32_t disp;

	for (size_t i = 0; i + 5 <= len && n < max; i++) {
		if (i + 7 <= len && (code[i] == 0x48 || code[i] == 0x4c) && code[i + 1] == 0x8b &&
		    (code[i + 2] & 0xc7) == 0x05)
			break;   /* the first load */
		if (code[i] != 0xe8)
			continue;
		memcpy(&disp, code + i + 1, 4);
		out[n++] = vaddr + i + 5 + (uint64_t)(int64_t)disp;
	}
	return n;
}

int rbp_x86_64_first_load(const uint8_t *code, size_t len, uint64_t vaddr, uint64_t *target)
{
	size_t i = 0;
	int32_t disp;

	if (len < 15)
		return -1;
	if (code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
		i = 4;   /* endbr64 */
	/* -O0: "push %rbp; mov %rsp,%rbp" first */
	if (code[i] == 0x55 && code[i + 1] == 0x48 && code[i + 2] == 0x89 && code[i + 3] == 0xe5)
		i += 4;
	if (code[i] == 0x48)
		i++;     /* REX.W */
	if (code[i] != 0x8b || code[i + 1] != 0x05)
		return -1;
	memcpy(&disp, code + i + 2, 4);
	*target = vaddr + i + 6 + (uint64_t)(int64_t)disp;
	return 0;
}

#if defined(__x86_64__)
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/user.h>

/*
 * Interrupted in a system call, a thread's orig_rax holds the call's number
 * and rax one of the kernel's "restart" codes (or -EINTR); stopped in user
 * code, orig_rax is -1.  A blocked thread that our previous stop
 * interrupted and that has not yet re-entered its call shows the call's
 * number in rax at a `syscall` instruction (0f 05), with orig_rax the same
 * number or -1: blocked too (one PTRACE_PEEKTEXT, only when rax holds a
 * plausible system call number, 0-511).
 */
int rbp_arch_was_running(pid_t tid)
{
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, tid, NULL, &regs))
		return -1;
	long long rax = (long long)regs.rax, orig = (long long)regs.orig_rax;
	if (rax >= 0 && rax < 512 && (orig < 0 || rax == orig)) {   /* restarting its call? */
		errno = 0;
		long word = ptrace(PTRACE_PEEKTEXT, tid, (void *)regs.rip, NULL);
		if (!errno && (word & 0xffff) == 0x050f)   /* 0f 05: syscall */
			return 0;
	}
	if (orig < 0)
		return 1;
	return !(rax == -4 /* EINTR */ || rax == -512 /* ERESTARTSYS */ ||
		 rax == -513 /* ERESTARTNOINTR */ || rax == -514 /* ERESTARTNOHAND */ ||
		 rax == -516 /* ERESTART_RESTARTBLOCK */);
}

/* perf register numbers (arch/x86/include/uapi/asm/perf_regs.h) */
#define PERF_DX 3
#define PERF_SI 4
#define PERF_DI 5

uint64_t rbp_arch_perf_arg_regs(void)
{
	return 1ull << PERF_DX | 1ull << PERF_SI | 1ull << PERF_DI;
}

void rbp_arch_perf_args(const uint64_t *w, size_t n, uint64_t args[3])
{
	if (n < 3)
		return;
	args[2] = w[0];   /* bit order: dx, si, di */
	args[1] = w[1];
	args[0] = w[2];
}
#endif
