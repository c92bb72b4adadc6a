/*
 * fuzz_core.c - the core-file reader (src/proc/corefile.c) on mutated
 * cores: open (program headers, PT_NOTE: NT_PRSTATUS, NT_PRPSINFO,
 * NT_FILE), the memory map it builds, and reads at the edges of every
 * mapping, spanning segments and files.  Mapped files are looked up under
 * a sysroot that does not exist, so nothing outside the input is read.
 * Seeds: a gcore of a tiny static program with every segment cut to a few
 * bytes (tests/fuzz/mkseed-core.rb).
 */
#include "fuzz.h"
#include "proc/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rbp_target *t;
	uint8_t buf[256];

	if (rbp_target_open_core(fuzz_file(data, size), "/nonexistent-rbpeek-sysroot", &t))
		return 0;
	for (size_t i = 0; i < t->maps.n && i < 256; i++) {
		const struct rbp_mapping *m = &t->maps.v[i];
		rbp_read(t->mem, m->start, buf, 16);
		rbp_read(t->mem, m->end - 8, buf, 16);   /* across the end */
		rbp_read(t->mem, m->start + (m->end - m->start) / 2, buf, sizeof(buf));
		rbp_maps_find(&t->maps, m->start);
		rbp_maps_find(&t->maps, m->end);
	}
	rbp_read(t->mem, 0, buf, 8);
	rbp_read(t->mem, UINT64_MAX - 4, buf, 8);
	rbp_target_close(t);
	return 0;
}
