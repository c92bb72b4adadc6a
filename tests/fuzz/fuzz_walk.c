/*
 * fuzz_walk.c - the Ruby stack walker (src/ruby/walk.c and everything it
 * calls: values, strings, class paths, iseqs, line tables) over mutated
 * memory images of real Ruby processes.
 *
 * An input is a memory image plus the few facts attach would have found
 * (see mkseed_walk.c, which writes seeds from live processes):
 *
 *   "RBPW"  version[32] (NUL padded, "3.1.2")  vm_addr u64  symbols u64
 *   pid u32  then segments until the end: addr u64, len u32, len bytes
 *
 * all little-endian.  The walker runs twice on the image (the second time
 * from its caches) as a core file target, so nothing outside the input is
 * consulted.  FUZZ_WALK_SHOW=1 prints what the walker saw (to check that a
 * seed gives real stacks: build-fuzz/fuzz_walk -runs=0 SEED).
 */
#include "fuzz.h"
#include "proc/target.h"
#include "ruby/internal.h"

#define HEADER (4 + 32 + 8 + 8 + 4)
#define MAX_SEGS 4096

/* Segments of the image, pointing into data; returns how many. */
static size_t parse_segments(const uint8_t *data, size_t size, struct rbp_image_segment *segs)
{
	size_t n = 0, at = HEADER;

	while (at + 12 <= size && n < MAX_SEGS) {
		uint64_t addr = fuzz_u64(data + at, 8);
		size_t len = fuzz_u32(data + at + 8, 4);
		at += 12;
		if (len > size - at)
			len = size - at;
		segs[n++] = (struct rbp_image_segment){ addr, data + at, len };
		at += len;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rbp_image_segment segs[MAX_SEGS];
	struct rbp_target t = { .is_core = 1 };
	struct rbp_stacks st = { 0 };
	char version[33] = { 0 };

	if (size < HEADER || memcmp(data, "RBPW", 4))
		return 0;
	memcpy(version, data + 4, 32);
	struct rbp_vm *vm = calloc(1, sizeof(*vm));
	if (!vm)
		abort();
	const struct rbp_layout *entry = rbp_layout_find(version);
	if (entry) {
		rbp_layout_use(&vm->layout, entry);
		vm->L = &vm->layout;
	}
	if (!vm->L || rbp_reader_open_image(segs, parse_segments(data, size, segs), &t.mem)) {
		free(vm);
		return 0;
	}
	t.pid = t.ns_pid = (pid_t)fuzz_u32(data + 52, 4);
	vm->t = &t;
	snprintf(vm->version, sizeof(vm->version), "%s", version);
	vm->vm_addr = fuzz_u64(data + 36, 8);
	vm->symbols_addr = fuzz_u64(data + 44, 8);
	rbp_vm_read_stacks(vm, &st);
	int err = rbp_vm_read_stacks(vm, &st);
	if (getenv("FUZZ_WALK_SHOW"))   /* to check a seed: what the walker saw */
		fprintf(stderr, "walk: %s, %zu threads, %zu frames, first %s\n", rbp_strerror(err),
			st.n_threads, st.n_frames, st.n_frames ? st.frames[0].label : "-");
	rbp_stacks_free(&st);
	rbp_vm_free(vm);
	rbp_reader_close(t.mem);
	return 0;
}
