#include "ruby/linetable.h"

#include <string.h>

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

unsigned rbp_succ_rank(const uint8_t *bytes, int x)
{
	if (x < 0)
		return 0;
	if (x < RBP_SUCC_IMM_POSITIONS) {
		/* 9 ranks of 7 bits in one word */
		return (unsigned)(load64(bytes) >> ((x % 9) * 7)) & 0x7f;
	}
	int bit = (x - RBP_SUCC_IMM_POSITIONS) % RBP_SUCC_BLOCK_POSITIONS;
	int small = bit / 64;
	uint32_t rank;
	memcpy(&rank, bytes, 4);
	uint64_t small_ranks = load64(bytes + 8);
	unsigned small_rank = small ? (unsigned)(small_ranks >> ((small - 1) * 9)) & 0x1ff : 0;
	uint64_t word = load64(bytes + 16 + 8 * small);
	/* bits at positions <= bit within this 64-bit word */
	unsigned pop = (unsigned)__builtin_popcountll(word << (63 - bit % 64));
	return rank + small_rank + pop;
}
