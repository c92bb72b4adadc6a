/*
 * layout_dwarf.h - a struct rbp_layout read from a Ruby build's own DWARF
 * debug information, at run time, instead of a compiled table.
 *
 * Every offset, size and bitfield comes from the DWARF (the same
 * offsetof/sizeof expressions as tools/layout/probe.c, evaluated over the
 * debug information's struct definitions), and every constant Ruby
 * declares as an enumerator (special constants, T_xxx, frame magics, iseq
 * and method types, GC modes, ...).  Shape choices that probe.c makes by
 * version (`#if V(3, 2)`) are made here by what the DWARF contains (rb_vm_t
 * has `ractor`, rb_thread_t has `nt`, RString has `len`, ...), so a version
 * with no table is read the same way.  The layout's shape is then decided
 * from those fields by rbp_layout_set_shape(), as for a table.
 *
 * Ruby keeps a few constants only as preprocessor macros: those whose body
 * is an integer literal are read from .debug_macro (-g3 builds, Ruby's
 * default -ggdb3).  Any constant still missing (a macro that is an
 * expression such as BASE_SLOT_SIZE on 3.4+, an enumerator of a type no code
 * uses, a -g build) comes from a table (the nearest version's) and is listed
 * in rbp_layout_dwarf_report.from_table.
 */
#ifndef RBP_RUBY_LAYOUT_DWARF_H
#define RBP_RUBY_LAYOUT_DWARF_H

#include <stddef.h>
#include <stdint.h>

#include "proc/dwarf.h"
#include "ruby/layout.h"

#define RBP_LAYOUT_MAX_FIELDS 256   /* >= rbp_layout_n_fields */

struct rbp_layout_dwarf_report {
	size_t units_read;        /* compile units visited */
	size_t n_from_table;      /* fields taken from the table, not the DWARF */
	char from_table[512];     /* their names, comma-separated (truncated) */
	uint8_t from_table_map[RBP_LAYOUT_MAX_FIELDS]; /* per rbp_layout_fields[] index */
	char missing[128];        /* on RBP_ENOSYM: "rb_thread_t.ec", the first thing missing */
	unsigned unavailable;     /* 1 << enum rbp_feature: features whose fields are missing */
	char feat_missing[RBP_FEAT_N][128]; /* per feature: the first thing missing, "" none */
};

/*
 * Fill *out from d for a Ruby whose ruby_version is version (kept by
 * pointer: it must outlive *out); constants DWARF lacks come from consts
 * (a table, the nearest to version).  The fields are filled per feature
 * (enum rbp_feature): a feature whose types or members the DWARF lacks is
 * unavailable (rep->unavailable, rep->feat_missing names the first thing
 * missing) and its offsets are set absent, so its readers see "none" in the
 * layout's shape; the others are read as usual.  RBP_ENOSYM only when the
 * stacks' fields are missing (rep->missing names it): nothing can be read
 * then.  RBP_ENOMEM.
 */
int rbp_layout_from_dwarf(struct rbp_dwarf *d, const char *version,
			  const struct rbp_layout *consts, struct rbp_layout *out,
			  struct rbp_layout_dwarf_report *rep);

#endif
