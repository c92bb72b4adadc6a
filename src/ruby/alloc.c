/*
 * alloc.c - the allocation entry points of a Ruby build (see alloc.h for
 * which functions and why), as file offsets a uprobe can be placed at.
 */
#include "ruby/alloc.h"

#include <stdio.h>
#include <unistd.h>

#include "ruby/internal.h"
#include "proc/arch.h"

struct entry {
	const char *name;
	uint8_t klass_arg_old;   /* argument holding klass: RBP_NEWOBJ_KLASS */
	uint8_t klass_arg_new;   /* ... RBP_NEWOBJ_EC_KLASS (3.3+) */
};

static const struct entry entries[] = {
	{ "rb_wb_protected_newobj_of", 0, 1 },
	{ "rb_wb_unprotected_newobj_of", 0, 0 },
	{ "rb_ec_wb_protected_newobj_of", 1, 1 },
	{ "rb_newobj_of", 0, 0 },
	{ "rb_data_object_wrap", 0, 0 },
	{ "rb_data_typed_object_wrap", 0, 0 },
};

/*
 * 4.1+: rb_newobj_of, rb_ec_newobj_of and the T_DATA wrappers all end in
 * rb_newobj (through its PLT entry, even inside gc.c: they tail-call it),
 * and the wb_protected variants are gone; probing the others as well would
 * count each allocation twice.
 */
static const struct entry entries_one[] = {
	{ "rb_newobj", 1, 1 },
};

/* File offset of link-time address vaddr (inside a PT_LOAD's file bytes). */
static int vaddr_offset(const struct rbp_elf *e, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < rbp_elf_phnum(e); i++) {
		const struct rbp_elf_phdr *ph = rbp_elf_phdr(e, i);
		if (ph->type == 1 /* PT_LOAD */ && vaddr >= ph->vaddr &&
		    vaddr < ph->vaddr + ph->filesz) {
			*off = vaddr - ph->vaddr + ph->offset;
			return RBP_OK;
		}
	}
	return RBP_EFAULT;
}

/* ---- where in a function to put the breakpoint ----------------------- */

/*
 * The kernel emulates a probed push, call, jmp or conditional jump; any
 * other instruction is single-stepped out of line, which costs a second
 * trap: tens of microseconds in a KVM guest, against about one for an
 * emulated instruction.  Most of Ruby's allocation functions start with a
 * few plain instructions (sub $n,%rsp; loads; a stack-protector store)
 * before their first branch.  So rbpeek decodes the straight-line start
 * of each function, following which registers still hold the class
 * argument, and probes the first emulated instruction when the class is
 * then in %rdi, %rsi or %rdx (the registers a sample carries).  Every path
 * through the function executes that instruction: nothing before it
 * branches.  Anything the small decoder does not know ends the walk and
 * the probe stays on the function's first instruction.
 */

#define X86_RDX 2
#define X86_RSI 6
#define X86_RDI 7

struct insn {
	size_t len;
	int emulated;    /* push, call, jmp, jcc: the probe can go here */
	int dst;         /* register written, -1 none */
	int src;         /* register copied into dst (mov reg, reg), -1 none */
};

/* Bytes after the ModRM byte at c[0] (SIB, displacement); 0 for mod 3. */
static size_t modrm_extra(const uint8_t *c)
{
	unsigned mod = c[0] >> 6, rm = c[0] & 7;
	size_t n = 0;

	if (mod == 3)
		return 0;
	if (rm == 4) {
		n = 1;
		if (mod == 0 && (c[1] & 7) == 5)
			n += 4;   /* SIB without base: disp32 */
	} else if (mod == 0 && rm == 5) {
		n = 4;       /* RIP-relative */
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

/* Decode the instruction at c (at least 16 bytes); 0 when not known. */
static int decode(const uint8_t *c, struct insn *in)
{
	size_t i = 0, imm;
	unsigned rex = 0, op16 = 0;

	*in = (struct insn){ .dst = -1, .src = -1 };
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		return in->len = 4, 1;   /* endbr64 */
	for (; i < 3 && (c[i] == 0x66 || c[i] == 0x64 || c[i] == 0x65); i++)
		op16 |= c[i] == 0x66;
	if ((c[i] & 0xf0) == 0x40)
		rex = c[i++];
	uint8_t op = c[i++];
	imm = op16 ? 2 : 4;
	if ((op >= 0x50 && op <= 0x57) || op == 0xe8 || op == 0xe9 || op == 0xeb ||
	    (op >= 0x70 && op <= 0x7f) || (op == 0x0f && c[i] >= 0x80 && c[i] <= 0x8f))
		return in->emulated = 1, in->len = i, 1;
	if (op >= 0xb8 && op <= 0xbf) {   /* mov $imm, reg */
		in->dst = (op - 0xb8) | (rex & 1 ? 8 : 0);
		in->len = i + (rex & 8 ? 8 : imm);
		return 1;
	}
	const uint8_t *m = c + i;
	unsigned mod = m[0] >> 6, reg = ((m[0] >> 3) & 7) | (rex & 4 ? 8 : 0);
	unsigned rm = (m[0] & 7) | (rex & 1 ? 8 : 0);
	int rm_reg = mod == 3 ? (int)rm : -1;   /* rm names a register, not memory */
	in->len = i + 1 + modrm_extra(m);
	switch (op) {
	case 0x89:                                 /* mov reg, r/m */
		in->dst = rm_reg;
		in->src = rm_reg >= 0 && (rex & 8) ? (int)reg : -1;   /* 64-bit copies only */
		return 1;
	case 0x8b:                                 /* mov r/m, reg */
		in->dst = (int)reg;
		in->src = rex & 8 ? rm_reg : -1;
		return 1;
	case 0x8d: case 0x03: case 0x0b: case 0x23: case 0x2b: case 0x33:
		in->dst = (int)reg;                    /* lea, add/or/and/sub/xor into reg */
		return 1;
	case 0x01: case 0x09: case 0x21: case 0x29: case 0x31:
		in->dst = rm_reg;                      /* add/or/and/sub/xor into r/m */
		return 1;
	case 0x84: case 0x85:                      /* test */
		return 1;
	case 0x83: case 0x81: case 0xc7: case 0xf6: case 0xf7: {
		unsigned ext = (m[0] >> 3) & 7;
		in->len += op == 0x83 || op == 0xf6 ? 1 : imm;
		if ((op == 0xf6 || op == 0xf7) && ext != 0)
			return 0;                          /* not, neg, mul, div */
		if (op == 0xc7 && ext != 0)
			return 0;
		/* cmp (83/81 /7) and test (f6/f7 /0) write nothing */
		in->dst = (op == 0x83 || op == 0x81) && ext == 7 ? -1 :
			  op == 0xf6 || op == 0xf7 ? -1 : rm_reg;
		return 1;
	}
	default:
		return 0;
	}
}

/* Which of the sample's arguments (0 rdi, 1 rsi, 2 rdx) a register mask holds, or -1. */
static int arg_in(unsigned mask)
{
	return mask & 1u << X86_RDI ? 0 : mask & 1u << X86_RSI ? 1 : mask & 1u << X86_RDX ? 2 : -1;
}

size_t rbp_alloc_probe_point(const uint8_t *code, size_t len, uint8_t *klass_arg)
{
	unsigned mask = 1u << (*klass_arg == 0 ? X86_RDI : *klass_arg == 1 ? X86_RSI : X86_RDX);
	struct insn in;

	for (size_t i = 0, n = 0; i + 16 <= len && n < 24; i += in.len, n++) {
		if (!decode(code + i, &in) || !in.len)
			break;
		if (in.emulated) {
			int arg = arg_in(mask);
			if (arg < 0)
				break;
			*klass_arg = (uint8_t)arg;
			return i;
		}
		if (in.dst >= 0) {
			int copy = in.src >= 0 && (mask & 1u << in.src);
			mask &= ~(1u << in.dst);
			if (copy)
				mask |= 1u << in.dst;
		}
		if (!mask)
			break;
	}
	return 0;
}

/*
 * rbp_alloc_probe_point() for a function at file offset off of e.  The
 * decoder above is x86-64's; elsewhere (aarch64, whose kernel simulates
 * few instructions either) the probe stays on the first instruction.
 */
static uint64_t cheap_probe_point(struct rbp_elf *e, uint64_t off, uint8_t *klass_arg)
{
	uint8_t c[96];

	if (!RBP_ARCH_X86_64 || rbp_elf_pread(e, off, c, sizeof(c)))
		return off;
	return off + rbp_alloc_probe_point(c, sizeof(c), klass_arg);
}

/* The Ruby file as we can open it: through the target's root, else as mapped. */
static int probe_path(struct rbp_vm *vm, char *buf, size_t cap)
{
	const char *mapped = vm->info.ruby_path;

	if (!rbp_target_path(vm->t, mapped, buf, cap) && !access(buf, R_OK))
		return RBP_OK;
	if ((size_t)snprintf(buf, cap, "%s", mapped) >= cap || access(buf, R_OK))
		return RBP_ENOFILE;
	return RBP_OK;
}

/*
 * BasicObject's allocator (rb_class_allocate_instance) as a file offset.
 * It is a field of the classext (its offset varies: 88 in 3.0, 96 in
 * 3.1 - 3.3, in a union with attached_object from 3.3 on), and the only
 * one pointing into Ruby's code: the word of the classext's first 128
 * bytes that points into an executable mapping of the Ruby file, found
 * exactly once.
 */
static int basic_object_allocator(struct rbp_vm *vm, uint64_t *off)
{
	const struct rbp_mapping *m, *found = NULL;
	uint64_t vaddr, klass, ext, words[16], fn = 0;
	int err;

	if ((err = rbp_elf_symbol(vm->elf, "rb_cBasicObject", &vaddr, NULL)))
		return err;
	if ((err = rv_word(vm, vaddr + vm->info.ruby_bias, &klass)) ||
	    (err = rv_class_ext(vm, klass, &ext)) || (err = rv_read(vm, ext, words, sizeof(words))))
		return err;
	for (size_t i = 0; i < 16; i++) {
		m = rbp_maps_find(&vm->t->maps, words[i]);
		if (!m || !(m->prot & RBP_PROT_X) || !m->path || strcmp(m->path, vm->info.ruby_path))
			continue;
		if (found)
			return RBP_ECORRUPT;   /* two candidates: do not guess */
		found = m;
		fn = words[i];
	}
	if (!found)
		return RBP_ECORRUPT;
	*off = found->offset + (fn - found->start);
	return RBP_OK;
}

int rbp_alloc_probes(struct rbp_vm *vm, struct rbp_alloc_probe *out, size_t cap, size_t *n)
{
	const struct rbp_layout *L = vm->L;
	int newer = L->shape.newobj != RBP_NEWOBJ_KLASS;
	int one = L->shape.newobj == RBP_NEWOBJ_ONE;
	const struct entry *ents = one ? entries_one : entries;
	size_t n_ents = one ? sizeof(entries_one) / sizeof(entries_one[0]) :
			sizeof(entries) / sizeof(entries[0]);
	char path[sizeof(out->path)];
	uint64_t vaddr, off;
	int err;

	*n = 0;
	if ((err = probe_path(vm, path, sizeof(path))))
		return err;
	for (size_t i = 0; i < n_ents && *n < cap; i++) {
		if (rbp_elf_symbol(vm->elf, ents[i].name, &vaddr, NULL) ||
		    vaddr_offset(vm->elf, vaddr, &off))
			continue;
		struct rbp_alloc_probe *p = &out[(*n)++];
		p->name = ents[i].name;
		memcpy(p->path, path, sizeof(path));
		p->klass_arg = newer ? ents[i].klass_arg_new : ents[i].klass_arg_old;
		p->offset = cheap_probe_point(vm->elf, off, &p->klass_arg);
	}
	if (!*n)
		return RBP_ENOPROBE;   /* nothing exported: not a build we can watch */
	/* 3.0 - 3.3: rb_class_allocate_instance is in gc.c, not exported */
	if (L->shape.allocator == RBP_ALLOCATOR_IN_GC && *n < cap) {
		if ((err = basic_object_allocator(vm, &off)))
			return err == RBP_ENOPROC ? err : RBP_ENOPROBE;
		struct rbp_alloc_probe *p = &out[(*n)++];
		p->name = "rb_class_allocate_instance";
		memcpy(p->path, path, sizeof(path));
		p->klass_arg = 0;
		p->offset = cheap_probe_point(vm->elf, off, &p->klass_arg);
	}
	return RBP_OK;
}

const char *rbp_alloc_class_name(struct rbp_vm *vm, uint64_t klass)
{
	const char *name;

	if (!klass)
		return "(hidden)";
	if (rv_class_path(vm, klass, &name) || !*name)
		return "(anonymous)";
	return name;
}
