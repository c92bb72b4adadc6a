/*
 * alloc.h - where Ruby allocates objects: the entry points of its object
 * allocator that a uprobe can watch, and the class each call allocates.
 *
 * Every Ruby object is made by gc.c's static inline newobj_of(), reached
 * from outside gc.c only through a few exported functions (they are in
 * .dynsym even in Debian's stripped 3.3 and 3.4, and called through the
 * PLT or directly, never inlined into other files):
 *
 *   rb_wb_protected_newobj_of     (klass, flags, size)        <= 3.2
 *                                 (ec, klass, flags, size)    3.3+
 *   rb_wb_unprotected_newobj_of   (klass, flags, size)
 *   rb_ec_wb_protected_newobj_of  (ec, klass, flags, size)    3.0 - 3.2
 *   rb_newobj_of                  (klass, flags)
 *   rb_data_object_wrap, rb_data_typed_object_wrap (klass, ...)
 *
 * In 3.0 - 3.3 the allocator of ordinary objects (Foo.new),
 * rb_class_allocate_instance(klass), lives in gc.c itself with newobj_of
 * inlined and is not exported: it is found at run time as the allocator
 * of BasicObject (its classext's allocator field) and probed at that
 * address.  Allocations made inside gc.c by other paths (internal imemo
 * objects, typed data made by rb_data_typed_object_zalloc in 3.3+) are not
 * seen; they carry no user-visible class.
 */
#ifndef RBP_RUBY_ALLOC_H
#define RBP_RUBY_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "ruby/vm.h"

#define RBP_ALLOC_MAX_PROBES 8

struct rbp_alloc_probe {
	const char *name;     /* "rb_wb_protected_newobj_of" (static string) */
	char path[4200];      /* the Ruby file as rbpeek can open it (through /proc/PID/root) */
	uint64_t offset;      /* file offset of the probed instruction: the function's
			       * first, or the first one the kernel emulates (see alloc.c) */
	uint8_t klass_arg;    /* where the class is there: 0 %rdi, 1 %rsi, 2 %rdx */
};

/*
 * The allocation entry points of the Ruby in vm, into out[0..*n) (cap at
 * least RBP_ALLOC_MAX_PROBES).  RBP_ENOPROBE when none is found (a build
 * with its allocator functions not exported).
 */
int rbp_alloc_probes(struct rbp_vm *vm, struct rbp_alloc_probe *out, size_t cap, size_t *n);

/*
 * Where to probe a function whose code starts with code[0..len) (len >= 16)
 * and whose class argument is in sample argument *klass_arg (0 %rdi, 1
 * %rsi, 2 %rdx): the offset of its first instruction the kernel emulates
 * (push, call, jmp, jcc) reached by straight-line code that keeps the class
 * in one of those registers (*klass_arg updated), or 0 (the first
 * instruction; *klass_arg unchanged).  See alloc.c.
 */
size_t rbp_alloc_probe_point(const uint8_t *code, size_t len, uint8_t *klass_arg);

/*
 * The name of the class a probe saw (klass VALUE), interned in vm's pool:
 * "String", "Foo::Bar"; "(hidden)" for the class-less internal objects
 * Ruby makes (klass 0), "(anonymous)" for a class without a name.
 */
const char *rbp_alloc_class_name(struct rbp_vm *vm, uint64_t klass);

#endif
