/*
 * alloc.c - the allocation entry points of a Ruby build (see alloc.h for
 * which functions and why), as file offsets a uprobe can be placed at.
 */
#include "ruby/alloc.h"

#include <stdio.h>
#include <unistd.h>

#include "ruby/internal.h"

struct entry {
	const char *name;
	uint8_t klass_arg_old;   /* argument holding klass before 3.3 */
	uint8_t klass_arg_new;   /* ... from 3.3 on */
};

static const struct entry entries[] = {
	{ "rb_wb_protected_newobj_of", 0, 1 },
	{ "rb_wb_unprotected_newobj_of", 0, 0 },
	{ "rb_ec_wb_protected_newobj_of", 1, 1 },
	{ "rb_newobj_of", 0, 0 },
	{ "rb_data_object_wrap", 0, 0 },
	{ "rb_data_typed_object_wrap", 0, 0 },
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

/*
 * Where in a function to put the breakpoint.  The kernel emulates a probed
 * push, jmp or call; any other instruction is single-stepped out of line,
 * which costs a second trap: tens of microseconds in a KVM guest, against
 * about one for an emulated instruction.  So the probe goes on the first
 * such instruction when only instructions that leave the class argument
 * alone come before it: endbr64, and "mov $imm32, reg" into another
 * register (rb_class_allocate_instance in 3.3 is endbr64; two of those;
 * jmp).  Otherwise it stays on the function's first instruction.
 */
static uint64_t cheap_probe_point(struct rbp_elf *e, uint64_t off, uint8_t klass_arg)
{
	unsigned klass_reg = klass_arg ? 6 : 7;   /* x86 register number of rsi / rdi */
	uint8_t c[32];
	size_t i = 0;

	if (rbp_elf_pread(e, off, c, sizeof(c)))
		return off;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		i = 4;
	for (int n = 0; n < 4 && i + 6 <= sizeof(c); n++) {
		uint8_t b = c[i];
		if ((b >= 0x50 && b <= 0x57) || (b == 0x41 && c[i + 1] >= 0x50 && c[i + 1] <= 0x57) ||
		    b == 0xe8 || b == 0xe9 || b == 0xeb)
			return off + i;
		if (b >= 0xb8 && b <= 0xbf && (unsigned)(b - 0xb8) != klass_reg)
			i += 5;   /* mov $imm32, %e?? (not the class's register) */
		else if (b == 0x41 && c[i + 1] >= 0xb8 && c[i + 1] <= 0xbf)
			i += 6;   /* mov $imm32, %r8d..%r15d */
		else
			break;
	}
	return off;
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

/* 3.0 - 3.3: rb_class_allocate_instance is in gc.c, not exported. */
static int allocator_in_gc(const struct rbp_layout *L)
{
	return L->major == 3 && L->minor <= 3;
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
	int newer = L->major > 3 || (L->major == 3 && L->minor >= 3);
	char path[sizeof(out->path)];
	uint64_t vaddr, off;
	int err;

	*n = 0;
	if ((err = probe_path(vm, path, sizeof(path))))
		return err;
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]) && *n < cap; i++) {
		if (rbp_elf_symbol(vm->elf, entries[i].name, &vaddr, NULL) ||
		    vaddr_offset(vm->elf, vaddr, &off))
			continue;
		struct rbp_alloc_probe *p = &out[(*n)++];
		p->name = entries[i].name;
		memcpy(p->path, path, sizeof(path));
		p->klass_arg = newer ? entries[i].klass_arg_new : entries[i].klass_arg_old;
		p->offset = cheap_probe_point(vm->elf, off, p->klass_arg);
	}
	if (!*n)
		return RBP_ENOPROBE;   /* nothing exported: not a build we can watch */
	if (allocator_in_gc(L) && *n < cap) {
		if ((err = basic_object_allocator(vm, &off)))
			return err == RBP_ENOPROC ? err : RBP_ENOPROBE;
		struct rbp_alloc_probe *p = &out[(*n)++];
		p->name = "rb_class_allocate_instance";
		memcpy(p->path, path, sizeof(path));
		p->klass_arg = 0;
		p->offset = cheap_probe_point(vm->elf, off, 0);
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
