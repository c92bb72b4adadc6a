/*
 * native.c - native stacks of a live process with elfutils' libdwfl (see
 * native.h for the interface).
 *
 * Why libdwfl rather than libunwind-ptrace: one library does both jobs,
 * unwinding (CFI from .eh_frame or .debug_frame) and symbolization
 * (.symtab/.dynsym, split debug info found by build-id or debuglink, DWARF
 * line tables); it reads the target's memory with process_vm_readv through
 * a page cache (libunwind-ptrace peeks one word per ptrace call); and it
 * takes files from us, so a target in a container is unwound with the
 * libraries under its own root rather than the host's.  It accepts threads
 * the caller already holds in a ptrace-stop (dwfl_linux_proc_attach with
 * assume_ptrace_stopped), which is how rbpeek pauses a target anyway.
 *
 * Modules: every file the target maps is reported once, by the path the
 * target sees (the module name) and opened under t->root; its load base
 * is the start of its mapping at file offset 0.  The vDSO is reported too
 * (libdwfl reads its image from memory), so a thread in clock_gettime
 * unwinds through it.  Libraries loaded later
 * (a C extension required after we attached) show up as an unwind that
 * stops at an address in no module: then /proc/PID/maps is read again
 * (at most once per RESCAN_EVERY unwinds) and new files are added, by
 * rbp_native_refresh() once the target runs again: no file is opened
 * while its threads are held.  Every file the target names (its
 * libraries, their split debug info under its root) is opened with
 * rbp_open_regular(): a FIFO or device planted at such a path is skipped,
 * never waited on.
 *
 * Symbols are cached by address: a profile sees the same few thousand
 * return addresses over and over, so each costs one symbol lookup for the
 * whole run.
 */
#include "proc/native.h"

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "proc/elf.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/strpool.h"

#define RESCAN_EVERY 64   /* unwinds between two re-reads of /proc/PID/maps */

struct rbp_native {
	struct rbp_target *t;        /* not owned */
	Dwfl *dwfl;
	Dwfl_Callbacks cb;           /* dwfl keeps a pointer to it */
	char *debuginfo_path;        /* ":.debug:<root>/usr/lib/debug", for cb */
	struct rbp_hmap reported;    /* mix(path hash, base) -> 1: modules reported */
	struct rbp_hmap syms;        /* pc -> struct rbp_native_sym * (malloc'd) */
	struct rbp_hmap full;        /* module low address -> full_symbols + 1 */
	struct rbp_hmap fdes;        /* module low address -> struct fde_table * (malloc'd) */
	struct rbp_strpool pool;     /* names, files, module paths */
	uint64_t last_rescan;        /* stats.unwinds at the last maps re-read */
	int rescan_wanted;           /* an unwind ended in no module: re-read the maps */
	struct rbp_native_stats stats;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* ---- split debug info, found without blocking ------------------------- */

/* 1 when debug file fd carries the module's build-id (bits, len bytes). */
static int same_build_id(int fd, const unsigned char *bits, int len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id = NULL;
	ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	int same = n == len && id && !memcmp(id, bits, (size_t)len);

	if (elf)
		elf_end(elf);
	return same;
}

/* 1 when the CRC-32 of the whole of fd is crc (a .gnu_debuglink's check). */
static int same_crc(int fd, GElf_Word crc)
{
	unsigned char buf[65536];
	uLong c = crc32(0L, Z_NULL, 0);
	off_t off = 0;
	ssize_t got;

	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		c = crc32(c, buf, (uInt)got);
		off += got;
	}
	return got == 0 && (GElf_Word)c == crc;
}

/*
 * Try one candidate path: opened with rbp_open_regular (a FIFO or device
 * planted at a debug path never blocks us), and kept only when it is the
 * module's: same build-id when the module has one, else same CRC.
 */
static int try_debug_file(const char *path, const unsigned char *bits, int len, GElf_Word crc,
			  char **name)
{
	int fd = rbp_open_regular(path);

	if (fd < 0)
		return -1;
	if (len > 0 ? !same_build_id(fd, bits, len) : crc && !same_crc(fd, crc)) {
		close(fd);
		return -1;
	}
	*name = strdup(path);
	return fd;
}

/*
 * libdwfl's find_debuginfo, for every module: the build-id file under the
 * target's root (ROOT/usr/lib/debug/.build-id/xx/rest.debug), then the
 * .gnu_debuglink name beside the file, in its .debug directory and under
 * ROOT/usr/lib/debug: the places dwfl_standard_find_debuginfo looks, with
 * its checks, but opened safely (see rbp_open_regular).
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *link, GElf_Word crc, char **name)
{
	struct rbp_native *n = *userdata;
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	char path[4096], dir[4096], tdir[4096];
	int len = dwfl_module_build_id(mod, &bits, &vaddr), fd = -1;

	if (!n)
		return -1;
	if (len > 0) {
		int k = snprintf(path, sizeof(path), "%s/usr/lib/debug/.build-id/%02x/", n->t->root, bits[0]);
		for (int i = 1; i < len && k > 0 && (size_t)k + 3 < sizeof(path); i++)
			k += snprintf(path + k, sizeof(path) - (size_t)k, "%02x", bits[i]);
		if (k > 0 && (size_t)k + 7 < sizeof(path)) {
			memcpy(path + k, ".debug", 7);
			if ((fd = try_debug_file(path, bits, len, crc, name)) >= 0)
				return fd;
		}
	}
	if (!link || !*link || !file_name || !modname)
		return -1;
	/* the file's directory as we open it, and as the target sees it */
	snprintf(dir, sizeof(dir), "%s", file_name);
	snprintf(tdir, sizeof(tdir), "%s", modname);
	*(strrchr(dir, '/') ? strrchr(dir, '/') : dir) = 0;
	*(strrchr(tdir, '/') ? strrchr(tdir, '/') : tdir) = 0;
	const char *const fmts[] = { "%s%s/%s", "%s%s/.debug/%s", "%s/usr/lib/debug%s/%s" };
	const char *const pre[] = { "", "", n->t->root };
	for (size_t i = 0; i < 3 && fd < 0; i++) {
		int k = snprintf(path, sizeof(path), fmts[i], pre[i], i < 2 ? dir : tdir, link);
		if (k > 0 && (size_t)k < sizeof(path))
			fd = try_debug_file(path, len > 0 ? bits : NULL, len, crc, name);
	}
	return fd;
}

/*
 * Report file (opened safely: never a FIFO or device the target planted)
 * as module name at base; 1 when libdwfl took it (and the descriptor).
 */
static int report_file(struct rbp_native *n, const char *name, const char *file, uint64_t base)
{
	int fd = rbp_open_regular(file);

	if (fd < 0)
		return 0;
	Dwfl_Module *m = dwfl_report_elf(n->dwfl, name, file, fd, base, false);
	void **ud;

	if (!m) {
		close(fd);
		return 0;
	}
	/* find_debuginfo gets n back from here */
	if (dwfl_module_info(m, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		*ud = n;
	return 1;
}

/* Report one mapping at file offset 0 to libdwfl; 1 when it took it. */
static int report_one(struct rbp_native *n, const struct rbp_mapping *mp)
{
	char path[4096];

	/* the kernel's vDSO: dwfl_linux_proc_find_elf reads its image */
	if (!strcmp(mp->path, "[vdso]"))
		return dwfl_report_module(n->dwfl, "[vdso]", mp->start, mp->end) != NULL;
	/*
	 * Through the target's root first (a container's own files); a
	 * process merely chroot'ed in our mount namespace shows our paths in
	 * its maps.  Not an ELF file (a locale archive, a font): dwfl
	 * declines it.
	 */
	return (!rbp_target_path(n->t, mp->path, path, sizeof(path)) &&
		report_file(n, mp->path, path, mp->start)) ||
	       (n->t->root[0] && report_file(n, mp->path, mp->path, mp->start));
}

/* Report every file mapping of m not reported yet; *added counts new ones. */
static int report_maps(struct rbp_native *n, const struct rbp_maps *m, int *added)
{
	uint64_t v;

	dwfl_report_begin_add(n->dwfl);
	for (size_t i = 0; i < m->n; i++) {
		const struct rbp_mapping *mp = &m->v[i];
		if (!mp->path || (mp->path[0] != '/' && strcmp(mp->path, "[vdso]")) ||
		    mp->deleted || mp->offset != 0)
			continue;
		uint64_t key = rbp_mix64(hash_str(mp->path), mp->start);
		if (rbp_hmap_get(&n->reported, key, &v))
			continue;
		*added += report_one(n, mp);
		if (rbp_hmap_put(&n->reported, key, 1)) {
			dwfl_report_end(n->dwfl, NULL, NULL);
			return RBP_ENOMEM;
		}
	}
	if (dwfl_report_end(n->dwfl, NULL, NULL))
		return RBP_EBADELF;
	return RBP_OK;
}

int rbp_native_available(void)
{
	return 1;
}

int rbp_native_open(struct rbp_target *t, struct rbp_native **out)
{
	struct rbp_native *n;
	int added = 0, err;

	if (t->is_core)
		return RBP_EINVAL;
	if (!(n = calloc(1, sizeof(*n))))
		return RBP_ENOMEM;
	n->t = t;
	if (asprintf(&n->debuginfo_path, ":.debug:%s/usr/lib/debug", t->root) < 0) {
		free(n);
		return RBP_ENOMEM;
	}
	n->cb.find_elf = dwfl_linux_proc_find_elf;   /* for the vDSO; files are given */
	n->cb.find_debuginfo = find_debuginfo;
	n->cb.debuginfo_path = &n->debuginfo_path;
	if (!(n->dwfl = dwfl_begin(&n->cb))) {
		rbp_native_close(n);
		return RBP_ENOMEM;
	}
	if ((err = report_maps(n, &t->maps, &added))) {
		rbp_native_close(n);
		return err;
	}
	if (dwfl_linux_proc_attach(n->dwfl, t->pid, true)) {
		rbp_native_close(n);
		return RBP_EPTRACE;
	}
	*out = n;
	return RBP_OK;
}

void rbp_native_close(struct rbp_native *n)
{
	if (!n)
		return;
	if (n->dwfl)
		dwfl_end(n->dwfl);
	for (size_t i = 0; i < n->syms.cap; i++)
		if (n->syms.keys[i])
			free((void *)(uintptr_t)n->syms.vals[i]);
	rbp_hmap_clear(&n->syms);
	for (size_t i = 0; i < n->fdes.cap; i++)
		if (n->fdes.keys[i])
			free((void *)(uintptr_t)n->fdes.vals[i]);
	rbp_hmap_clear(&n->fdes);
	rbp_hmap_clear(&n->reported);
	rbp_hmap_clear(&n->full);
	rbp_strpool_free(&n->pool);
	free(n->debuginfo_path);
	free(n);
}

struct unwind_ctx {
	uint64_t *pcs;
	size_t cap, n;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct unwind_ctx *u = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation) || !pc)
		return DWARF_CB_ABORT;
	u->pcs[u->n++] = activation ? pc : pc - 1;
	return u->n < u->cap ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* Re-read /proc/PID/maps and report new files; 1 when some were added. */
static int rescan(struct rbp_native *n)
{
	struct rbp_maps m = { 0 };
	int added = 0;

	n->last_rescan = n->stats.unwinds;
	n->stats.rescans++;
	if (rbp_maps_read_pid(n->t->pid, &m))
		return 0;
	if (report_maps(n, &m, &added))
		added = 0;
	rbp_maps_free(&m);
	return added > 0;
}

void rbp_native_refresh(struct rbp_native *n)
{
	if (n && n->rescan_wanted &&
	    (!n->stats.rescans || n->stats.unwinds - n->last_rescan >= RESCAN_EVERY)) {
		n->rescan_wanted = 0;
		rescan(n);
	}
}

int rbp_native_unwind(struct rbp_native *n, pid_t tid, uint64_t *pcs, size_t cap,
		      size_t *count)
{
	struct unwind_ctx u = { pcs, cap, 0 };

	*count = 0;
	if (!cap)
		return RBP_EINVAL;
	n->stats.unwinds++;
	dwfl_getthread_frames(n->dwfl, tid, frame_cb, &u);
	/* no file is opened here, while the thread is held: rbp_native_refresh() */
	if (u.n && u.n < cap && !dwfl_addrmodule(n->dwfl, pcs[u.n - 1]))
		n->rescan_wanted = 1;
	n->stats.frames += u.n;
	*count = u.n;
	if (!u.n)
		return dwfl_errno() ? RBP_ENOPROC : RBP_EFAULT;
	return RBP_OK;
}

/* 1 when elf has a .symtab section. */
static int has_symtab(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while (elf && (scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return 1;
	return 0;
}

/* Whether module m names its static functions (cached per module). */
static int full_symbols(struct rbp_native *n, Dwfl_Module *m, Dwarf_Addr low)
{
	Dwarf_Addr bias;
	uint64_t v;
	int full;

	if (rbp_hmap_get(&n->full, low, &v))
		return (int)v - 1;
	full = has_symtab(dwfl_module_getelf(m, &bias));
	if (!full) {
		Dwarf *dw = dwfl_module_getdwarf(m, &bias);
		full = dw && has_symtab(dwarf_getelf(dw));
	}
	rbp_hmap_put(&n->full, low, (uint64_t)full + 1);
	return full;
}

/*
 * The binary-search table of a module's .eh_frame_hdr: one (function start,
 * FDE) pair per function, sorted by start, as the linker writes it
 * (version 1, table encoding DW_EH_PE_datarel | DW_EH_PE_sdata4: 32-bit
 * offsets from the section's own address).  It names the start of the
 * function around any pc, which a stripped file's symbols cannot.
 */
struct fde_table {
	const uint8_t *pairs;   /* count pairs of int32 (start, fde), in the ELF's data */
	size_t count;
	uint64_t hdr_addr;      /* run-time address of .eh_frame_hdr */
};

static void load_fde_table(Dwfl_Module *m, struct fde_table *ft)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(m, &bias);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx;
	uint32_t count;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		if (!gelf_getshdr(scn, &sh) ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".eh_frame_hdr"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		const uint8_t *b = d ? d->d_buf : NULL;
		if (!b || d->d_size < 12 || b[0] != 1 || b[1] != 0x1b || b[2] != 0x03 || b[3] != 0x3b)
			return;
		memcpy(&count, b + 8, 4);
		if (count > (d->d_size - 12) / 8)
			return;
		ft->pairs = b + 12;
		ft->count = count;
		ft->hdr_addr = sh.sh_addr + bias;
		return;
	}
}

/* Start of the function containing pc from .eh_frame_hdr, 0 unknown. */
static uint64_t fde_start(struct rbp_native *n, Dwfl_Module *m, Dwarf_Addr low, uint64_t pc)
{
	struct fde_table *ft;
	uint64_t v;

	if (rbp_hmap_get(&n->fdes, low, &v)) {
		ft = (struct fde_table *)(uintptr_t)v;
	} else {
		if (!(ft = calloc(1, sizeof(*ft))))
			return 0;
		load_fde_table(m, ft);
		if (rbp_hmap_put(&n->fdes, low, (uint64_t)(uintptr_t)ft)) {
			free(ft);
			return 0;
		}
	}
	int64_t rel = (int64_t)(pc - ft->hdr_addr);
	size_t lo = 0, hi = ft->count;   /* first entry with start > rel */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int32_t start;
		memcpy(&start, ft->pairs + mid * 8, 4);
		if (start <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	int32_t start;
	if (!lo)
		return 0;
	memcpy(&start, ft->pairs + (lo - 1) * 8, 4);
	return ft->hdr_addr + (uint64_t)(int64_t)start;
}

static void fill_sym(struct rbp_native *n, uint64_t pc, struct rbp_native_sym *s)
{
	Dwfl_Module *m = dwfl_addrmodule(n->dwfl, pc);
	char buf[512];
	Dwarf_Addr low;
	GElf_Off off;
	GElf_Sym es;
	int line;

	s->file = s->module = "";
	if (!m) {   /* anonymous code: a JIT, a trampoline */
		s->name = "[unknown]";
		return;
	}
	const char *mod = dwfl_module_info(m, NULL, &low, NULL, NULL, NULL, NULL, NULL);
	s->module = rbp_strpool_intern0(&n->pool, mod ? mod : "");
	s->full_symbols = (uint8_t)full_symbols(n, m, low);
	const char *name = dwfl_module_addrinfo(m, pc, &off, &es, NULL, NULL, NULL);
	if (name && (es.st_size == 0 || off < es.st_size)) {
		s->name = rbp_strpool_intern0(&n->pool, name);
		s->named = 1;
		s->start = pc - off;
	} else {
		/*
		 * Named by where its function starts, so its samples add up;
		 * by the file alone when that is unknown (the vDSO's image has
		 * no section headers).
		 */
		const char *base = mod ? strrchr(mod, '/') : NULL;
		base = base ? base + 1 : mod ? mod : "?";
		s->start = fde_start(n, m, low, pc);
		if (s->start)
			snprintf(buf, sizeof(buf), "%s+0x%llx", base,
				 (unsigned long long)(s->start - low));
		else
			snprintf(buf, sizeof(buf), "%s", base);
		s->name = rbp_strpool_intern0(&n->pool, buf);
	}
	Dwfl_Line *ln = dwfl_module_getsrc(m, pc);
	const char *file = ln ? dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL) : NULL;
	if (file) {
		s->file = rbp_strpool_intern0(&n->pool, file);
		s->line = line;
	}
	if (!s->name || !s->file || !s->module)
		s->name = NULL;   /* out of memory */
}

int rbp_native_symbol(struct rbp_native *n, uint64_t pc, const struct rbp_native_sym **out)
{
	struct rbp_native_sym *s;
	uint64_t v;

	if (!pc)
		return RBP_EINVAL;
	if (rbp_hmap_get(&n->syms, pc, &v)) {
		*out = (const struct rbp_native_sym *)(uintptr_t)v;
		return RBP_OK;
	}
	if (!(s = calloc(1, sizeof(*s))))
		return RBP_ENOMEM;
	n->stats.sym_misses++;
	fill_sym(n, pc, s);
	if (!s->name || rbp_hmap_put(&n->syms, pc, (uint64_t)(uintptr_t)s)) {
		free(s);
		return RBP_ENOMEM;
	}
	*out = s;
	return RBP_OK;
}

void rbp_native_stats(const struct rbp_native *n, struct rbp_native_stats *out)
{
	*out = n->stats;
}

void rbp_native_stats_add(const struct rbp_native *n, struct rbp_native_stats *sum)
{
	if (n)
		rbp_native_stats_sum(sum, &n->stats);
}
