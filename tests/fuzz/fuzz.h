/*
 * fuzz.h - shared by the libFuzzer targets in tests/fuzz/.
 *
 * Each target is a file fuzz_<name>.c defining LLVMFuzzerTestOneInput();
 * `make fuzz-build` links them with -fsanitize=fuzzer,address,undefined
 * into build-fuzz/fuzz_<name>, tests/run runs each for a bounded time on
 * its committed seeds (tests/fuzz/seeds/<name>/), `make fuzz` for longer.
 *
 * Readers that take a path (ELF, core and raw files) get the input through
 * one memory file (memfd) rewritten for every input and opened by its
 * /proc/self/fd path, so a run touches no disk.
 */
#ifndef RBP_TESTS_FUZZ_H
#define RBP_TESTS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The input as a file: its path (valid until the next call). */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];

	if (fd < 0) {
		fd = memfd_create("rbpeek-fuzz", 0);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("fuzz input");
		abort();
	}
	return path;
}

/* Little-endian integers from the input, 0 past its end. */
static inline uint64_t fuzz_u64(const uint8_t *p, size_t avail)
{
	uint64_t v = 0;
	for (size_t i = 0; i < 8 && i < avail; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint32_t fuzz_u32(const uint8_t *p, size_t avail)
{
	uint32_t v = 0;
	for (size_t i = 0; i < 4 && i < avail; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

#endif
