/*
 * linetable.h - which line an instruction belongs to.
 *
 * Each iseq keeps a table of insn_info entries (line number, events) and,
 * for each entry, the instruction position where it starts.  Since Ruby
 * 2.6 those positions are stored as a succinct bit vector (a bit set at
 * every position that starts an entry, plus precomputed ranks) instead of
 * an array.  The entry for position x is rank(x) - 1, where rank(x) counts
 * the set bits at positions <= x.  rbspy never decoded this and so reported
 * a method's last line; we decode it.
 *
 * Memory shape of the table (iseq.c's struct succ_index_table, unchanged
 * from 2.6 to 3.4): 6 uint64_t words of "immediate" ranks covering
 * positions 0..53 (9 ranks of 7 bits each per word), then blocks of 512
 * positions: { uint32 rank; uint64 small_block_ranks (7 x 9 bits);
 * uint64 bits[8]; } (80 bytes each, rank padded to 8).
 */
#ifndef RBP_RUBY_LINETABLE_H
#define RBP_RUBY_LINETABLE_H

#include <stdint.h>

#define RBP_SUCC_IMM_POSITIONS 54     /* positions covered by the immediate part */
#define RBP_SUCC_IMM_BYTES 48         /* 6 words */
#define RBP_SUCC_BLOCK_BYTES 80
#define RBP_SUCC_BLOCK_POSITIONS 512

/* Where the bytes needed to look up position x start and how many there are. */
static inline void rbp_succ_span(int x, uint64_t *off, unsigned *len)
{
	if (x < RBP_SUCC_IMM_POSITIONS) {
		*off = (uint64_t)(x / 9) * 8;
		*len = 8;
	} else {
		*off = RBP_SUCC_IMM_BYTES + (uint64_t)((x - RBP_SUCC_IMM_POSITIONS) /
				RBP_SUCC_BLOCK_POSITIONS) * RBP_SUCC_BLOCK_BYTES;
		*len = RBP_SUCC_BLOCK_BYTES;
	}
}

/*
 * rank(x), given the bytes rbp_succ_span() named for x (little endian, as
 * read from the target).
 */
unsigned rbp_succ_rank(const uint8_t *bytes, int x);

/*
 * The insn_info index for instruction position pos, given the table's
 * number of entries and the decoded rank: clamps to [0, size-1].
 */
static inline unsigned rbp_insn_index(unsigned rank, unsigned size)
{
	if (rank == 0)
		return 0;
	return rank - 1 < size ? rank - 1 : size - 1;
}

#endif
