/*
 * value.c - reading Ruby objects out of the target: strings, arrays, IDs,
 * class paths.  Each helper validates the object's type before trusting its
 * fields and bounds every length, so a stale or garbage VALUE yields an
 * error, not a crash or a huge allocation.
 *
 * Caches (all keyed by remote address or ID, never invalidated): ID names
 * and class paths.  Both are immortal in practice for the classes and
 * method names a profile shows; a class that is collected and whose slot is
 * reused by another class could get a stale name, which we accept.
 */
#include "ruby/internal.h"
#include "proc/arch.h"

#include <stdio.h>
#include <stdlib.h>

#define USER_SPACE_END RBP_ARCH_USER_END   /* this machine's (proc/arch.h) */

int rv_read(struct rbp_vm *vm, uint64_t addr, void *buf, size_t len)
{
	if (addr < 4096 || len > USER_SPACE_END || addr > USER_SPACE_END - len)
		return RBP_EFAULT;
	vm->stats.reads++;
	vm->stats.bytes += len;
	return rbp_read(vm->t->mem, addr, buf, len);
}

void rv_readv(struct rbp_vm *vm, struct rbp_read_req *v, size_t n)
{
	size_t bad = 0;

	/* ranges that cannot be user space are not asked for: read as empty */
	for (size_t i = 0; i < n; i++) {
		v[i].err = RBP_OK;
		if (v[i].addr < 4096 || v[i].len > USER_SPACE_END ||
		    v[i].addr > USER_SPACE_END - v[i].len) {
			v[i].len = 0;
			v[i].err = RBP_EFAULT;
			bad++;
		}
	}
	if (bad == n)
		return;
	vm->stats.reads++;
	for (size_t i = 0; i < n; i++)
		vm->stats.bytes += v[i].len;
	int *saved = NULL;
	if (bad && !(saved = malloc(n * sizeof(*saved)))) {
		for (size_t i = 0; i < n; i++)
			v[i].err = RBP_ENOMEM;
		return;
	}
	for (size_t i = 0; bad && i < n; i++)
		saved[i] = v[i].err;
	rbp_readv(vm->t->mem, v, n);
	for (size_t i = 0; bad && i < n; i++)
		if (saved[i])
			v[i].err = saved[i];
	free(saved);
}

int rv_word(struct rbp_vm *vm, uint64_t addr, uint64_t *out)
{
	return rv_read(vm, addr, out, sizeof(*out));
}

int rv_stack_word(struct rbp_vm *vm, uint64_t addr, uint64_t *out)
{
	if (vm->env_words.len && rbp_hmap_get(&vm->env_words, addr, out))
		return RBP_OK;   /* copied with the frames (rbp_vm_decode_frames) */
	/* not addr + 8 <= hi: a garbage addr near 2^64 wraps around */
	if (addr >= vm->stk_lo && addr < vm->stk_hi && vm->stk_hi - addr >= 8 && !(addr & 7)) {
		memcpy(out, vm->stk_cur + (addr - vm->stk_lo), 8);
		return RBP_OK;
	}
	return rv_word(vm, addr, out);
}

uint64_t rv_bitfield(const uint8_t *buf, const struct rbp_bitfield *bf)
{
	uint64_t w = 0;
	memcpy(&w, buf + bf->off, bf->size <= 8 ? bf->size : 8);
	return (w >> bf->shift) & bf->mask;
}

int rv_is_heap(const struct rbp_vm *vm, uint64_t v)
{
	return v >= 4096 && v < USER_SPACE_END && !(v & 7) && v != vm->L->value.qnil &&
	       v != vm->L->value.qtrue && v != vm->L->value.qundef;
}

int rv_type(struct rbp_vm *vm, uint64_t v, uint64_t *flags)
{
	uint64_t f;
	if (!rv_is_heap(vm, v))
		return -1;
	if (rv_word(vm, v, &f))
		return -1;
	if (flags)
		*flags = f;
	return (int)(f & vm->L->value.t_mask);
}

/* Where a String's bytes are and how many there are. */
static int string_span(struct rbp_vm *vm, uint64_t str, uint64_t *ptr, uint64_t *len)
{
	const struct rbp_layout *L = vm->L;
	uint8_t h[40];
	int err;

	if (!rv_is_heap(vm, str))
		return RBP_ECORRUPT;
	if ((err = rv_read(vm, str, h, sizeof(h))))
		return err;
	uint64_t flags = rv_u64(h, 0);
	if ((flags & L->value.t_mask) != L->value.t_string)
		return RBP_ECORRUPT;
	if (flags & L->rstring.noembed) {
		*len = rv_u64(h, L->shape.str_len == RBP_STR_LEN_TOP ? L->rstring.len :
			      L->rstring.heap_len);
		*ptr = rv_u64(h, L->rstring.heap_ptr);
	} else {
		if (L->shape.str_len == RBP_STR_LEN_TOP)
			*len = rv_u64(h, L->rstring.len);
		else if (L->shape.str_len == RBP_STR_LEN_IN_FLAGS)
			*len = (flags & L->rstring.embed_len_mask) >> L->rstring.embed_len_shift;
		else
			*len = rv_u64(h, L->rstring.embed_len);
		*ptr = str + (uint64_t)L->rstring.embed_ary;
	}
	if (*len > (1u << 30))
		return RBP_ECORRUPT;
	return RBP_OK;
}

int rv_string(struct rbp_vm *vm, uint64_t str, char *buf, size_t cap, size_t *len)
{
	uint64_t ptr, n;
	int err = string_span(vm, str, &ptr, &n);

	if (err)
		return err;
	if (n > cap - 1)
		n = cap - 1;
	if (n && (err = rv_read(vm, ptr, buf, n)))
		return err;
	buf[n] = 0;
	/* a NUL inside would cut the string short: keep what precedes it */
	*len = strnlen(buf, n);
	return RBP_OK;
}

int rv_string_intern(struct rbp_vm *vm, uint64_t str, const char **out)
{
	char buf[RV_MAX_STRING];
	size_t len;
	int err = rv_string(vm, str, buf, sizeof(buf), &len);

	if (err)
		return err;
	*out = rbp_strpool_intern(&vm->pool, buf, len);
	return *out ? RBP_OK : RBP_ENOMEM;
}

/* Header of an Array: its flags and, for heap arrays, len and ptr. */
static int array_span(struct rbp_vm *vm, uint64_t ary, uint64_t *ptr, uint64_t *len)
{
	const struct rbp_layout *L = vm->L;
	uint8_t h[40];
	int err;

	if (!rv_is_heap(vm, ary))
		return RBP_ECORRUPT;
	if ((err = rv_read(vm, ary, h, sizeof(h))))
		return err;
	uint64_t flags = rv_u64(h, 0);
	if ((flags & L->value.t_mask) != L->value.t_array)
		return RBP_ECORRUPT;
	if (flags & L->rarray.embed_flag) {
		*len = (flags & L->rarray.embed_len_mask) >> L->rarray.embed_len_shift;
		*ptr = ary + (uint64_t)L->rarray.embed_ary;
	} else {
		*len = rv_u64(h, L->rarray.heap_len);
		*ptr = rv_u64(h, L->rarray.heap_ptr);
	}
	return *len > (1u << 28) ? RBP_ECORRUPT : RBP_OK;
}

int rv_array_len(struct rbp_vm *vm, uint64_t ary, uint64_t *len)
{
	uint64_t ptr;
	return array_span(vm, ary, &ptr, len);
}

int rv_array_get(struct rbp_vm *vm, uint64_t ary, uint64_t i, uint64_t *out)
{
	uint64_t ptr, len;
	int err = array_span(vm, ary, &ptr, &len);

	if (err)
		return err;
	if (i >= len)
		return RBP_ECORRUPT;
	return rv_word(vm, ptr + 8 * i, out);
}

/*
 * ID -> name through the global symbol table: ids is an Array of chunks of
 * id.entry_unit entries, each entry id.entry_size VALUEs (string, symbol);
 * a chunk is an Array (RBP_ID_TABLE_ARRAYS) or, 4.1+, a T_DATA wrapping a
 * darray (RBP_ID_TABLE_DARRAYS).
 */
/*
 * 4.1+: VALUE number SLOT of the entries of an ids chunk, a T_DATA whose
 * data is an rb_darray of struct sym_id_entry ({size, capa} then the
 * entries); INDEX (the entry's number) must be below the darray's size.
 */
static int id_chunk_get(struct rbp_vm *vm, uint64_t chunk, uint64_t index, uint64_t slot,
			uint64_t *out)
{
	const struct rbp_layout *L = vm->L;
	uint64_t flags, darray, size;
	int err;

	if (!chunk || chunk == L->value.qnil || (chunk & 7))
		return RBP_ENOSYM;
	if ((err = rv_word(vm, chunk, &flags)))
		return err;
	if ((flags & L->value.t_mask) != L->value.t_data)
		return RBP_ECORRUPT;
	if ((err = rv_word(vm, chunk + (uint64_t)L->id.chunk_data, &darray)) ||
	    (err = rv_word(vm, darray, &size)))
		return err;
	if (index >= size || size > L->id.entry_unit)
		return RBP_ENOSYM;
	return rv_word(vm, darray + L->id.chunk_first + slot * 8, out);
}

int rv_id_name(struct rbp_vm *vm, uint64_t id, const char **out)
{
	const struct rbp_layout *L = vm->L;
	uint64_t cached, ids, chunk, str;
	uint32_t last;
	int err;

	if (rbp_hmap_get(&vm->id_names, id, &cached)) {
		*out = (const char *)(uintptr_t)cached;
		return RBP_OK;
	}
	if (!vm->symbols_addr)
		return RBP_ENOSYM;
	uint64_t serial = id > L->id.last_op_id ? id >> L->id.scope_shift : id;
	if ((err = rv_read(vm, vm->symbols_addr + L->symbols.last_id, &last, 4)) ||
	    (err = rv_word(vm, vm->symbols_addr + L->symbols.ids, &ids)))
		return err;
	if (serial == 0 || serial > last)
		return RBP_ENOSYM;
	uint64_t slot = (serial % L->id.entry_unit) * L->id.entry_size + L->id.entry_str;
	if ((err = rv_array_get(vm, ids, serial / L->id.entry_unit, &chunk)))
		return err;
	if (L->shape.id_table == RBP_ID_TABLE_ARRAYS)
		err = rv_array_get(vm, chunk, slot, &str);
	else
		err = id_chunk_get(vm, chunk, serial % L->id.entry_unit, slot, &str);
	if (err)
		return err;
	if ((err = rv_string_intern(vm, str, out)))
		return err == RBP_ECORRUPT ? RBP_ENOSYM : err;
	rbp_hmap_put(&vm->id_names, id, (uint64_t)(uintptr_t)*out);
	return RBP_OK;
}

/* The classext of a class: a pointer field, or inline after struct RClass. */
int rv_class_ext(struct rbp_vm *vm, uint64_t klass, uint64_t *ext)
{
	switch (vm->L->shape.classext) {
	case RBP_CLASSEXT_POINTER:
		return rv_word(vm, klass + vm->L->rclass.ext_ptr, ext);
	case RBP_CLASSEXT_INLINE:
		*ext = klass + vm->L->rclass.ext_inline;
		return RBP_OK;
	default:
		return RBP_ECORRUPT;
	}
}

/* 1 when ID key is the one wanted: want_id, or when that is 0, named want_name. */
static int ivar_id_is(struct rbp_vm *vm, uint64_t key, uint64_t want_id, const char *want_name)
{
	const char *name;

	if (want_id)
		return key == want_id;
	return key && !rv_id_name(vm, key, &name) && !strcmp(name, want_name);
}

#define RV_MAX_SHAPE_DEPTH 256  /* ivars of one class we look through */
#define RV_MAX_SHAPE_SIZE 64

/*
 * 3.2: an instance variable of a class in its iv_ptr array, at the index the
 * class's object shape gives (RBP_CLASS_IVARS_SHAPES: the layout's rb_shape
 * comment).
 */
static int class_ivar_shape(struct rbp_vm *vm, uint64_t klass, uint64_t want_id,
			    const char *want_name, uint64_t *val, uint64_t *found_id)
{
	const struct rbp_layout *L = vm->L;
	uint64_t flags, list, ext, ivptr;
	uint8_t sh[RV_MAX_SHAPE_SIZE];
	int err;

	if (L->rb_shape.size > sizeof(sh) || L->rb_shape.id_shift > 63 || !vm->vm_addr)
		return RBP_ENOSYM;
	if ((err = rv_word(vm, klass, &flags)) ||
	    (err = rv_word(vm, vm->vm_addr + L->vm.shape_list, &list)))
		return err;
	uint32_t id = (uint32_t)(flags >> L->rb_shape.id_shift);
	for (int depth = 0; depth < RV_MAX_SHAPE_DEPTH; depth++) {
		if (id == L->rb_shape.invalid_id ||
		    (err = rv_read(vm, list + (uint64_t)id * L->rb_shape.size, sh, L->rb_shape.size)))
			return err ? err : RBP_ENOSYM;
		uint32_t parent = rv_u32(sh, L->rb_shape.parent_id);
		if (parent == L->rb_shape.invalid_id)
			return RBP_ENOSYM;   /* the root shape: no such ivar */
		uint64_t edge = rv_u64(sh, L->rb_shape.edge_name);
		if (sh[L->rb_shape.type] == L->rb_shape.type_ivar &&
		    ivar_id_is(vm, edge, want_id, want_name)) {
			uint32_t index = rv_u32(sh, L->rb_shape.next_iv_index);
			if (!index || index > 1u << 16)
				return RBP_ECORRUPT;
			if ((err = rv_class_ext(vm, klass, &ext)) ||
			    (err = rv_word(vm, ext + L->classext.iv_ptr, &ivptr)))
				return err;
			if (!ivptr)
				return RBP_ENOSYM;
			if ((err = rv_word(vm, ivptr + 8 * (uint64_t)(index - 1), val)))
				return err;
			if (found_id)
				*found_id = edge;
			return RBP_OK;
		}
		id = parent;
	}
	return RBP_ENOSYM;
}

/*
 * An instance variable of a class kept in its iv_tbl st_table (or, 3.2, its
 * shape-indexed iv_ptr), found by ID (want_id) or, when want_id is 0, by
 * name (want_name).  *found_id gets the matching ID so callers can cache it.
 */
static int class_ivar(struct rbp_vm *vm, uint64_t klass, uint64_t want_id,
		      const char *want_name, uint64_t *val, uint64_t *found_id)
{
	const struct rbp_layout *L = vm->L;
	uint64_t ext, tbl, start, bound, entries;
	uint8_t st[64], buf[64 * 24];
	int err;

	if (L->shape.class_ivars == RBP_CLASS_IVARS_SHAPES)
		return class_ivar_shape(vm, klass, want_id, want_name, val, found_id);
	if (L->shape.class_ivars != RBP_CLASS_IVARS_IV_TBL)
		return RBP_ENOSYM;
	if ((err = rv_class_ext(vm, klass, &ext)) ||
	    (err = rv_word(vm, ext + L->classext.iv_tbl, &tbl)))
		return err;
	if (!tbl)
		return RBP_ENOSYM;
	if ((err = rv_read(vm, tbl, st, sizeof(st))))
		return err;
	start = rv_u64(st, L->st.entries_start);
	bound = rv_u64(st, L->st.entries_bound);
	entries = rv_u64(st, L->st.entries);
	if (bound < start || bound - start > 64 || L->st_entry.size > 24)
		return RBP_ENOSYM;  /* classes with many ivars: not worth it */
	size_t n = (size_t)(bound - start);
	if (n && (err = rv_read(vm, entries + start * L->st_entry.size, buf,
				n * L->st_entry.size)))
		return err;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = buf + i * L->st_entry.size;
		uint64_t key = rv_u64(e, L->st_entry.key);
		if (!ivar_id_is(vm, key, want_id, want_name))
			continue;
		*val = rv_u64(e, L->st_entry.record);
		if (found_id)
			*found_id = key;
		return RBP_OK;
	}
	return RBP_ENOSYM;
}

/* The class path VALUE of klass: classext field (3.3+) or the ivar. */
static int class_path_value(struct rbp_vm *vm, uint64_t klass, uint64_t *path)
{
	uint64_t ext;
	int err;

	if (vm->L->shape.class_path == RBP_CLASS_FIELD_CLASSEXT) {
		if ((err = rv_class_ext(vm, klass, &ext)))
			return err;
		return rv_word(vm, ext + vm->L->classext.classpath, path);
	}
	if (vm->id_classpath)
		return class_ivar(vm, klass, vm->id_classpath, NULL, path, NULL);
	return class_ivar(vm, klass, 0, "__classpath__", path, &vm->id_classpath);
}

int rv_class_path(struct rbp_vm *vm, uint64_t klass, const char **out)
{
	uint64_t cached, flags, path;
	int type;

	if (rbp_hmap_get(&vm->class_paths, klass, &cached)) {
		*out = (const char *)(uintptr_t)cached;
		return RBP_OK;
	}
	*out = "";
	type = rv_type(vm, klass, &flags);
	if (type < 0)
		return RBP_ECORRUPT;
	if ((type == vm->L->value.t_class || type == vm->L->value.t_module) &&
	    !class_path_value(vm, klass, &path) && rv_is_heap(vm, path)) {
		const char *s;
		if (!rv_string_intern(vm, path, &s) && s[0] && s[0] != '#')
			*out = s;
	}
	rbp_hmap_put(&vm->class_paths, klass, (uint64_t)(uintptr_t)*out);
	return RBP_OK;
}

/* The object a singleton class is attached to. */
static int singleton_attached(struct rbp_vm *vm, uint64_t klass, uint64_t *obj)
{
	uint64_t ext;
	int err;

	if (vm->L->shape.attached == RBP_CLASS_FIELD_CLASSEXT) {
		if ((err = rv_class_ext(vm, klass, &ext)))
			return err;
		return rv_word(vm, ext + vm->L->classext.attached, obj);
	}
	return class_ivar(vm, klass, vm->L->classext.id_attached, NULL, obj, NULL);
}

int rv_method_prefix(struct rbp_vm *vm, uint64_t owner, char *buf, size_t cap)
{
	const struct rbp_layout *L = vm->L;
	uint64_t flags, attached;
	const char *path = "";
	char sep = '#';
	int type = rv_type(vm, owner, &flags);

	buf[0] = 0;
	if (type == L->value.t_class && (flags & L->value.fl_singleton)) {
		/* Foo.bar for a class or module; nothing for one object's singleton */
		int at;
		if (singleton_attached(vm, owner, &attached))
			return RBP_OK;
		at = rv_type(vm, attached, NULL);
		if (at != L->value.t_class && at != L->value.t_module)
			return RBP_OK;
		owner = attached;
		sep = '.';
	} else if (type != L->value.t_class && type != L->value.t_module && type != L->value.t_iclass) {
		return type < 0 ? RBP_ECORRUPT : RBP_OK;
	}
	if (rv_class_path(vm, owner, &path) || !path[0])
		return RBP_OK;
	snprintf(buf, cap, "%s%c", path, sep);
	return RBP_OK;
}
