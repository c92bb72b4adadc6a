/*
 * iseq.c - instruction sequences: what method/block a frame runs, where it
 * was defined, and which line a pc is on.
 *
 * An iseq's identity data (path, labels, first line, line table location)
 * never changes once compiled, so it is read once and cached by the iseq's
 * address; (iseq, pc) -> line is cached too, so a hot loop costs no reads
 * after its first sample.  An iseq collected by the GC whose address is
 * reused by a new iseq would keep the old entry: rv_iseq_at() checks each
 * frame's pc against the cached bytecode range (every iseq's bytecode is a
 * buffer of its own) and reloads the entry when the pc falls outside it.
 * Labels and lines are decoded after the frames were copied (a paused
 * read has let the target go by then), so that check also catches an
 * iseq freed and replaced between the copy and the decode: the frame is
 * then dropped (RBP_ETORN), never labelled with the newcomer.
 */
#include "ruby/internal.h"

#include <stdlib.h>

#include "ruby/linetable.h"
#include "util/vec.h"

/* Bytes of the iseq body we need: up to the last field we read. */
static size_t body_span(const struct rbp_layout *L)
{
	int16_t offs[] = {
		L->iseq_body.type, L->iseq_body.iseq_size, L->iseq_body.iseq_encoded,
		L->iseq_body.location_pathobj, L->iseq_body.location_base_label,
		L->iseq_body.location_label, L->iseq_body.location_first_lineno,
		L->iseq_body.insns_info_body, L->iseq_body.insns_info_positions,
		L->iseq_body.insns_info_size, L->iseq_body.insns_info_succ,
	};
	int16_t max = 0;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] > max)
			max = offs[i];
	return (size_t)max + 8;
}

/* Path of an iseq from location.pathobj: realpath when known, else path. */
static int iseq_path(struct rbp_vm *vm, uint64_t pathobj, const char **out)
{
	const struct rbp_layout *L = vm->L;
	uint64_t real, first;
	int type = rv_type(vm, pathobj, NULL);

	if (type == L->value.t_string)
		return rv_string_intern(vm, pathobj, out);
	if (type != L->value.t_array)
		return RBP_ECORRUPT;
	if (!rv_array_get(vm, pathobj, 1, &real) && rv_type(vm, real, NULL) == L->value.t_string)
		return rv_string_intern(vm, real, out);
	if (rv_array_get(vm, pathobj, 0, &first))
		return RBP_ECORRUPT;
	return rv_string_intern(vm, first, out);
}

/* Read an iseq's identity from the target (no cache). */
static int iseq_load(struct rbp_vm *vm, uint64_t iseq, struct rv_iseq *out)
{
	const struct rbp_layout *L = vm->L;
	uint8_t body[1024];
	uint64_t flags, body_addr;
	size_t span = body_span(L);
	int err;

	if (span > sizeof(body))
		return RBP_EINVAL;
	if (rv_type(vm, iseq, &flags) != L->value.t_imemo ||
	    ((flags >> L->value.fl_ushift) & L->imemo.mask) != L->imemo.iseq)
		return RBP_ECORRUPT;
	if ((err = rv_word(vm, iseq + L->iseq.body, &body_addr)) ||
	    (err = rv_read(vm, body_addr, body, span)))
		return err;
	memset(out, 0, sizeof(*out));
	out->type = (uint8_t)rv_u32(body, L->iseq_body.type);
	if (L->shape.first_lineno == RBP_FIRST_LINENO_INT)
		out->first_lineno = (int32_t)rv_u32(body, L->iseq_body.location_first_lineno);
	else
		out->first_lineno = (int32_t)((int64_t)rv_u64(body, L->iseq_body.location_first_lineno) >> 1);
	out->iseq_encoded = rv_u64(body, L->iseq_body.iseq_encoded);
	out->body = body_addr;
	out->iseq_size = rv_u32(body, L->iseq_body.iseq_size);
	out->insns_body = rv_u64(body, L->iseq_body.insns_info_body);
	out->insns_positions = L->shape.insns_info != RBP_INSNS_INFO_PLAIN ?
		rv_u64(body, L->iseq_body.insns_info_positions) : 0;
	out->insns_succ = L->shape.insns_info == RBP_INSNS_INFO_SUCC ?
		rv_u64(body, L->iseq_body.insns_info_succ) : 0;
	out->insns_size = rv_u32(body, L->iseq_body.insns_info_size);
	if ((err = iseq_path(vm, rv_u64(body, L->iseq_body.location_pathobj), &out->path)) ||
	    (err = rv_string_intern(vm, rv_u64(body, L->iseq_body.location_label), &out->label)) ||
	    (err = rv_string_intern(vm, rv_u64(body, L->iseq_body.location_base_label),
				    &out->base_label)))
		return err;
	return RBP_OK;
}

int rv_iseq(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq **out)
{
	uint64_t idx;
	int err;

	if (rbp_hmap_get(&vm->iseq_index, iseq, &idx)) {
		*out = &vm->iseqs[idx - 1];
		return RBP_OK;
	}
	if ((err = rbp_grow(&vm->iseqs, &vm->cap_iseqs, vm->n_iseqs + 1, sizeof(*vm->iseqs))))
		return err;
	if ((err = iseq_load(vm, iseq, &vm->iseqs[vm->n_iseqs])))
		return err;
	if ((err = rbp_hmap_put(&vm->iseq_index, iseq, ++vm->n_iseqs)))
		return err;
	*out = &vm->iseqs[vm->n_iseqs - 1];
	return RBP_OK;
}

static int pc_in(const struct rv_iseq *info, uint64_t pc)
{
	return pc >= info->iseq_encoded && !((pc - info->iseq_encoded) % 8) &&
	       (pc - info->iseq_encoded) / 8 <= info->iseq_size;
}

int rv_iseq_at(struct rbp_vm *vm, uint64_t iseq, uint64_t pc, const struct rv_iseq **out)
{
	struct rv_iseq fresh;
	uint64_t idx;
	int err;

	if ((err = rv_iseq(vm, iseq, out)))
		return err;
	if (!pc || pc_in(*out, pc))
		return RBP_OK;
	/* the cached iseq's address may hold another now: read it again */
	if ((err = iseq_load(vm, iseq, &fresh)) || !pc_in(&fresh, pc))
		return err == RBP_ENOMEM ? err : RBP_ETORN;
	vm->stats.iseq_reloads++;
	rbp_hmap_get(&vm->iseq_index, iseq, &idx);
	vm->iseqs[idx - 1] = fresh;
	*out = &vm->iseqs[idx - 1];
	return RBP_OK;
}

/* insn_info index of position pos through the positions array (pre-2.6 style). */
static int index_by_positions(struct rbp_vm *vm, const struct rv_iseq *info,
			      uint64_t pos, unsigned *idx)
{
	unsigned lo = 0, hi = info->insns_size;   /* find last i: positions[i] <= pos */
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;
		uint32_t p;
		int err = rv_read(vm, info->insns_positions + 4ull * mid, &p, 4);
		if (err)
			return err;
		if (p <= pos)
			lo = mid;
		else
			hi = mid;
	}
	*idx = lo;
	return RBP_OK;
}

/* insn_info index of position pos through the succinct bit vector. */
static int index_by_succ(struct rbp_vm *vm, const struct rv_iseq *info,
			 uint64_t pos, unsigned *idx)
{
	uint8_t bytes[RBP_SUCC_BLOCK_BYTES];
	uint64_t off;
	unsigned len;
	int err;

	rbp_succ_span((int)pos, &off, &len);
	if ((err = rv_read(vm, info->insns_succ + off, bytes, len)))
		return err;
	*idx = rbp_insn_index(rbp_succ_rank(bytes, (int)pos), info->insns_size);
	return RBP_OK;
}

/* The line of pc in an iseq, uncached. */
static int line_of(struct rbp_vm *vm, const struct rv_iseq *info, uint64_t pc,
		   int32_t *line)
{
	const struct rbp_layout *L = vm->L;
	unsigned idx = 0;
	int32_t l;
	int err;

	if (!pc) {
		*line = info->type == L->iseq_type.top ? 0 : info->first_lineno;
		return RBP_OK;
	}
	if (pc < info->iseq_encoded || (pc - info->iseq_encoded) % 8 ||
	    (pc - info->iseq_encoded) / 8 > info->iseq_size)
		return RBP_ECORRUPT;
	uint64_t pos = (pc - info->iseq_encoded) / 8;
	if (pos)
		pos--;  /* pc already points at the next instruction */
	if (info->insns_size == 0 || info->insns_size > (1u << 24))
		return RBP_ECORRUPT;
	if (info->insns_size > 1) {
		if (info->insns_positions)
			err = index_by_positions(vm, info, pos, &idx);
		else if (info->insns_succ)
			err = index_by_succ(vm, info, pos, &idx);
		else
			err = RBP_ECORRUPT;
		if (err)
			return err;
	}
	if ((err = rv_read(vm, info->insns_body + (uint64_t)idx * L->insn_info.size +
			   L->insn_info.line_no, &l, 4)))
		return err;
	*line = l;
	return RBP_OK;
}

int rv_iseq_line(struct rbp_vm *vm, uint64_t iseq, const struct rv_iseq *info,
		 uint64_t pc, int32_t *line)
{
	uint64_t key = rbp_mix64(iseq, pc), cached;
	int err;

	if (rbp_hmap_get(&vm->lines, key, &cached)) {
		vm->stats.line_cache_hits++;
		*line = (int32_t)cached;
		return RBP_OK;
	}
	vm->stats.line_cache_misses++;
	if ((err = line_of(vm, info, pc, line)))
		return err;
	rbp_hmap_put(&vm->lines, key, (uint64_t)(uint32_t)*line);
	return RBP_OK;
}
