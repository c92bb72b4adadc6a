/*
 * elf.h - just enough of ELF64 to find symbols and read a file's bytes by
 * link-time virtual address.  The file is read with pread; nothing is
 * trusted: every offset and size is bounds-checked against the file size,
 * so a corrupt or hostile file gives RBP_EBADELF, never a crash.
 */
#ifndef RBP_PROC_ELF_H
#define RBP_PROC_ELF_H

#include <stddef.h>
#include <stdint.h>

struct rbp_elf;

/* Open an ELF64 little-endian file (ET_EXEC, ET_DYN or ET_CORE). */
int rbp_elf_open(const char *path, struct rbp_elf **out);
/*
 * Open a file the target controls (a path from its maps, under its root,
 * a core's sysroot) for reading, safely: O_NONBLOCK at open, so that a
 * FIFO or a device planted there can never block rbpeek (and a paused
 * target with it), then refused unless it is a regular file; the
 * descriptor is blocking again for reads.  Returns the fd, or -1 with
 * errno set (EINVAL for a file that is not regular).
 */
int rbp_open_regular(const char *path);
void rbp_elf_close(struct rbp_elf *e);

/*
 * Look a symbol up by exact name, in .dynsym first and then .symtab.
 * *vaddr is the link-time address (add the load bias for a runtime one);
 * *size may be NULL.  For STT_TLS symbols *vaddr is the offset in the TLS
 * block.  RBP_ENOSYM when absent.
 */
int rbp_elf_symbol(struct rbp_elf *e, const char *name, uint64_t *vaddr,
		   uint64_t *size);
/* 1 when the file has a (non-empty) .symtab section. */
int rbp_elf_has_symtab(const struct rbp_elf *e);

/*
 * The GNU build-id (NT_GNU_BUILD_ID note) into buf; *len its length.
 * RBP_ENOSYM when the file has none.
 */
int rbp_elf_build_id(struct rbp_elf *e, uint8_t *buf, size_t cap, size_t *len);

/* Lowest PT_LOAD p_vaddr rounded down to its alignment (0 for most DSOs). */
uint64_t rbp_elf_base_vaddr(const struct rbp_elf *e);
/*
 * Read len bytes at link-time address vaddr from the file contents of a
 * PT_LOAD segment (fails with RBP_EFAULT for bss / outside segments).
 */
int rbp_elf_read_vaddr(struct rbp_elf *e, uint64_t vaddr, void *buf,
		       size_t len);

/*
 * Load bias of a file mapped in a process: given the mappings of that file
 * (start, file offset), bias = runtime address - link-time address.
 */
int rbp_elf_load_bias(const struct rbp_elf *e, uint64_t map_start,
		      uint64_t map_offset, uint64_t *bias);

/* Raw access for the core-file reader. */
struct rbp_elf_phdr {
	uint32_t type, flags;
	uint64_t offset, vaddr, filesz, memsz, align;
};
size_t rbp_elf_phnum(const struct rbp_elf *e);
const struct rbp_elf_phdr *rbp_elf_phdr(const struct rbp_elf *e, size_t i);
int rbp_elf_type(const struct rbp_elf *e);       /* e_type: 2 EXEC, 3 DYN, 4 CORE */
int rbp_elf_pread(struct rbp_elf *e, uint64_t off, void *buf, size_t len);
uint64_t rbp_elf_file_size(const struct rbp_elf *e);

#endif
