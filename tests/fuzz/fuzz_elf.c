/*
 * fuzz_elf.c - the ELF reader (src/proc/elf.c) on mutated ELF files: open,
 * look symbols up in .dynsym and .symtab (the ones rbpeek asks for, and a
 * missing one), the build id, and reads by virtual address at every
 * segment's edges.  Seeds: a small shared object with both symbol tables.
 */
#include "fuzz.h"
#include "proc/elf.h"

static void read_segments(struct rbp_elf *e)
{
	uint8_t buf[64];
	uint64_t bias;

	for (size_t i = 0; i < rbp_elf_phnum(e) && i < 64; i++) {
		const struct rbp_elf_phdr *p = rbp_elf_phdr(e, i);
		rbp_elf_read_vaddr(e, p->vaddr, buf, sizeof(buf));
		rbp_elf_read_vaddr(e, p->vaddr + p->filesz - 8, buf, 8);
		rbp_elf_read_vaddr(e, p->vaddr + p->memsz - 1, buf, 2);
		rbp_elf_load_bias(e, 0x7f0000000000ull + p->vaddr, p->offset, &bias);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *names[] = {
		"ruby_version", "ruby_current_vm_ptr", "ruby_current_ec",
		"ruby_vm_at_exit", "rb_id2str", "ruby_global_symbols", "no such symbol", "",
	};
	struct rbp_elf *e;
	uint8_t id[64];
	size_t len;
	uint64_t vaddr, sz;

	if (rbp_elf_open(fuzz_file(data, size), &e))
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!rbp_elf_symbol(e, names[i], &vaddr, &sz))
			rbp_elf_read_vaddr(e, vaddr, id, sz < sizeof(id) ? (size_t)sz : sizeof(id));
	rbp_elf_has_symtab(e);
	rbp_elf_build_id(e, id, sizeof(id), &len);
	rbp_elf_base_vaddr(e);
	read_segments(e);
	rbp_elf_close(e);
	return 0;
}
