/*
 * dwarf_none.c - dwarf.h for a build without elfutils (make NATIVE=0,
 * what the gem does when libdw-dev is missing): no file has DWARF that
 * rbpeek can read, so every layout comes from the compiled tables
 * (layout_source.c takes RBP_EBADELF as "no DWARF here"), and
 * --layout dwarf is refused the way it is for a stripped Ruby.
 */
#include "proc/dwarf.h"
#include "util/err.h"

int rbp_dwarf_open(const char *path, struct rbp_dwarf **out)
{
	(void)path;
	*out = NULL;
	return RBP_EBADELF;
}

void rbp_dwarf_close(struct rbp_dwarf *d)
{
	(void)d;
}

int rbp_dwarf_debuglink(const char *path, char *name, size_t cap)
{
	(void)path;
	if (cap)
		name[0] = 0;
	return RBP_ENOSYM;
}

int rbp_dwarf_index(struct rbp_dwarf *d, const char *const *types, size_t n_types,
		    size_t n_required, const char *const *consts, size_t n_consts,
		    const char *const *hint_cus, size_t n_hints, size_t *units_read)
{
	(void)d, (void)types, (void)n_types, (void)n_required, (void)consts, (void)n_consts;
	(void)hint_cus, (void)n_hints;
	if (units_read)
		*units_read = 0;
	return RBP_EBADELF;
}

int rbp_dwarf_member(struct rbp_dwarf *d, const char *type, const char *path,
		     struct rbp_dwarf_member *out)
{
	(void)d, (void)type, (void)path, (void)out;
	return RBP_ENOSYM;
}

int rbp_dwarf_pointee_member(struct rbp_dwarf *d, const char *type, const char *path,
			     const char *sub, int64_t *off)
{
	(void)d, (void)type, (void)path, (void)sub, (void)off;
	return RBP_ENOSYM;
}

int rbp_dwarf_sizeof(struct rbp_dwarf *d, const char *type, uint64_t *size)
{
	(void)d, (void)type, (void)size;
	return RBP_ENOSYM;
}

int rbp_dwarf_const(struct rbp_dwarf *d, const char *name, int64_t *value)
{
	(void)d, (void)name, (void)value;
	return RBP_ENOSYM;
}
