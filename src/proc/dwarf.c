/*
 * dwarf.c - named types and constants out of DWARF (see dwarf.h for the
 * workload and why one hinted pass over top-level entries fits it).
 */
#include "proc/dwarf.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <libelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

#define MAX_PATH_DEPTH 8   /* components in a member path */
#define MAX_ANON_DEPTH 8   /* nested unnamed members followed */
#define MAX_HINTED 16      /* hinted units whose macros are read */

struct rbp_dwarf {
	int fd;
	Dwarf *dw;
	const char *const *types;   /* the caller's names (rbp_dwarf_index) */
	size_t n_types;
	Dwarf_Die *type_die;        /* per name: the definition found */
	uint8_t *type_found;
	const char *const *consts;
	size_t n_consts;
	int64_t *const_val;
	uint8_t *const_found;
};

int rbp_dwarf_open(const char *path, struct rbp_dwarf **out)
{
	struct rbp_dwarf *d = calloc(1, sizeof(*d));

	if (!d)
		return RBP_ENOMEM;
	if ((d->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		free(d);
		return errno == ENOMEM ? RBP_ENOMEM : RBP_ENOFILE;
	}
	if (!(d->dw = dwarf_begin(d->fd, DWARF_C_READ))) {
		close(d->fd);
		free(d);
		return RBP_EBADELF;
	}
	*out = d;
	return RBP_OK;
}

void rbp_dwarf_close(struct rbp_dwarf *d)
{
	if (!d)
		return;
	dwarf_end(d->dw);
	close(d->fd);
	free(d->type_die);
	free(d->type_found);
	free(d->const_val);
	free(d->const_found);
	free(d);
}

int rbp_dwarf_debuglink(const char *path, char *name, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = RBP_ENOSYM;
	GElf_Word crc;
	Elf *elf;

	if (fd < 0)
		return RBP_ENOFILE;
	elf_version(EV_CURRENT);
	if (!(elf = elf_begin(fd, ELF_C_READ, NULL))) {
		close(fd);
		return RBP_EBADELF;
	}
	const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
	if (link && *link && strlen(link) < cap && !strchr(link, '/')) {
		strcpy(name, link);
		err = RBP_OK;
	}
	elf_end(elf);
	close(fd);
	return err;
}

/* ---- the index --------------------------------------------------------- */

static int is_definition(Dwarf_Die *die)
{
	bool decl = false;
	Dwarf_Attribute a;

	if (dwarf_attr(die, DW_AT_declaration, &a) && dwarf_formflag(&a, &decl) == 0 && decl)
		return 0;
	return 1;
}

/* The indexed type name of a top-level entry into buf, or NULL. */
static const char *type_key(Dwarf_Die *die, char *buf, size_t cap)
{
	const char *name = dwarf_diename(die), *kind;

	if (!name)
		return NULL;
	switch (dwarf_tag(die)) {
	case DW_TAG_typedef: return name;
	case DW_TAG_structure_type: kind = "struct "; break;
	case DW_TAG_union_type: kind = "union "; break;
	default: return NULL;
	}
	if (!is_definition(die) || strlen(kind) + strlen(name) + 1 > cap)
		return NULL;
	strcpy(buf, kind);
	strcat(buf, name);
	return buf;
}

static int const_of(Dwarf_Die *die, int64_t *v)
{
	Dwarf_Attribute a;
	Dwarf_Sword s;
	Dwarf_Word u;

	if (!dwarf_attr(die, DW_AT_const_value, &a))
		return -1;
	if (dwarf_whatform(&a) == DW_FORM_sdata || dwarf_whatform(&a) == DW_FORM_implicit_const) {
		if (dwarf_formsdata(&a, &s))
			return -1;
		*v = s;
		return 0;
	}
	if (dwarf_formudata(&a, &u))
		return -1;
	*v = (int64_t)u;
	return 0;
}

static void note_const(struct rbp_dwarf *d, Dwarf_Die *die, size_t *missing)
{
	const char *name = dwarf_diename(die);
	int64_t v;

	if (!name)
		return;
	for (size_t i = 0; i < d->n_consts; i++)
		if (!d->const_found[i] && !strcmp(d->consts[i], name) && !const_of(die, &v)) {
			d->const_val[i] = v;
			d->const_found[i] = 1;
			(*missing)--;
			return;
		}
}

/*
 * Enumerators of die (an enumeration type), and of enumeration types
 * declared inside a struct or union (GCC keeps `union { enum {X = 1} m; }`
 * there), depth-bounded.
 */
static void scan_consts(struct rbp_dwarf *d, Dwarf_Die *die, int depth, size_t *missing)
{
	Dwarf_Die c;
	int tag = dwarf_tag(die);

	if (tag == DW_TAG_variable) {
		note_const(d, die, missing);
		return;
	}
	if (depth > 3 || (tag != DW_TAG_enumeration_type && tag != DW_TAG_structure_type &&
			  tag != DW_TAG_union_type) || dwarf_child(die, &c) != 0)
		return;
	do {
		int ct = dwarf_tag(&c);
		if (ct == DW_TAG_enumerator)
			note_const(d, &c, missing);
		else if (ct == DW_TAG_enumeration_type || ct == DW_TAG_structure_type ||
			 ct == DW_TAG_union_type)
			scan_consts(d, &c, depth + 1, missing);
	} while (*missing && dwarf_siblingof(&c, &c) == 0);
}

/*
 * An object-like macro whose body is an integer literal ("NAME (-2)",
 * "NAME 512U"): 0 and *v, else -1.
 */
static int macro_literal(const char *def, size_t name_len, int64_t *v)
{
	const char *p = def + name_len;
	int open = 0, neg = 0;
	char *end;

	if (*p != ' ' && *p != '\t')
		return -1;   /* function-like, or not this name */
	while (*p == ' ' || *p == '\t' || *p == '(') {
		open += *p == '(';
		p++;
	}
	if (*p == '-' || *p == '+') {
		neg = *p == '-';
		p++;
	}
	if (*p < '0' || *p > '9')
		return -1;
	long long x = strtoll(p, &end, 0);
	p = end;
	while (*p == 'u' || *p == 'U' || *p == 'l' || *p == 'L')
		p++;
	while (*p == ' ' || *p == '\t' || (*p == ')' && open-- > 0))
		p++;
	if (*p || open != 0)
		return -1;
	*v = neg ? -x : x;
	return 0;
}

struct macro_scan {
	struct rbp_dwarf *d;
	size_t *missing;
	int depth;
};

static int macro_cb(Dwarf_Macro *m, void *arg)
{
	struct macro_scan *s = arg;
	unsigned int op;
	Dwarf_Attribute a;
	Dwarf_Word off;
	const char *def;
	int64_t v;

	if (dwarf_macro_opcode(m, &op))
		return DWARF_CB_OK;
	if (op == DW_MACRO_import) {
		if (s->depth < 4 && !dwarf_macro_param1(m, &off)) {
			s->depth++;
			ptrdiff_t tok = DWARF_GETMACROS_START;
			while ((tok = dwarf_getmacros_off(s->d->dw, off, macro_cb, s, tok)) > 0 &&
			       *s->missing)
				;
			s->depth--;
		}
		return *s->missing ? DWARF_CB_OK : DWARF_CB_ABORT;
	}
	if ((op != DW_MACRO_define && op != DW_MACRO_define_strp && op != DW_MACRO_define_strx) ||
	    dwarf_macro_param(m, 1, &a) || !(def = dwarf_formstring(&a)))
		return DWARF_CB_OK;
	for (size_t i = 0; i < s->d->n_consts; i++) {
		size_t n = strlen(s->d->consts[i]);
		if (!s->d->const_found[i] && !strncmp(def, s->d->consts[i], n) &&
		    !macro_literal(def, n, &v)) {
			s->d->const_val[i] = v;
			s->d->const_found[i] = 1;
			(*s->missing)--;
			break;
		}
	}
	return *s->missing ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* Constants still missing from a unit's macros (-g3 builds keep them). */
static void scan_macros(struct rbp_dwarf *d, Dwarf_Die *cu, size_t *missing)
{
	struct macro_scan s = { d, missing, 0 };
	ptrdiff_t tok = DWARF_GETMACROS_START;

	while (*missing && (tok = dwarf_getmacros(cu, macro_cb, &s, tok)) > 0)
		;
}

/* One compile unit's top-level entries. */
static void scan_unit(struct rbp_dwarf *d, Dwarf_Die *cu, int want_consts,
		      size_t *types_missing, size_t *consts_missing)
{
	Dwarf_Die die;
	char buf[256];

	if (dwarf_child(cu, &die) != 0)
		return;
	do {
		const char *key = *types_missing ? type_key(&die, buf, sizeof(buf)) : NULL;
		if (key)
			for (size_t i = 0; i < d->n_types; i++)
				if (!d->type_found[i] && !strcmp(d->types[i], key)) {
					d->type_die[i] = die;
					d->type_found[i] = 1;
					(*types_missing)--;
					break;
				}
		if (want_consts && *consts_missing)
			scan_consts(d, &die, 0, consts_missing);
	} while ((*types_missing || (want_consts && *consts_missing)) &&
		 dwarf_siblingof(&die, &die) == 0);
}

static int name_matches_hint(const char *name, const char *hint)
{
	size_t n = strlen(name), h = strlen(hint);

	return name && n >= h && !strcmp(name + n - h, hint) && (n == h || name[n - h - 1] == '/');
}

static int hint_rank(const char *name, const char *const *hints, size_t n)
{
	for (size_t i = 0; name && i < n; i++)
		if (name_matches_hint(name, hints[i]))
			return (int)i;
	return -1;
}

/* Required types still missing. */
static size_t required_missing(const struct rbp_dwarf *d, size_t n_required)
{
	size_t n = 0;

	for (size_t i = 0; i < n_required && i < d->n_types; i++)
		n += !d->type_found[i];
	return n;
}

int rbp_dwarf_index(struct rbp_dwarf *d, const char *const *types, size_t n_types,
		    size_t n_required, const char *const *consts, size_t n_consts,
		    const char *const *hint_cus, size_t n_hints, size_t *units_read)
{
	size_t tmiss = n_types, cmiss = n_consts, visited = 0, n_hinted = 0;
	Dwarf_Die hinted[MAX_HINTED];

	free(d->type_die);
	free(d->type_found);
	free(d->const_val);
	free(d->const_found);
	d->types = types;
	d->n_types = n_types;
	d->consts = consts;
	d->n_consts = n_consts;
	d->type_die = calloc(n_types + 1, sizeof(Dwarf_Die));
	d->type_found = calloc(n_types + 1, 1);
	d->const_val = calloc(n_consts + 1, sizeof(int64_t));
	d->const_found = calloc(n_consts + 1, 1);
	if (!d->type_die || !d->type_found || !d->const_val || !d->const_found)
		return RBP_ENOMEM;
	/*
	 * Pass 0..n_hints-1: the hinted units in the caller's order (one walk
	 * over the unit headers each, which is cheap: headers only); then one
	 * pass over every other unit while a required type is missing.
	 */
	for (size_t pass = 0; pass <= n_hints; pass++) {
		/*
		 * No hinted unit at all (types moved to partial units by dwz, or
		 * unnamed units): every type is looked for everywhere.
		 */
		if (pass == n_hints && visited == 0)
			n_required = n_types;
		/*
		 * Constants not among the hinted units' entries: their macros
		 * (-g3), in hint order; after the entries, so that an enumerator
		 * of the same name wins.
		 */
		for (size_t i = 0; pass == n_hints && i < n_hinted && cmiss; i++)
			scan_macros(d, &hinted[i], &cmiss);
		if (pass < n_hints ? !tmiss && !cmiss : !required_missing(d, n_required))
			break;
		Dwarf_CU *cu = NULL;
		Dwarf_Half ver;
		uint8_t ut;
		Dwarf_Die cudie, sub;
		while (dwarf_get_units(d->dw, cu, &cu, &ver, &ut, &cudie, &sub) == 0) {
			if (ut == DW_UT_type || ut == DW_UT_split_type)
				continue;
			int rank = hint_rank(dwarf_diename(&cudie), hint_cus, n_hints);
			if (pass < n_hints ? rank != (int)pass : rank >= 0)
				continue;
			visited++;
			scan_unit(d, &cudie, pass < n_hints, &tmiss, &cmiss);
			if (pass < n_hints && n_hinted < MAX_HINTED)
				hinted[n_hinted++] = cudie;
			if (pass == n_hints ? !required_missing(d, n_required) : !tmiss && !cmiss)
				break;
			if (pass < n_hints)
				break;   /* one unit per hint: the first of that name */
		}
	}
	if (units_read)
		*units_read = visited;
	return RBP_OK;
}

/* ---- queries -------------------------------------------------------- */

static Dwarf_Die *indexed_type(struct rbp_dwarf *d, const char *name)
{
	for (size_t i = 0; i < d->n_types; i++)
		if (d->type_found[i] && !strcmp(d->types[i], name))
			return &d->type_die[i];
	return NULL;
}

/* die's type with typedefs and qualifiers stripped; -1 when it has none. */
static int strip_type(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Attribute a;
	Dwarf_Die cur = *die;

	for (int i = 0; i < 16; i++) {
		int tag = dwarf_tag(&cur);
		if (i > 0 && tag != DW_TAG_typedef && tag != DW_TAG_const_type &&
		    tag != DW_TAG_volatile_type && tag != DW_TAG_restrict_type &&
		    tag != DW_TAG_atomic_type) {
			*out = cur;
			return 0;
		}
		if (!dwarf_attr(&cur, DW_AT_type, &a) || !dwarf_formref_die(&a, &cur))
			return -1;
	}
	return -1;
}

/* A top-level type itself with typedefs stripped (a struct for "rb_vm_t"). */
static int resolve_named(Dwarf_Die *named, Dwarf_Die *out)
{
	if (dwarf_tag(named) != DW_TAG_typedef) {
		*out = *named;
		return 0;
	}
	return strip_type(named, out);
}

static int member_offset(Dwarf_Die *m, int64_t *off)
{
	Dwarf_Attribute a;
	Dwarf_Word w;

	if (!dwarf_attr(m, DW_AT_data_member_location, &a)) {
		*off = 0;   /* union members */
		return 0;
	}
	if (dwarf_formudata(&a, &w))
		return -1;  /* a location expression (DWARF 2 style): not handled */
	*off = (int64_t)w;
	return 0;
}

/*
 * Find member `name` in struct/union agg, through unnamed members;
 * *m the member, *off its offset from agg's start.
 */
static int find_member(Dwarf_Die *agg, const char *name, size_t len, int depth,
		       Dwarf_Die *m, int64_t *off)
{
	Dwarf_Die c, t;
	int64_t o;

	if (depth > MAX_ANON_DEPTH || dwarf_child(agg, &c) != 0)
		return -1;
	do {
		if (dwarf_tag(&c) != DW_TAG_member)
			continue;
		const char *n = dwarf_diename(&c);
		if (n && strlen(n) == len && !strncmp(n, name, len)) {
			if (member_offset(&c, &o))
				return -1;
			*m = c;
			*off = o;
			return 0;
		}
		if (!n && !strip_type(&c, &t) &&
		    (dwarf_tag(&t) == DW_TAG_structure_type || dwarf_tag(&t) == DW_TAG_union_type) &&
		    !member_offset(&c, &o) && !find_member(&t, name, len, depth + 1, m, off)) {
			*off += o;
			return 0;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return -1;
}

/* Walk a dotted path from the aggregate agg. */
static int walk_path(Dwarf_Die *agg, const char *path, Dwarf_Die *m, int64_t *off)
{
	Dwarf_Die cur = *agg;
	int64_t total = 0, o;

	for (int depth = 0; depth < MAX_PATH_DEPTH; depth++) {
		const char *dot = strchr(path, '.');
		size_t len = dot ? (size_t)(dot - path) : strlen(path);
		if (find_member(&cur, path, len, 0, m, &o))
			return RBP_ENOSYM;
		total += o;
		if (!dot) {
			*off = total;
			return RBP_OK;
		}
		if (strip_type(m, &cur))
			return RBP_ENOSYM;
		path = dot + 1;
	}
	return RBP_ENOSYM;
}

int rbp_dwarf_member(struct rbp_dwarf *d, const char *type, const char *path,
		     struct rbp_dwarf_member *out)
{
	Dwarf_Die *named = indexed_type(d, type), agg, m, t;
	Dwarf_Attribute a;
	Dwarf_Word w;
	Dwarf_Word size;
	int err;

	if (!named || resolve_named(named, &agg))
		return RBP_ENOSYM;
	memset(out, 0, sizeof(*out));
	if ((err = walk_path(&agg, path, &m, &out->offset)))
		return err;
	if (strip_type(&m, &t) || dwarf_aggregate_size(&t, &size))
		return RBP_ENOSYM;
	out->size = size;
	out->is_pointer = dwarf_tag(&t) == DW_TAG_pointer_type;
	if (dwarf_attr(&m, DW_AT_bit_size, &a) && !dwarf_formudata(&a, &w)) {
		out->bit_size = (uint32_t)w;
		if (dwarf_attr(&m, DW_AT_data_bit_offset, &a) && !dwarf_formudata(&a, &w)) {
			/* DWARF 4+: bits from the start of the struct holding the
			 * member, which is out->offset bytes into the type (the
			 * member itself has no data_member_location) */
			out->bit_offset = (uint32_t)(out->offset * 8 + (int64_t)w);
		} else if (dwarf_attr(&m, DW_AT_bit_offset, &a) && !dwarf_formudata(&a, &w)) {
			/* DWARF 2/3: bits from the most significant bit of a storage
			 * unit of byte_size bytes at data_member_location */
			Dwarf_Word bs = size;
			if (dwarf_attr(&m, DW_AT_byte_size, &a))
				dwarf_formudata(&a, &bs);
			out->bit_offset = (uint32_t)(out->offset * 8 + (int64_t)(bs * 8) -
						     (int64_t)w - out->bit_size);
		} else {
			return RBP_ENOSYM;
		}
	}
	return RBP_OK;
}

int rbp_dwarf_pointee_member(struct rbp_dwarf *d, const char *type, const char *path,
			     const char *sub, int64_t *off)
{
	Dwarf_Die *named = indexed_type(d, type), agg, m, ptr, target, sm;
	int64_t o;

	if (!named || resolve_named(named, &agg) || walk_path(&agg, path, &m, &o) ||
	    strip_type(&m, &ptr) || dwarf_tag(&ptr) != DW_TAG_pointer_type ||
	    strip_type(&ptr, &target) ||
	    (dwarf_tag(&target) != DW_TAG_structure_type && dwarf_tag(&target) != DW_TAG_union_type))
		return RBP_ENOSYM;
	return walk_path(&target, sub, &sm, off);
}

int rbp_dwarf_sizeof(struct rbp_dwarf *d, const char *type, uint64_t *size)
{
	Dwarf_Die *named = indexed_type(d, type), t;
	Dwarf_Word s;

	if (!named || resolve_named(named, &t) || dwarf_aggregate_size(&t, &s))
		return RBP_ENOSYM;
	*size = s;
	return RBP_OK;
}

int rbp_dwarf_const(struct rbp_dwarf *d, const char *name, int64_t *value)
{
	for (size_t i = 0; i < d->n_consts; i++)
		if (d->const_found[i] && !strcmp(d->consts[i], name)) {
			*value = d->const_val[i];
			return RBP_OK;
		}
	return RBP_ENOSYM;
}
