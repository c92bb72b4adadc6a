/*
 * The line-table decoder against an encoder written here from the format's
 * description (rank(x) = number of entry starts at positions <= x), on
 * random position sets of many sizes, including ones crossing the
 * immediate part and several 512-position blocks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ruby/label.h"
#include "ruby/linetable.h"

/* Encode sorted positions into the succinct table layout; returns bytes. */
static uint8_t *encode(const int *pos, int n, int max_pos, size_t *size)
{
	int blocks = max_pos < RBP_SUCC_IMM_POSITIONS ? 0 :
		     (max_pos - RBP_SUCC_IMM_POSITIONS + 512) / 512;
	*size = RBP_SUCC_IMM_BYTES + (size_t)blocks * RBP_SUCC_BLOCK_BYTES;
	uint8_t *t = calloc(1, *size);
	int r = 0;

	for (int x = 0; x < RBP_SUCC_IMM_POSITIONS; x++) {
		while (r < n && pos[r] <= x)
			r++;
		uint64_t w;
		memcpy(&w, t + (x / 9) * 8, 8);
		w |= (uint64_t)r << (7 * (x % 9));
		memcpy(t + (x / 9) * 8, &w, 8);
	}
	for (int b = 0; b < blocks; b++) {
		uint8_t *blk = t + RBP_SUCC_IMM_BYTES + b * RBP_SUCC_BLOCK_BYTES;
		uint32_t rank = (uint32_t)r;
		uint64_t small = 0;
		int in_block = 0;
		memcpy(blk, &rank, 4);
		for (int j = 0; j < 8; j++) {
			uint64_t bits = 0;
			if (j)
				small |= (uint64_t)in_block << (9 * (j - 1));
			for (int i = 0; i < 64; i++) {
				int x = RBP_SUCC_IMM_POSITIONS + b * 512 + j * 64 + i;
				if (r < n && pos[r] == x) {
					bits |= 1ull << i;
					r++;
					in_block++;
				}
			}
			memcpy(blk + 16 + 8 * j, &bits, 8);
		}
		memcpy(blk + 8, &small, 8);
	}
	return t;
}

static int check_random(unsigned seed, int max_pos, int density)
{
	int *pos = malloc(sizeof(int) * (size_t)(max_pos + 1)), n = 0, bad = 0;
	size_t size;

	srand(seed);
	pos[n++] = 0;   /* the first entry always starts at 0 */
	for (int x = 1; x <= max_pos; x++)
		if (rand() % density == 0)
			pos[n++] = x;
	uint8_t *t = encode(pos, n, max_pos, &size);
	for (int x = 0, expect = 0; x <= max_pos; x++) {
		while (expect < n && pos[expect] <= x)
			expect++;
		uint64_t off;
		unsigned len;
		rbp_succ_span(x, &off, &len);
		if (off + len > size || rbp_succ_rank(t + off, x) != (unsigned)expect)
			bad++;
	}
	free(t);
	free(pos);
	return bad;
}

int main(void)
{
	TEST("rank in the immediate part") {
		CHECK_EQ_INT(check_random(1, 20, 3), 0);
		CHECK_EQ_INT(check_random(2, 53, 2), 0);
	}
	TEST("rank across blocks") {
		CHECK_EQ_INT(check_random(3, 600, 5), 0);
		CHECK_EQ_INT(check_random(4, 5000, 7), 0);
		CHECK_EQ_INT(check_random(5, 5000, 1), 0);    /* every position */
		CHECK_EQ_INT(check_random(6, 3000, 400), 0);  /* sparse */
	}
	TEST("insn index clamps") {
		CHECK_EQ_INT(rbp_insn_index(0, 5), 0);
		CHECK_EQ_INT(rbp_insn_index(1, 5), 0);
		CHECK_EQ_INT(rbp_insn_index(5, 5), 4);
		CHECK_EQ_INT(rbp_insn_index(99, 5), 4);
	}
	TEST("label qualification") {
		char buf[64];
		CHECK_EQ_INT(rbp_label_qualify("baz", "baz", "Foo::Bar#", buf, sizeof(buf)), 0);
		CHECK_EQ_STR(buf, "Foo::Bar#baz");
		CHECK_EQ_INT(rbp_label_qualify("block (2 levels) in baz", "baz", "Foo.", buf,
					       sizeof(buf)), 0);
		CHECK_EQ_STR(buf, "block (2 levels) in Foo.baz");
		CHECK_EQ_INT(rbp_label_qualify("rescue in grüße", "grüße", "Ü#", buf, sizeof(buf)), 0);
		CHECK_EQ_STR(buf, "rescue in Ü#grüße");
		CHECK_EQ_INT(rbp_label_qualify("<main>", "baz", "X#", buf, sizeof(buf)), -1);
		CHECK_EQ_STR(buf, "<main>");
		CHECK_EQ_INT(rbp_label_qualify("block in baz", "baz", "AVeryLongPrefix#", buf, 16), -1);
		CHECK_EQ_STR(buf, "block in baz");
		CHECK_EQ_INT(rbp_label_qualify("x", "xyz", "A#", buf, sizeof(buf)), -1);
	}
	return harness_report();
}
