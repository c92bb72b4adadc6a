/*
 * discover.c - find Ruby inside a target: the file it lives in (libruby.so
 * or a ruby executable with Ruby linked in statically), its version, the VM
 * structure and the global symbol table.  Every address found is validated
 * by reading what it should point to before it is trusted.
 *
 * Methods, in order of preference:
 *   VM:      the exported symbol ruby_current_vm_ptr (2.5+) or
 *            ruby_current_vm (older); else the PC-relative load at the
 *            start of the exported ruby_vm_at_exit() (Debian's 3.3 and
 *            3.4 export no VM symbol and strip .symtab); else a scan of
 *            Ruby's writable segments for a word that validates as the VM.
 *   symbols: the symbol ruby_global_symbols / global_symbols when .symtab is
 *            present; else the PC-relative load that the tiny exported
 *            function rb_sym_immortal_count() makes of global_symbols'
 *            first field (no Debian build exports the table itself).
 */
#include "ruby/internal.h"
#include "proc/arch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 when basename(path) starts with prefix. */
static int base_starts(const char *path, const char *prefix)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return !strncmp(b, prefix, strlen(prefix));
}

static int base_contains(const char *path, const char *s)
{
	const char *b = strrchr(path, '/');
	return strstr(b ? b + 1 : path, s) != NULL;
}

/*
 * Try one mapped file: open it through the target's root and check it
 * exports ruby_version.  On success vm->elf, info.ruby_path and the bias
 * are set.
 */
static int try_module(struct rbp_vm *vm, const struct rbp_mapping *m)
{
	char path[4096];
	struct rbp_elf *elf;
	uint64_t vaddr, bias;

	/*
	 * Through the target's root first (a container's own files); a process
	 * merely chroot'ed in our mount namespace shows our paths in its maps.
	 */
	if (rbp_target_path(vm->t, m->path, path, sizeof(path)) || rbp_elf_open(path, &elf)) {
		if (vm->t->is_core || rbp_elf_open(m->path, &elf))
			return RBP_ENOTRUBY;
		snprintf(path, sizeof(path), "%s", m->path);
	}
	if (rbp_elf_symbol(elf, "ruby_version", &vaddr, NULL) ||
	    rbp_elf_load_bias(elf, m->start, m->offset, &bias)) {
		rbp_elf_close(elf);
		return RBP_ENOTRUBY;
	}
	vm->elf = elf;
	vm->info.ruby_path = rbp_strpool_intern0(&vm->pool, m->path);
	vm->ruby_file = rbp_strpool_intern0(&vm->pool, path);
	vm->info.ruby_bias = bias;
	return RBP_OK;
}

/* The first mapping of each candidate file, best candidates first. */
static int find_module(struct rbp_vm *vm)
{
	const struct rbp_maps *maps = &vm->t->maps;
	const char *first_file = NULL;

	/* pass 0: libruby*; pass 1: the main executable; pass 2: *ruby* */
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < maps->n; i++) {
			const struct rbp_mapping *m = &maps->v[i];
			if (!m->path || m->path[0] != '/')
				continue;
			if (!first_file)
				first_file = m->path;
			/* only the lowest mapping of a file: maps are sorted */
			int seen = 0;
			for (size_t j = 0; j < i && !seen; j++)
				seen = maps->v[j].path && !strcmp(maps->v[j].path, m->path);
			if (seen)
				continue;
			int want = pass == 0 ? base_starts(m->path, "libruby") :
				   pass == 1 ? !strcmp(m->path, first_file) :
				   base_contains(m->path, "ruby") && !base_starts(m->path, "libruby");
			if (want && !try_module(vm, m))
				return RBP_OK;
		}
	}
	return RBP_ENOTRUBY;
}

/* Read the version string ("3.1.2") from the file's ruby_version symbol. */
static int read_version(struct rbp_vm *vm)
{
	uint64_t vaddr, size = 0;
	char buf[32] = { 0 };

	if (rbp_elf_symbol(vm->elf, "ruby_version", &vaddr, &size))
		return RBP_ENOTRUBY;
	if (!size || size > sizeof(buf) - 1)
		size = sizeof(buf) - 1;
	if (rbp_elf_read_vaddr(vm->elf, vaddr, buf, size))
		return RBP_ENOTRUBY;
	buf[sizeof(buf) - 1] = 0;
	if (!isdigit((unsigned char)buf[0]) || !strchr(buf, '.'))
		return RBP_ENOTRUBY;
	for (char *c = buf; *c; c++)   /* printed in messages: no terminal escapes */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	memcpy(vm->version, buf, sizeof(vm->version));
	vm->version[sizeof(vm->version) - 1] = 0;
	return RBP_OK;
}

/* Runtime address of a symbol of the Ruby file (or of its debug info). */
static int ruby_sym(struct rbp_vm *vm, const char *name, uint64_t *addr)
{
	uint64_t vaddr;
	int err = rbp_elf_symbol(vm->elf, name, &vaddr, NULL);
	if (err && vm->debug_elf)
		err = rbp_elf_symbol(vm->debug_elf, name, &vaddr, NULL);
	if (!err)
		*addr = vaddr + vm->info.ruby_bias;
	return err;
}

/* For a Ruby without .symtab: the symbols of its split debug info. */
static void open_debug_info(struct rbp_vm *vm)
{
	char path[4400];
	struct rbp_elf *dbg;

	if (rbp_elf_has_symtab(vm->elf) || rv_build_id_file(vm, path, sizeof(path)) ||
	    rbp_elf_open(path, &dbg))
		return;
	if (!rbp_elf_has_symtab(dbg)) {
		rbp_elf_close(dbg);
		return;
	}
	vm->debug_elf = dbg;
	vm->info.debug_path = rbp_strpool_intern0(&vm->pool, path);
}

/* vm -> main thread -> back to vm; a thread count that makes sense. */
static int validate_vm(struct rbp_vm *vm, uint64_t addr)
{
	const struct rbp_layout *L = vm->L;
	uint64_t main_th, th_vm, ractor;
	uint32_t cnt;

	if (rv_word(vm, addr + L->vm.main_thread, &main_th))
		return RBP_ENOVM;
	if (!main_th)
		return RBP_ENOTREADY;   /* Init_BareVM has not made the main thread yet */
	if (rv_word(vm, main_th + L->thread.vm, &th_vm) || th_vm != addr)
		return RBP_ENOVM;
	if (L->shape.threads == RBP_THREADS_IN_RACTOR) {
		if (rv_word(vm, addr + L->vm.main_ractor, &ractor) ||
		    rv_read(vm, ractor + L->ractor.threads_cnt, &cnt, 4) ||
		    cnt == 0 || cnt > RV_MAX_THREADS)
			return RBP_ENOVM;
	}
	return RBP_OK;
}

/*
 * Why the VM pointer addr (not null: the one Ruby's own code uses) does not
 * validate, decided from what is read there: RBP_ENOTREADY when the VM has
 * no main thread yet (or a main thread but no thread counted yet) and no
 * word near where the layout puts it points at a thread of this VM; else
 * RBP_ELAYOUT (the layout does not fit: vm->info.validation says how).
 */
static int why_invalid(struct rbp_vm *vm, uint64_t addr)
{
	const struct rbp_layout *L = vm->L;
	uint64_t main_th, th_vm, ractor, near[16];
	uint32_t cnt;
	int err;

	if ((err = rv_word(vm, addr + L->vm.main_thread, &main_th)))
		return err == RBP_EFAULT ? RBP_ENOVM : err;
	if (!main_th) {
		/* a main thread elsewhere in the VM: the layout misplaces it */
		int64_t lo = L->vm.main_thread >= 64 ? L->vm.main_thread - 64 : 0;
		if (!rv_read(vm, addr + (uint64_t)lo, near, sizeof(near))) {
			for (size_t i = 0; i < 16; i++) {
				if (!near[i] || (near[i] & 7) ||
				    rv_word(vm, near[i] + L->thread.vm, &th_vm) || th_vm != addr)
					continue;
				vm->info.validation = "the VM's main thread is not where the "
						      "layout puts it (rb_vm_t.ractor.main_thread)";
				return RBP_ELAYOUT;
			}
		}
		return RBP_ENOTREADY;
	}
	if (rv_word(vm, main_th + L->thread.vm, &th_vm) || th_vm != addr) {
		vm->info.validation = "the VM's main thread does not point back at the VM "
				      "(rb_vm_t.ractor.main_thread, rb_thread_t.vm)";
		return RBP_ELAYOUT;
	}
	if (L->shape.threads == RBP_THREADS_IN_RACTOR) {
		if (rv_word(vm, addr + L->vm.main_ractor, &ractor) || !ractor)
			return RBP_ENOTREADY;
		if (rv_read(vm, ractor + L->ractor.threads_cnt, &cnt, 4)) {
			vm->info.validation = "the main Ractor does not read "
					      "(rb_vm_t.ractor.main_ractor)";
			return RBP_ELAYOUT;
		}
		if (cnt == 0)
			return RBP_ENOTREADY;
		vm->info.validation = "the main Ractor's thread count is not sane "
				      "(rb_ractor_t.threads.cnt)";
		return RBP_ELAYOUT;
	}
	return RBP_ENOTREADY;
}

/*
 * 1 when addr falls in the loaded image of the file Ruby lives in: its
 * PT_LOAD segments, .bss included (which is mapped anonymously, so the
 * mappings' paths do not tell).
 */
static int in_ruby_file(struct rbp_vm *vm, uint64_t addr)
{
	for (size_t i = 0; i < rbp_elf_phnum(vm->elf); i++) {
		const struct rbp_elf_phdr *ph = rbp_elf_phdr(vm->elf, i);
		uint64_t start = ph->vaddr + vm->info.ruby_bias;
		if (ph->type == 1 /* PT_LOAD */ && addr >= start && addr - start < ph->memsz)
			return 1;
	}
	return 0;
}

/* 1 when addr is in one of the writable PT_LOAD segments of Ruby's file. */
static int in_ruby_writable(struct rbp_vm *vm, uint64_t addr)
{
	for (size_t i = 0; i < rbp_elf_phnum(vm->elf); i++) {
		const struct rbp_elf_phdr *ph = rbp_elf_phdr(vm->elf, i);
		uint64_t start = ph->vaddr + vm->info.ruby_bias;
		if (ph->type == 1 /* PT_LOAD */ && (ph->flags & 2 /* PF_W */) &&
		    addr >= start && addr - start < ph->memsz)
			return 1;
	}
	return 0;
}

/*
 * Accept a candidate VM address read from `slot`: the slot holds either
 * the VM pointer itself, or (through the GOT, when the variable is
 * exported) the address of the variable that holds it.  The VM itself may
 * be in Ruby's file too (4.1 allocates it statically, in .bss): a pointer
 * into the file is tried as the VM first, then as the variable.
 */
static int try_vm_slot(struct rbp_vm *vm, uint64_t slot, const char *method)
{
	uint64_t v;

	if (rv_word(vm, slot, &v))
		return RBP_ENOVM;
	if (!v)
		return RBP_ENOTREADY;
	int err = validate_vm(vm, v);
	if (err) {
		if (!in_ruby_file(vm, v))
			return err == RBP_ENOTREADY ? err : RBP_ENOVM;
		if (rv_word(vm, v, &v))
			return RBP_ENOVM;
		if (!v || (err = validate_vm(vm, v)))
			return !v || err == RBP_ENOTREADY ? RBP_ENOTREADY : RBP_ENOVM;
	}
	vm->vm_addr = v;
	vm->info.vm_addr = v;
	vm->info.vm_method = method;
	return RBP_OK;
}

/*
 * The position-independent loads (arch.h: "mov disp32(%rip),%reg" on
 * x86-64, adrp + ldr on aarch64) among the n bytes of code at vaddr, tried
 * in order as the VM's slot; *first_slot gets the first one's slot when it
 * has none yet.  calls[] gets the targets of the calls before the first
 * load (rbp_arch_calls_before_load), at most RV_CALLS, *n_calls how many.
 */
#define RV_CALLS 4
static int vm_from_loads(struct rbp_vm *vm, uint64_t vaddr, size_t n, const char *method,
			 uint64_t *first_slot, uint64_t *calls, size_t *n_calls)
{
	uint64_t slots[16];
	uint8_t code[96];

	*n_calls = 0;
	if (n > sizeof(code) || rbp_elf_read_vaddr(vm->elf, vaddr, code, n))
		return RBP_ENOVM;
	*n_calls = rbp_arch_calls_before_load(code, n, vaddr, calls, RV_CALLS);
	size_t k = rbp_arch_pcrel_loads(code, n, vaddr, slots, 16);
	for (size_t i = 0; i < k; i++) {
		uint64_t slot = slots[i] + vm->info.ruby_bias;
		if (!*first_slot)
			*first_slot = slot;
		if (!try_vm_slot(vm, slot, method))
			return RBP_OK;
	}
	return RBP_ENOVM;
}

/*
 * ruby_vm_at_exit() (exported by every build) starts by loading the VM
 * pointer: the first "mov disp32(%rip),%reg" in it names the variable, or
 * its GOT slot.  Built without optimisation (-O0), it calls rb_current_vm()
 * for it instead: the first function it calls is then decoded the same way.
 */
static int vm_from_code(struct rbp_vm *vm, uint64_t *first_slot)
{
	uint64_t vaddr, calls[RV_CALLS], unused[RV_CALLS];
	size_t n_calls, n_unused;

	*first_slot = 0;
	if (rbp_elf_symbol(vm->elf, "ruby_vm_at_exit", &vaddr, NULL))
		return RBP_ENOVM;
	if (!vm_from_loads(vm, vaddr, 96, "decoded ruby_vm_at_exit", first_slot, calls, &n_calls))
		return RBP_OK;
	for (size_t i = 0; i < n_calls && !*first_slot; i++)
		if (!vm_from_loads(vm, calls[i], 32, "decoded the function ruby_vm_at_exit calls first",
				   first_slot, unused, &n_unused))
			return RBP_OK;
	return RBP_ENOVM;
}

/*
 * Last resort: every word of Ruby's writable segments that validates as a
 * VM (vm -> main thread -> vm, a sane thread count).  Few words pass the
 * first check, and the segments are small (~150 KB for libruby).
 */
static int vm_from_scan(struct rbp_vm *vm)
{
	for (size_t i = 0; i < rbp_elf_phnum(vm->elf); i++) {
		const struct rbp_elf_phdr *ph = rbp_elf_phdr(vm->elf, i);
		if (ph->type != 1 /* PT_LOAD */ || !(ph->flags & 2 /* PF_W */) ||
		    ph->memsz > (8u << 20))
			continue;
		uint64_t start = (ph->vaddr + vm->info.ruby_bias) & ~(uint64_t)7;
		size_t len = (size_t)ph->memsz & ~(size_t)7;
		uint64_t *words = malloc(len);
		if (!words)
			return RBP_ENOMEM;
		if (!rv_read(vm, start, words, len)) {
			for (size_t w = 0; w < len / 8; w++) {
				uint64_t v = words[w];
				/* the VM is on the heap, or (4.1) in Ruby's own
				 * writable segments; never in its code or constants */
				if (v < 0x10000 || v >= RBP_ARCH_USER_END || (v & 7) ||
				    (in_ruby_file(vm, v) && !in_ruby_writable(vm, v)))
					continue;
				if (!validate_vm(vm, v)) {
					free(words);
					vm->vm_addr = vm->info.vm_addr = v;
					vm->info.vm_method = "scanned Ruby's data segment";
					return RBP_OK;
				}
			}
		}
		free(words);
	}
	return RBP_ENOVM;
}

/*
 * The VM: RBP_ENOTREADY when what Ruby's own code reads as the VM pointer
 * is null or names a VM not set up yet; RBP_ELAYOUT when it names a VM
 * that does not fit the layout; RBP_ENOVM when nothing names one.
 */
static int find_vm(struct rbp_vm *vm)
{
	static const char *const names[] = { "ruby_current_vm_ptr", "ruby_current_vm" };
	uint64_t sym, addr, slot = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(vm->discovery & RBP_DISCOVER_SYMBOL) ||
		    ruby_sym(vm, names[i], &sym) || rv_word(vm, sym, &addr))
			continue;
		if (!addr) {
			vm->vm_ptr_null = 1;
			return RBP_ENOTREADY;  /* not initialised yet, or already torn down */
		}
		if (validate_vm(vm, addr))
			return why_invalid(vm, addr);
		vm->vm_addr = addr;
		vm->info.vm_addr = addr;
		vm->info.vm_method = names[i];
		return RBP_OK;
	}
	if ((vm->discovery & RBP_DISCOVER_CODE) && !vm_from_code(vm, &slot))
		return RBP_OK;
	if ((vm->discovery & RBP_DISCOVER_SCAN) && !vm_from_scan(vm))
		return RBP_OK;
	/* the variable ruby_vm_at_exit() reads (or its GOT slot) says why */
	if (!slot || rv_word(vm, slot, &addr))
		return RBP_ENOVM;
	if (addr && in_ruby_file(vm, addr) && validate_vm(vm, addr)) {
		uint64_t v;   /* a GOT slot: the variable's address */
		if (!rv_word(vm, addr, &v))
			addr = v;
	}
	vm->vm_ptr_null = !addr;
	return addr ? why_invalid(vm, addr) : RBP_ENOTREADY;
}

/* A plausible rb_symbols_t: a sane count and an ids Array sized to match. */
static int validate_symbols(struct rbp_vm *vm, uint64_t addr)
{
	const struct rbp_layout *L = vm->L;
	uint32_t last;
	uint64_t ids, len;

	if (rv_read(vm, addr + L->symbols.last_id, &last, 4) ||
	    rv_word(vm, addr + L->symbols.ids, &ids) ||
	    last < 100 || last > (1u << 28) ||
	    rv_array_len(vm, ids, &len) || len < last / L->id.entry_unit ||
	    len > last / L->id.entry_unit + 2)
		return RBP_ECORRUPT;
	return RBP_OK;
}

/*
 * The address a function loads from with its first instruction(s): "mov
 * disp32(%rip),%eax" on x86-64, adrp + ldr on aarch64 (arch.h).
 */
static int decode_first_load(struct rbp_vm *vm, const char *func, uint64_t *target)
{
	uint64_t vaddr;
	uint8_t code[16];

	if (rbp_elf_symbol(vm->elf, func, &vaddr, NULL) ||
	    rbp_elf_read_vaddr(vm->elf, vaddr, code, sizeof(code)) ||
	    rbp_arch_first_load(code, sizeof(code), vaddr, target))
		return RBP_ENOSYM;
	*target += vm->info.ruby_bias;
	return RBP_OK;
}

static int find_symbols(struct rbp_vm *vm)
{
	static const char *const names[] = { "ruby_global_symbols", "global_symbols" };
	uint64_t addr;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!ruby_sym(vm, names[i], &addr) && !validate_symbols(vm, addr)) {
			vm->info.symbols_method = names[i];
			goto found;
		}
	}
	if (!decode_first_load(vm, "rb_sym_immortal_count", &addr)) {
		addr -= (uint64_t)vm->L->symbols.last_id;
		if (!validate_symbols(vm, addr)) {
			vm->info.symbols_method = "decoded rb_sym_immortal_count";
			goto found;
		}
	}
	return RBP_ENOSYM;
found:
	vm->symbols_addr = addr;
	vm->info.symbols_addr = addr;
	return RBP_OK;
}

/*
 * RBP_ENOTREADY while the main thread has no execution context or no VM
 * stack yet (the VM and its main thread exist a moment before the main
 * thread's stack does): a process starting up, not a layout that does not
 * fit.  Read errors are left to rv_validate() to judge.
 */
static int main_thread_ready(struct rbp_vm *vm)
{
	const struct rbp_layout *L = vm->L;
	uint64_t th, ec, stack = 0, cfp = 0;

	if (rv_word(vm, vm->vm_addr + L->vm.main_thread, &th) || !th)
		return th ? RBP_OK : RBP_ENOTREADY;
	if (L->shape.thread_ec == RBP_THREAD_EC_EMBEDDED)
		ec = th + L->thread.ec;
	else if (rv_word(vm, th + L->thread.ec, &ec))
		return RBP_OK;
	if (!ec)
		return RBP_ENOTREADY;
	if (rv_word(vm, ec + L->ec.vm_stack, &stack) || rv_word(vm, ec + L->ec.cfp, &cfp))
		return RBP_OK;
	/* Ruby sets an EC's stack and frame pointer together: a stack without a
	 * frame pointer is a layout that does not fit, left to validation */
	return stack ? RBP_OK : RBP_ENOTREADY;
}

int rv_discover(struct rbp_vm *vm, const struct rbp_vm_opts *opts)
{
	int err;

	if ((err = find_module(vm)) || (err = read_version(vm)))
		return err;
	/*
	 * One read of the target's memory before anything else: without the
	 * right to read it (no CAP_SYS_PTRACE in a container, another user's
	 * process) say so, rather than "VM not found" later.
	 */
	uint64_t vaddr;
	uint8_t byte;
	if (!rbp_elf_symbol(vm->elf, "ruby_version", &vaddr, NULL)) {
		err = rv_read(vm, vaddr + vm->info.ruby_bias, &byte, 1);
		if (err == RBP_EPERM || err == RBP_ENOPROC)
			return err;
	}
	vm->info.version = vm->version;
	open_debug_info(vm);
	vm->discovery = opts && opts->discovery ? opts->discovery :
			RBP_DISCOVER_SYMBOL | RBP_DISCOVER_CODE | RBP_DISCOVER_SCAN;
	vm->info.validation = "";
	if ((err = rv_pick_layout(vm, opts)))
		return err;
	if ((err = find_vm(vm))) {
		/* with a layout that is not this version's own, a VM that does not
		 * validate is the layout's fault, not a process starting up */
		if ((vm->info.layout_assumed || (opts && opts->force_version)) &&
		    (err == RBP_ENOVM || err == RBP_ECORRUPT || err == RBP_ENOTREADY)) {
			/* a guessed layout is checked against a VM or refused */
			vm->info.validation = vm->vm_ptr_null ?
				"there is no VM to check it against yet (the VM pointer is null)" :
				"the VM does not validate (vm -> main thread -> vm)";
			err = RBP_ELAYOUT;
		}
		if (err == RBP_ELAYOUT)
			rv_explain_result(vm, "does not fit: %s", vm->info.validation);
		return err;
	}
	/* without the symbol table C frames are unnamed, but stacks still work */
	if (find_symbols(vm))
		vm->info.symbols_method = "not found";
	if ((err = main_thread_ready(vm)))
		return err;
	if ((err = rv_validate(vm, vm->info.layout_assumed)) == RBP_ELAYOUT)
		rv_explain_result(vm, "does not fit: %s", vm->info.validation);
	if (!err)
		rv_check_objspace(vm);
	return err;
}
