/*
 * framecap.c - the eBPF frame-copying program and its maps (see framecap.h).
 *
 * The program is assembled here from eBPF instructions with a tiny
 * assembler (labels resolved at the end), one copy per probe because the
 * probe's number and its argument register are immediates in it.  Loaded
 * with the raw bpf() system call as BPF_PROG_TYPE_KPROBE (the type uprobe
 * perf events run).
 *
 * Maps:
 *   threads  hash      u32 tid -> u64 thread descriptor address (the user fills it)
 *   config   array[1]  u32 pick: copy when bpf_get_prandom_u32() < pick
 *   scratch  per-CPU array[1]: one record being built (too big for the
 *            program's 512-byte stack)
 *   events   perf event array: one BPF-output perf event per CPU, each
 *            with its own mmap ring, read by rbp_framecap_read()
 *
 * Record layout (the bytes handed to bpf_perf_event_output):
 *   0 u32 tid | 4 u32 probe | 8 u64 time | 16 u64 arg | 24 u64 cfp |
 *   32 u32 frames | 36 u32 truncated | 40 u64 scratch (the ec) |
 *   48 ec head (64 bytes) | 112 frames (n * cfp_size) | env (n * 24)
 */
#include "proc/framecap.h"

#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "proc/perfring.h"
#include "util/err.h"

#define REC_TID 0
#define REC_PROBE 4
#define REC_TIME 8
#define REC_ARG 16
#define REC_CFP 24
#define REC_N 32
#define REC_TRUNC 36
#define REC_EC 40
#define REC_ECHEAD 48
#define EC_HEAD 64
#define REC_HDR 112
#define ENV_BYTES 24       /* ep[-2], ep[-1], ep[0] */
#define MAX_THREADS 16384  /* entries of the tid map */
#define RING_PAGES 64      /* per CPU: 256 KiB, a dozen deep stacks */
#define MAX_INSNS 128

/* x86-64 struct pt_regs offsets of the argument registers rdi, rsi, rdx */
static const int16_t pt_regs_arg[3] = { 112, 104, 96 };

/* ---- a tiny eBPF assembler ---------------------------------------------- */

struct fixup {
	size_t at;      /* jump instruction */
	int label;
};

struct prog {
	struct bpf_insn insn[MAX_INSNS];
	size_t n;
	int label_at[16];          /* instruction index of each label, -1 unset */
	struct fixup fix[32];
	size_t n_fix;
	int overflow;
};

static void emit(struct prog *p, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	if (p->n >= MAX_INSNS) {
		p->overflow = 1;
		return;
	}
	p->insn[p->n++] = (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src,
					     .off = off, .imm = imm };
}

/* 64-bit ALU with an immediate / a register: dst op= imm / src */
#define ALU_K(p, op, d, imm) emit(p, BPF_ALU64 | (op) | BPF_K, d, 0, 0, imm)
#define ALU_X(p, op, d, s) emit(p, BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define MOV_K(p, d, imm) ALU_K(p, BPF_MOV, d, imm)
#define MOV_X(p, d, s) ALU_X(p, BPF_MOV, d, s)
/* 32-bit move: zero-extends (BPF_F_CURRENT_CPU must not be sign-extended) */
#define MOV32_K(p, d, imm) emit(p, BPF_ALU | BPF_MOV | BPF_K, d, 0, 0, imm)
/* memory: dst = *(size *)(src + off); *(size *)(dst + off) = src / imm */
#define LDX(p, sz, d, s, off) emit(p, BPF_LDX | BPF_MEM | (sz), d, s, off, 0)
#define STX(p, sz, d, s, off) emit(p, BPF_STX | BPF_MEM | (sz), d, s, off, 0)
#define ST_K(p, sz, d, off, imm) emit(p, BPF_ST | BPF_MEM | (sz), d, 0, off, imm)
#define CALL(p, helper) emit(p, BPF_JMP | BPF_CALL, 0, 0, 0, helper)
#define EXIT(p) emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* dst = the map whose fd is given (a two-instruction load the kernel rewrites) */
static void ld_map(struct prog *p, uint8_t dst, int fd)
{
	emit(p, BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd);
	emit(p, 0, 0, 0, 0, 0);
}

/* dst = a 64-bit immediate (two instructions) */
static void ld_imm64(struct prog *p, uint8_t dst, uint64_t v)
{
	emit(p, BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, (int32_t)(uint32_t)v);
	emit(p, 0, 0, 0, 0, (int32_t)(uint32_t)(v >> 32));
}

/* if (dst op imm) goto label;  if (dst op src) goto label;  goto label */
static void jmp(struct prog *p, uint8_t code, uint8_t dst, uint8_t src, int32_t imm, int label)
{
	if (p->n_fix < sizeof(p->fix) / sizeof(p->fix[0]))
		p->fix[p->n_fix++] = (struct fixup){ p->n, label };
	else
		p->overflow = 1;
	emit(p, code, dst, src, 0, imm);
}
#define JMP_K(p, op, d, imm, l) jmp(p, BPF_JMP | (op) | BPF_K, d, 0, imm, l)
#define JMP_X(p, op, d, s, l) jmp(p, BPF_JMP | (op) | BPF_X, d, s, 0, l)
#define GOTO(p, l) jmp(p, BPF_JMP | BPF_JA, 0, 0, 0, l)
#define LABEL(p, l) ((p)->label_at[l] = (int)(p)->n)

static int resolve(struct prog *p)
{
	for (size_t i = 0; i < p->n_fix; i++) {
		int at = p->label_at[p->fix[i].label];
		if (at < 0)
			return RBP_EINVAL;
		p->insn[p->fix[i].at].off = (int16_t)(at - (int)p->fix[i].at - 1);
	}
	return p->overflow ? RBP_EINVAL : RBP_OK;
}

/* ---- the program ------------------------------------------------------- */

enum { L_OUT, L_CLAMPED, L_LOOP, L_DONE };

/* r0 = map_lookup_elem(map, &zero) via the stack at fp-4; goto out when NULL */
static void lookup_zero(struct prog *p, int map_fd)
{
	ST_K(p, BPF_W, BPF_REG_10, -4, 0);
	ld_map(p, BPF_REG_1, map_fd);
	MOV_X(p, BPF_REG_2, BPF_REG_10);
	ALU_K(p, BPF_ADD, BPF_REG_2, -4);
	CALL(p, BPF_FUNC_map_lookup_elem);
	JMP_K(p, BPF_JEQ, BPF_REG_0, 0, L_OUT);
}

struct maps {
	int threads, config, scratch, events;
};

/*
 * Registers kept across helper calls: r6 the context (struct pt_regs *),
 * r7 the record (scratch map value), r8 and r9 as commented.
 */
static void build(struct prog *p, const struct rbp_framecap_layout *L, const struct maps *m,
		  uint64_t ns_dev, uint64_t ns_ino, uint32_t probe, uint8_t arg_reg)
{
	const int32_t max = RBP_FRAMECAP_MAX_FRAMES, cs = L->cfp_size;

	for (size_t i = 0; i < sizeof(p->label_at) / sizeof(p->label_at[0]); i++)
		p->label_at[i] = -1;
	MOV_X(p, BPF_REG_6, BPF_REG_1);
	/* 1. sampling: go on only when a random number is below config.pick */
	CALL(p, BPF_FUNC_get_prandom_u32);
	MOV_X(p, BPF_REG_8, BPF_REG_0);
	lookup_zero(p, m->config);
	LDX(p, BPF_W, BPF_REG_1, BPF_REG_0, 0);
	JMP_X(p, BPF_JGE, BPF_REG_8, BPF_REG_1, L_OUT);
	/*
	 * 2. the thread id as our PID namespace numbers it (as the map's keys
	 * and the uprobe samples do; rbpeek may run in a container):
	 * get_ns_current_pid_tgid(dev, ino, &info at fp-16, 8), info.pid the
	 * thread's id; then r9 = threads[tid]
	 */
	ld_imm64(p, BPF_REG_1, ns_dev);
	ld_imm64(p, BPF_REG_2, ns_ino);
	MOV_X(p, BPF_REG_3, BPF_REG_10);
	ALU_K(p, BPF_ADD, BPF_REG_3, -16);
	MOV_K(p, BPF_REG_4, 8);
	CALL(p, BPF_FUNC_get_ns_current_pid_tgid);
	JMP_K(p, BPF_JNE, BPF_REG_0, 0, L_OUT);
	LDX(p, BPF_W, BPF_REG_8, BPF_REG_10, -16);
	STX(p, BPF_W, BPF_REG_10, BPF_REG_8, -8);
	ld_map(p, BPF_REG_1, m->threads);
	MOV_X(p, BPF_REG_2, BPF_REG_10);
	ALU_K(p, BPF_ADD, BPF_REG_2, -8);
	CALL(p, BPF_FUNC_map_lookup_elem);
	JMP_K(p, BPF_JEQ, BPF_REG_0, 0, L_OUT);
	LDX(p, BPF_DW, BPF_REG_9, BPF_REG_0, 0);
	/* the record: header fields */
	lookup_zero(p, m->scratch);
	MOV_X(p, BPF_REG_7, BPF_REG_0);
	STX(p, BPF_W, BPF_REG_7, BPF_REG_8, REC_TID);
	ST_K(p, BPF_W, BPF_REG_7, REC_PROBE, (int32_t)probe);
	CALL(p, BPF_FUNC_ktime_get_ns);   /* CLOCK_MONOTONIC, as the uprobe samples */
	STX(p, BPF_DW, BPF_REG_7, BPF_REG_0, REC_TIME);
	LDX(p, BPF_DW, BPF_REG_1, BPF_REG_6, pt_regs_arg[arg_reg]);
	STX(p, BPF_DW, BPF_REG_7, BPF_REG_1, REC_ARG);
	/* 3. the execution context: r9 = th->ec (or th + offset when embedded) */
	ALU_K(p, BPF_ADD, BPF_REG_9, L->thread_ec);
	if (!L->ec_embedded) {
		MOV_X(p, BPF_REG_1, BPF_REG_7);
		ALU_K(p, BPF_ADD, BPF_REG_1, REC_EC);
		MOV_K(p, BPF_REG_2, 8);
		MOV_X(p, BPF_REG_3, BPF_REG_9);
		CALL(p, BPF_FUNC_probe_read_user);
		JMP_K(p, BPF_JNE, BPF_REG_0, 0, L_OUT);
		LDX(p, BPF_DW, BPF_REG_9, BPF_REG_7, REC_EC);
	}
	/* its head: vm_stack, vm_stack_size, cfp */
	MOV_X(p, BPF_REG_1, BPF_REG_7);
	ALU_K(p, BPF_ADD, BPF_REG_1, REC_ECHEAD);
	MOV_K(p, BPF_REG_2, EC_HEAD);
	MOV_X(p, BPF_REG_3, BPF_REG_9);
	CALL(p, BPF_FUNC_probe_read_user);
	JMP_K(p, BPF_JNE, BPF_REG_0, 0, L_OUT);
	LDX(p, BPF_DW, BPF_REG_8, BPF_REG_7, REC_ECHEAD + L->ec_cfp);          /* r8 = cfp */
	LDX(p, BPF_DW, BPF_REG_1, BPF_REG_7, REC_ECHEAD + L->ec_vm_stack);     /* r1 = stack */
	LDX(p, BPF_DW, BPF_REG_2, BPF_REG_7, REC_ECHEAD + L->ec_vm_stack_size);
	ALU_K(p, BPF_LSH, BPF_REG_2, 3);
	ALU_X(p, BPF_ADD, BPF_REG_1, BPF_REG_2);                               /* r1 = end */
	JMP_K(p, BPF_JEQ, BPF_REG_8, 0, L_OUT);          /* no frames (not started) */
	JMP_X(p, BPF_JGT, BPF_REG_8, BPF_REG_1, L_OUT);  /* cfp past the end: garbage */
	STX(p, BPF_DW, BPF_REG_7, BPF_REG_8, REC_CFP);
	/* 4. r9 = frames = (end - cfp) / cfp_size, at most max (truncated = 1) */
	ALU_X(p, BPF_SUB, BPF_REG_1, BPF_REG_8);
	ALU_K(p, BPF_DIV, BPF_REG_1, cs);
	MOV_K(p, BPF_REG_2, 0);
	JMP_K(p, BPF_JLE, BPF_REG_1, max, L_CLAMPED);
	MOV_K(p, BPF_REG_1, max);
	MOV_K(p, BPF_REG_2, 1);
	LABEL(p, L_CLAMPED);
	MOV_X(p, BPF_REG_9, BPF_REG_1);
	STX(p, BPF_W, BPF_REG_7, BPF_REG_9, REC_N);
	STX(p, BPF_W, BPF_REG_7, BPF_REG_2, REC_TRUNC);
	/* the frames, in one read: probe_read_user(rec + HDR, frames * cfp_size, cfp) */
	MOV_X(p, BPF_REG_2, BPF_REG_9);
	ALU_K(p, BPF_MUL, BPF_REG_2, cs);
	MOV_X(p, BPF_REG_1, BPF_REG_7);
	ALU_K(p, BPF_ADD, BPF_REG_1, REC_HDR);
	MOV_X(p, BPF_REG_3, BPF_REG_8);
	CALL(p, BPF_FUNC_probe_read_user);
	JMP_K(p, BPF_JNE, BPF_REG_0, 0, L_OUT);
	/*
	 * each frame's environment words: for (r8 = 0; r8 < frames; r8++)
	 *   probe_read_user(env + r8 * 24, 24, frame[r8].ep - 16)
	 * where env = rec + HDR + frames * cfp_size.  A failed read leaves
	 * zeros (the helper clears its destination), which the reader skips.
	 */
	MOV_K(p, BPF_REG_8, 0);
	LABEL(p, L_LOOP);
	JMP_X(p, BPF_JGE, BPF_REG_8, BPF_REG_9, L_DONE);
	MOV_X(p, BPF_REG_1, BPF_REG_8);                    /* r3 = frame[r8].ep - 16 */
	ALU_K(p, BPF_MUL, BPF_REG_1, cs);
	MOV_X(p, BPF_REG_2, BPF_REG_7);
	ALU_X(p, BPF_ADD, BPF_REG_2, BPF_REG_1);
	LDX(p, BPF_DW, BPF_REG_3, BPF_REG_2, REC_HDR + L->cfp_ep);
	ALU_K(p, BPF_ADD, BPF_REG_3, -16);
	MOV_X(p, BPF_REG_1, BPF_REG_9);                    /* r1 = env + r8 * 24 */
	ALU_K(p, BPF_MUL, BPF_REG_1, cs);
	MOV_X(p, BPF_REG_2, BPF_REG_8);
	ALU_K(p, BPF_MUL, BPF_REG_2, ENV_BYTES);
	ALU_X(p, BPF_ADD, BPF_REG_1, BPF_REG_2);
	MOV_X(p, BPF_REG_2, BPF_REG_7);
	ALU_X(p, BPF_ADD, BPF_REG_2, BPF_REG_1);
	MOV_X(p, BPF_REG_1, BPF_REG_2);
	ALU_K(p, BPF_ADD, BPF_REG_1, REC_HDR);
	MOV_K(p, BPF_REG_2, ENV_BYTES);
	CALL(p, BPF_FUNC_probe_read_user);
	ALU_K(p, BPF_ADD, BPF_REG_8, 1);
	GOTO(p, L_LOOP);
	LABEL(p, L_DONE);
	/* 5. perf_event_output(ctx, events, CURRENT_CPU, rec, HDR + frames * (cfp_size + 24)) */
	MOV_X(p, BPF_REG_5, BPF_REG_9);
	ALU_K(p, BPF_MUL, BPF_REG_5, cs + ENV_BYTES);
	ALU_K(p, BPF_ADD, BPF_REG_5, REC_HDR);
	MOV_X(p, BPF_REG_1, BPF_REG_6);
	ld_map(p, BPF_REG_2, m->events);
	MOV32_K(p, BPF_REG_3, -1);   /* BPF_F_CURRENT_CPU: 0xffffffff */
	MOV_X(p, BPF_REG_4, BPF_REG_7);
	CALL(p, BPF_FUNC_perf_event_output);
	/* always let the uprobe's own sample through */
	LABEL(p, L_OUT);
	MOV_K(p, BPF_REG_0, 1);
	EXIT(p);
}

/* ---- maps, programs, rings ------------------------------------------- */

struct rbp_framecap {
	struct rbp_framecap_layout L;
	struct maps m;
	int prog[RBP_FRAMECAP_MAX_PROBES];
	size_t n_probes;
	int *cpu_fd;                 /* BPF-output perf event per CPU, -1 offline */
	struct rbp_perf_ring *ring;  /* ... and its ring */
	size_t n_cpus;
	uint8_t *buf;                /* one record copied out of a ring */
	size_t buf_cap;
	int stats_fd;                /* BPF_ENABLE_STATS while held, -1 */
	pid_t *known;                /* tids in the threads map now */
	size_t n_known;
	uint64_t records, lost;
};

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static int map_create(uint32_t type, uint32_t key, uint32_t value, uint32_t entries,
		      const char *name)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = type;
	a.key_size = key;
	a.value_size = value;
	a.max_entries = entries;
	snprintf(a.map_name, sizeof(a.map_name), "%s", name);
	return (int)sys_bpf(BPF_MAP_CREATE, &a);
}

static int map_update(int fd, const void *key, const void *value)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.value = (uint64_t)(uintptr_t)value;
	a.flags = BPF_ANY;
	return sys_bpf(BPF_MAP_UPDATE_ELEM, &a) ? rbp_perf_errno(errno) : RBP_OK;
}

static void map_delete(int fd, const void *key)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	sys_bpf(BPF_MAP_DELETE_ELEM, &a);
}

/* The kernel's version code (kprobe programs had to give it before 5.0). */
static uint32_t kernel_version(void)
{
	struct utsname u;
	unsigned a = 0, b = 0, c = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u.%u", &a, &b, &c) < 2)
		return 0;
	return a << 16 | b << 8 | (c > 255 ? 255 : c);
}

/* Load a program; on refusal the verifier's last words go to why. */
static int prog_load(const struct prog *p, char *why, size_t why_len)
{
	union bpf_attr a;
	size_t log_size = 1 << 18;
	char *log;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_KPROBE;
	a.insns = (uint64_t)(uintptr_t)p->insn;
	a.insn_cnt = (uint32_t)p->n;
	/* GPL-compatible: the helpers reading user memory and writing perf output require it */
	a.license = (uint64_t)(uintptr_t)"Dual MIT/GPL";
	a.kern_version = kernel_version();
	snprintf(a.prog_name, sizeof(a.prog_name), "rbpeek_frames");
	if ((fd = (int)sys_bpf(BPF_PROG_LOAD, &a)) >= 0)
		return fd;
	int e = errno;
	if (e == EPERM || e == ENOSYS) {
		snprintf(why, why_len, "bpf(BPF_PROG_LOAD) refused: %s", strerror(e));
		return e == EPERM ? RBP_EPERM : RBP_ENOUPROBE;
	}
	/* again with the verifier's log, for the message */
	if (!(log = calloc(1, log_size)))
		return RBP_ENOMEM;
	a.log_level = 1;
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = (uint32_t)log_size;
	if ((fd = (int)sys_bpf(BPF_PROG_LOAD, &a)) >= 0) {
		free(log);
		return fd;
	}
	log[log_size - 1] = 0;
	size_t len = strlen(log);
	while (len && log[len - 1] == '\n')
		log[--len] = 0;
	const char *last = strrchr(log, '\n');
	snprintf(why, why_len, "the kernel's verifier refused the program (%s): %s", strerror(e),
		 last ? last + 1 : log);
	free(log);
	return e == EPERM ? RBP_EPERM : RBP_EINVAL;
}

/* Number of possible CPUs: the highest in /sys/devices/system/cpu/possible, plus one. */
static size_t possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	char line[256] = "";
	long n = sysconf(_SC_NPROCESSORS_CONF);

	if (f && fgets(line, sizeof(line), f)) {
		const char *p = line + strlen(line);
		while (p > line && (p[-1] < '0' || p[-1] > '9'))
			p--;
		while (p > line && p[-1] >= '0' && p[-1] <= '9')
			p--;
		n = strtol(p, NULL, 10) + 1;
	}
	if (f)
		fclose(f);
	return n > 0 ? (size_t)n : 1;
}

/* One BPF-output perf event and ring per CPU, registered in the events map. */
static int open_rings(struct rbp_framecap *c, char *why, size_t why_len)
{
	size_t opened = 0;

	c->n_cpus = possible_cpus();
	if (!(c->cpu_fd = malloc(c->n_cpus * sizeof(*c->cpu_fd))) ||
	    !(c->ring = calloc(c->n_cpus, sizeof(*c->ring))))
		return RBP_ENOMEM;
	for (size_t i = 0; i < c->n_cpus; i++)
		c->cpu_fd[i] = -1;
	for (size_t i = 0; i < c->n_cpus; i++) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.type = PERF_TYPE_SOFTWARE;
		a.size = sizeof(a);
		a.config = PERF_COUNT_SW_BPF_OUTPUT;
		a.sample_period = 1;
		a.sample_type = PERF_SAMPLE_RAW;
		uint32_t key = (uint32_t)i;
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, (int)i, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			continue;   /* an offline CPU runs nothing */
		c->cpu_fd[i] = fd;
		int err = rbp_perf_ring_map(&c->ring[i], fd, RING_PAGES, 8);
		if (!err)
			err = map_update(c->m.events, &key, &fd);
		if (err) {
			snprintf(why, why_len, "cannot set up the BPF output ring of CPU %zu: %s", i,
				 rbp_strerror(err));
			return err;
		}
		opened++;
	}
	if (!opened) {
		snprintf(why, why_len, "cannot open BPF output perf events: %s", strerror(errno));
		return rbp_perf_errno(errno);
	}
	return RBP_OK;
}

static int create_maps(struct rbp_framecap *c, uint32_t rec_size, char *why, size_t why_len)
{
	c->m.threads = map_create(BPF_MAP_TYPE_HASH, 4, 8, MAX_THREADS, "rbpeek_threads");
	if (c->m.threads >= 0)
		c->m.config = map_create(BPF_MAP_TYPE_ARRAY, 4, 4, 1, "rbpeek_config");
	if (c->m.config >= 0)
		c->m.scratch = map_create(BPF_MAP_TYPE_PERCPU_ARRAY, 4, rec_size, 1, "rbpeek_scratch");
	if (c->m.scratch >= 0)
		c->m.events = map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, (uint32_t)possible_cpus(),
					 "rbpeek_events");
	if (c->m.events >= 0)
		return RBP_OK;
	int e = errno;
	snprintf(why, why_len, "bpf(BPF_MAP_CREATE) refused: %s", strerror(e));
	return e == EPERM || e == EACCES ? RBP_EPERM : e == ENOSYS ? RBP_ENOUPROBE : rbp_perf_errno(e);
}

int rbp_framecap_open(const struct rbp_framecap_layout *L, const uint8_t *arg_reg, size_t n_probes,
		      struct rbp_framecap **out, char *why, size_t why_len)
{
	struct rbp_framecap *c;
	struct stat ns;
	uint32_t rec_size = REC_HDR + RBP_FRAMECAP_MAX_FRAMES * (uint32_t)(L->cfp_size + ENV_BYTES);
	int err;

	*out = NULL;
	snprintf(why, why_len, "?");
	if (!n_probes || n_probes > RBP_FRAMECAP_MAX_PROBES || !L->cfp_size || L->cfp_size > 128 ||
	    L->cfp_ep < 0 || L->cfp_ep + 8 > L->cfp_size || L->ec_cfp < 0 || L->ec_cfp + 8 > EC_HEAD ||
	    L->ec_vm_stack < 0 || L->ec_vm_stack + 8 > EC_HEAD || L->ec_vm_stack_size < 0 ||
	    L->ec_vm_stack_size + 8 > EC_HEAD) {
		snprintf(why, why_len, "unsupported interpreter layout");
		return RBP_EINVAL;
	}
	if (stat("/proc/self/ns/pid", &ns)) {
		snprintf(why, why_len, "cannot stat /proc/self/ns/pid: %s", strerror(errno));
		return RBP_EINVAL;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return RBP_ENOMEM;
	c->L = *L;
	c->m = (struct maps){ -1, -1, -1, -1 };
	c->stats_fd = -1;
	for (size_t i = 0; i < RBP_FRAMECAP_MAX_PROBES; i++)
		c->prog[i] = -1;
	if ((err = create_maps(c, rec_size, why, why_len)) || (err = open_rings(c, why, why_len)))
		goto fail;
	for (size_t i = 0; i < n_probes; i++, c->n_probes++) {
		struct prog p = { .n = 0 };
		build(&p, L, &c->m, (uint64_t)ns.st_dev, (uint64_t)ns.st_ino, (uint32_t)i,
		      arg_reg[i] < 3 ? arg_reg[i] : 0);
		if ((err = resolve(&p))) {
			snprintf(why, why_len, "internal error assembling the BPF program");
			goto fail;
		}
		if ((c->prog[i] = prog_load(&p, why, why_len)) < 0) {
			err = c->prog[i];
			goto fail;
		}
	}
	if ((err = rbp_framecap_set_pick(c, 0)))
		goto fail;
	*out = c;
	return RBP_OK;
fail:
	rbp_framecap_close(c);
	return err;
}

int rbp_framecap_prog_fd(const struct rbp_framecap *c, size_t probe)
{
	return probe < c->n_probes ? c->prog[probe] : -1;
}

int rbp_framecap_set_pick(struct rbp_framecap *c, uint32_t pick)
{
	uint32_t key = 0;

	return map_update(c->m.config, &key, &pick);
}

int rbp_framecap_set_threads(struct rbp_framecap *c, const pid_t *tids, const uint64_t *threads,
			     size_t n)
{
	pid_t *known;
	int err;

	for (size_t i = 0; i < c->n_known; i++) {
		size_t k = 0;
		while (k < n && tids[k] != c->known[i])
			k++;
		if (k == n)
			map_delete(c->m.threads, &c->known[i]);
	}
	c->n_known = 0;
	if (!(known = realloc(c->known, (n ? n : 1) * sizeof(*known))))
		return RBP_ENOMEM;
	c->known = known;
	for (size_t i = 0; i < n; i++) {
		uint32_t key = (uint32_t)tids[i];
		if ((err = map_update(c->m.threads, &key, &threads[i])))
			return err;
		c->known[c->n_known++] = tids[i];
	}
	return RBP_OK;
}

struct read_ctx {
	struct rbp_framecap *c;
	int (*fn)(void *ctx, const struct rbp_framecap_record *r);
	void *ctx;
};

/* One PERF_RECORD_SAMPLE of raw data: u32 size, then the bytes the program emitted. */
static int on_record(void *ctx, uint32_t type, void *body, size_t len)
{
	struct read_ctx *rc = ctx;
	struct rbp_framecap *c = rc->c;
	const uint8_t *b = body;
	uint32_t size, n, trunc;
	struct rbp_framecap_record r;

	if (type == PERF_RECORD_LOST && len >= 16) {
		uint64_t lost;
		memcpy(&lost, b + 8, 8);
		c->lost += lost;
		return 0;
	}
	if (type != PERF_RECORD_SAMPLE || len < 4)
		return 0;
	memcpy(&size, b, 4);
	b += 4;
	if (size > len - 4 || size < REC_HDR)
		return 0;
	memcpy(&n, b + REC_N, 4);
	memcpy(&trunc, b + REC_TRUNC, 4);
	if (n > RBP_FRAMECAP_MAX_FRAMES || REC_HDR + (size_t)n * (c->L.cfp_size + ENV_BYTES) > size)
		return 0;
	/* aligned copies for the reader (the raw data sits at offset 4 mod 8) */
	memmove(body, b, size);
	b = body;
	memset(&r, 0, sizeof(r));
	memcpy(&r.probe, b + REC_PROBE, 4);
	int32_t tid;
	memcpy(&tid, b + REC_TID, 4);
	r.tid = tid;
	memcpy(&r.time_ns, b + REC_TIME, 8);
	memcpy(&r.arg, b + REC_ARG, 8);
	memcpy(&r.cfp, b + REC_CFP, 8);
	r.n_frames = n;
	r.truncated = trunc != 0;
	r.frames = b + REC_HDR;
	r.env = (const uint64_t *)(const void *)(b + REC_HDR + (size_t)n * c->L.cfp_size);
	c->records++;
	return rc->fn(rc->ctx, &r);
}

int rbp_framecap_read(struct rbp_framecap *c,
		      int (*fn)(void *ctx, const struct rbp_framecap_record *r), void *ctx)
{
	struct read_ctx rc = { c, fn, ctx };
	size_t need = REC_HDR + RBP_FRAMECAP_MAX_FRAMES * (size_t)(c->L.cfp_size + ENV_BYTES) + 64;
	int err;

	if (!c->buf) {
		/* 8-byte aligned: env words are read in place */
		if (!(c->buf = aligned_alloc(8, (need + 7) & ~(size_t)7)))
			return RBP_ENOMEM;
		c->buf_cap = need;
	}
	for (size_t i = 0; i < c->n_cpus; i++)
		if (c->ring[i].base && (err = rbp_perf_ring_drain(&c->ring[i], c->buf, c->buf_cap,
								  on_record, &rc)))
			return err;
	return RBP_OK;
}

int rbp_framecap_enable_stats(struct rbp_framecap *c)
{
	union bpf_attr a;

	if (c->stats_fd >= 0)
		return RBP_OK;
	memset(&a, 0, sizeof(a));
	a.enable_stats.type = BPF_STATS_RUN_TIME;
	c->stats_fd = (int)sys_bpf(BPF_ENABLE_STATS, &a);
	return c->stats_fd < 0 ? rbp_perf_errno(errno) : RBP_OK;
}

void rbp_framecap_stats(const struct rbp_framecap *c, struct rbp_framecap_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->records = c->records;
	out->lost = c->lost;
	for (size_t i = 0; i < c->n_probes; i++) {
		struct bpf_prog_info info;
		union bpf_attr a;
		memset(&info, 0, sizeof(info));
		memset(&a, 0, sizeof(a));
		a.info.bpf_fd = (uint32_t)c->prog[i];
		a.info.info_len = sizeof(info);
		a.info.info = (uint64_t)(uintptr_t)&info;
		if (!sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a)) {
			out->runs += info.run_cnt;
			out->run_ns += info.run_time_ns;
		}
	}
}

void rbp_framecap_close(struct rbp_framecap *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_probes; i++)
		if (c->prog[i] >= 0)
			close(c->prog[i]);
	for (size_t i = 0; c->cpu_fd && i < c->n_cpus; i++) {
		if (c->ring)
			rbp_perf_ring_unmap(&c->ring[i]);
		if (c->cpu_fd[i] >= 0)
			close(c->cpu_fd[i]);
	}
	if (c->stats_fd >= 0)
		close(c->stats_fd);
	int maps[] = { c->m.threads, c->m.config, c->m.scratch, c->m.events };
	for (size_t i = 0; i < 4; i++)
		if (maps[i] >= 0)
			close(maps[i]);
	free(c->cpu_fd);
	free(c->ring);
	free(c->buf);
	free(c->known);
	free(c);
}
