/*
 * dwarf.h - just enough of a file's DWARF debug information to answer
 * "where is member M of type T, how big is T, what is constant C", with
 * elfutils' libdw.  Knows nothing of what the types mean.
 *
 * The workload: a big library built with -ggdb3 carries tens of MB of
 * DWARF in hundreds of compile units, each repeating the types of the
 * headers it includes; a caller needs a few dozen named types and
 * constants.  So the caller names everything it wants up front
 * (rbp_dwarf_index), and one pass over the top-level entries of the
 * compile units finds them: the units named in a hint list first (where
 * the caller expects them), the rest only while a *required* type is still
 * missing (an optional type - one that exists only in some versions - or a
 * constant not found in the hinted units is taken as absent; when no unit
 * matches a hint, every type is looked for in every unit).  Children
 * of functions are never visited.  Queries afterwards walk only the found
 * types' own members.
 *
 * Names: "struct X" and "union X" name a tagged definition (never a mere
 * declaration), a bare "X" a typedef.  Constants are enumerators, or
 * variables with a constant value (`static const int X = 512`).
 * Member paths are dotted ("threads.sched.running"); a component is
 * looked for through unnamed struct/union members too, the way C finds
 * members of anonymous structs.
 *
 * Errors are values: RBP_ENOSYM for a name, member or constant that is not
 * there, RBP_EBADELF for a file without DWARF or DWARF libdw cannot read.
 */
#ifndef RBP_PROC_DWARF_H
#define RBP_PROC_DWARF_H

#include <stddef.h>
#include <stdint.h>

struct rbp_dwarf;

/* Open the DWARF of an ELF file: RBP_ENOFILE, RBP_EBADELF (no .debug_info). */
int rbp_dwarf_open(const char *path, struct rbp_dwarf **out);
void rbp_dwarf_close(struct rbp_dwarf *d);
/*
 * The file name an ELF file's .gnu_debuglink section names (the stripped
 * file's separate debug file, "libruby.so.3.3.debug") into name;
 * RBP_ENOSYM when it has none, RBP_ENOFILE / RBP_EBADELF.
 */
int rbp_dwarf_debuglink(const char *path, char *name, size_t cap);

/*
 * Find the named types and constants (see the top of this file) in one
 * pass; the first n_required types are required, the others optional;
 * hint_cus are compile unit names matched by their end ("vm.c"
 * matches "/build/ruby/vm.c" and "vm.c", but not "dmyvm.c").  The arrays
 * and their strings are not copied: they must outlive d's queries.
 * Returns RBP_OK even when some names are missing (queries say which);
 * *units_read, when not NULL, gets the number of compile units visited.
 */
int rbp_dwarf_index(struct rbp_dwarf *d, const char *const *types, size_t n_types,
		    size_t n_required, const char *const *consts, size_t n_consts,
		    const char *const *hint_cus, size_t n_hints, size_t *units_read);

/* A member found by rbp_dwarf_member(). */
struct rbp_dwarf_member {
	int64_t offset;      /* bytes from the start of the type */
	uint64_t size;       /* bytes of its type (the storage unit's for a bitfield) */
	uint32_t bit_offset; /* bitfields: bits from the start of the type */
	uint32_t bit_size;   /* bitfields: width; 0 for an ordinary member */
	uint8_t is_pointer;  /* its type (typedefs and qualifiers stripped) is a pointer */
};

/* Where member path lives in an indexed type; RBP_ENOSYM when absent. */
int rbp_dwarf_member(struct rbp_dwarf *d, const char *type, const char *path,
		     struct rbp_dwarf_member *out);
/*
 * The offset of member sub in the struct that member path of type points
 * to ("sorted" is a pointer to a struct with a member "data"); RBP_ENOSYM
 * when path is not a pointer to a struct with sub.
 */
int rbp_dwarf_pointee_member(struct rbp_dwarf *d, const char *type, const char *path,
			     const char *sub, int64_t *off);
/* sizeof an indexed type; RBP_ENOSYM when absent. */
int rbp_dwarf_sizeof(struct rbp_dwarf *d, const char *type, uint64_t *size);
/* The value of an indexed constant; RBP_ENOSYM when absent. */
int rbp_dwarf_const(struct rbp_dwarf *d, const char *name, int64_t *value);

#endif
