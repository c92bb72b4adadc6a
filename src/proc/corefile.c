/*
 * corefile.c - an ELF core file as a target.
 *
 * The program headers say what memory the core holds: each PT_LOAD is one
 * mapping of the dumped process, with its bytes at p_offset for p_filesz
 * (which may be 0, or less than p_memsz, when the dumper skipped pages it
 * could get back from a file: text and read-only data of binaries).  The
 * notes (PT_NOTE) say the rest:
 *
 *   NT_PRSTATUS  one per thread; pr_pid is the thread id
 *   NT_PRPSINFO  the process: pr_pid and pr_fname (its comm)
 *   NT_FILE      the file-backed mappings: start, end, file offset, path
 *
 * A read is served piece by piece: from the core where the PT_LOAD has
 * file contents; else from the file an NT_FILE entry maps there (under the
 * sysroot, opened once and cached); else it fails with RBP_EFAULT.  A core
 * truncated after its notes opens fine, and reads of the missing parts fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <unistd.h>

#include "proc/elf.h"
#include "proc/target.h"
#include "util/err.h"
#include "util/vec.h"

#define PT_LOAD_ 1
#define PT_NOTE_ 4
#define NT_PRSTATUS_ 1
#define NT_PRPSINFO_ 3
#define NT_FILE_ 0x46494c45
/* The notes' own layouts, this machine's (x86-64 and aarch64 alike: 32, 24, 40) */
#define PRSTATUS_PID_OFF offsetof(struct elf_prstatus, pr_pid)
#define PRPSINFO_PID_OFF offsetof(struct elf_prpsinfo, pr_pid)
#define PRPSINFO_FNAME_OFF offsetof(struct elf_prpsinfo, pr_fname) /* [16] */
#define MAX_NOTES_SIZE (64u << 20)

/* A PT_LOAD of the core. */
struct core_load {
	uint64_t vaddr, memsz;
	uint64_t offset, filesz; /* contents in the core file */
	uint64_t avail;          /* bytes of filesz actually present */
	unsigned prot;
};

/* An NT_FILE entry. */
struct core_map {
	uint64_t start, end, offset;
	size_t file;             /* index in core_reader.files */
};

/* A file named by NT_FILE, opened on first use. */
struct core_file {
	char *path;              /* as in the note, owned */
	int fd;                  /* -1 not tried yet, -2 failed */
};

struct core_reader {
	struct rbp_reader base;
	struct rbp_elf *elf;     /* the core, owned */
	struct core_load *loads; /* sorted by vaddr */
	size_t nloads;
	struct core_map *maps;   /* sorted by start */
	size_t nmaps;
	struct core_file *files;
	size_t nfiles;
	char *sysroot;           /* owned; "" when none */
};

/* What the notes say, before it is moved into the target. */
struct core_notes {
	pid_t *tids;
	size_t ntids, tids_cap;
	pid_t pid;
	char comm[17];
};

static uint32_t rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void core_close(struct rbp_reader *base)
{
	struct core_reader *r = (struct core_reader *)base;

	for (size_t i = 0; i < r->nfiles; i++) {
		if (r->files[i].fd >= 0)
			close(r->files[i].fd);
		free(r->files[i].path);
	}
	free(r->files);
	free(r->maps);
	free(r->loads);
	free(r->sysroot);
	rbp_elf_close(r->elf);
	free(r);
}

/* The load containing addr (by memsz) or NULL; *next: the next load start. */
static const struct core_load *load_at(const struct core_reader *r,
				       uint64_t addr, uint64_t *next)
{
	size_t lo = 0, hi = r->nloads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->loads[mid].vaddr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*next = lo < r->nloads ? r->loads[lo].vaddr : UINT64_MAX;
	if (lo && addr - r->loads[lo - 1].vaddr < r->loads[lo - 1].memsz)
		return &r->loads[lo - 1];
	return NULL;
}

static const struct core_map *map_at(const struct core_reader *r,
				     uint64_t addr)
{
	size_t lo = 0, hi = r->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < r->maps[mid].start)
			hi = mid;
		else if (addr >= r->maps[mid].end)
			lo = mid + 1;
		else
			return &r->maps[mid];
	}
	return NULL;
}

/* The cached descriptor of file i, opening it under the sysroot once. */
static int file_fd(struct core_reader *r, size_t i)
{
	struct core_file *f = &r->files[i];
	char path[4096];

	if (f->fd == -1) {
		int n = snprintf(path, sizeof(path), "%s%s", r->sysroot, f->path);

		f->fd = -2;
		if (n > 0 && (size_t)n < sizeof(path)) {
			int fd = rbp_open_regular(path);   /* never a FIFO of the sysroot's */

			f->fd = fd >= 0 ? fd : -2;
		}
	}
	return f->fd;
}

/* pread exactly len bytes or fail. */
static int pread_all(int fd, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;

	if (off > INT64_MAX || len > INT64_MAX - off)
		return RBP_EFAULT;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return RBP_EFAULT;
		done += (size_t)n;
	}
	return RBP_OK;
}

/* Serve [addr, addr+*n) from the file an NT_FILE entry maps; may shrink *n. */
static int read_from_file(struct core_reader *r, const struct core_load *l,
			  uint64_t next, uint64_t addr, void *buf, size_t *n)
{
	const struct core_map *m = map_at(r, addr);
	uint64_t limit;
	int fd;

	if (!m)
		return RBP_EFAULT;
	limit = l ? l->vaddr + l->memsz : next;
	if (m->end < limit)
		limit = m->end;
	if (limit - addr < *n)
		*n = (size_t)(limit - addr);
	fd = file_fd(r, m->file);
	if (fd < 0)
		return RBP_EFAULT;
	return pread_all(fd, m->offset + (addr - m->start), buf, *n);
}

/* One piece of a read: at most up to the next region boundary. */
static int core_read_piece(struct core_reader *r, uint64_t addr, void *buf,
			   size_t *n)
{
	uint64_t next;
	const struct core_load *l = load_at(r, addr, &next);

	if (l && addr - l->vaddr < l->filesz) {
		uint64_t skip = addr - l->vaddr;

		if (skip >= l->avail)
			return RBP_EFAULT;  /* truncated core */
		if (l->avail - skip < *n)
			*n = (size_t)(l->avail - skip);
		return rbp_elf_pread(r->elf, l->offset + skip, buf, *n) ?
		       RBP_EFAULT : RBP_OK;
	}
	return read_from_file(r, l, next, addr, buf, n);
}

static int core_read(struct rbp_reader *base, uint64_t addr, void *buf,
		     size_t len)
{
	struct core_reader *r = (struct core_reader *)base;

	if (addr + len < addr)
		return RBP_EFAULT;
	while (len) {
		size_t n = len;
		int err = core_read_piece(r, addr, buf, &n);

		if (err)
			return err;
		buf = (char *)buf + n;
		addr += n;
		len -= n;
	}
	return RBP_OK;
}

static const struct rbp_reader_ops core_ops = {
	.read = core_read,
	.close = core_close,
};

static int cmp_load(const void *a, const void *b)
{
	const struct core_load *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* ELF p_flags (X=1 W=2 R=4) as RBP_PROT_*. */
static unsigned pf_to_prot(uint32_t f)
{
	return ((f & 4) ? RBP_PROT_R : 0) | ((f & 2) ? RBP_PROT_W : 0) |
	       ((f & 1) ? RBP_PROT_X : 0);
}

/* Copy the PT_LOADs into r->loads, sorted, with what the file holds. */
static int collect_loads(struct core_reader *r)
{
	size_t n = rbp_elf_phnum(r->elf);
	uint64_t fsize = rbp_elf_file_size(r->elf);

	r->loads = calloc(n ? n : 1, sizeof(*r->loads));
	if (!r->loads)
		return RBP_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct rbp_elf_phdr *p = rbp_elf_phdr(r->elf, i);
		struct core_load *l = &r->loads[r->nloads];

		if (p->type != PT_LOAD_ || p->memsz == 0)
			continue;
		l->vaddr = p->vaddr;
		l->memsz = p->memsz;
		l->offset = p->offset;
		l->filesz = p->filesz < p->memsz ? p->filesz : p->memsz;
		l->avail = p->offset >= fsize ? 0 : fsize - p->offset;
		if (l->avail > l->filesz)
			l->avail = l->filesz;
		l->prot = pf_to_prot(p->flags);
		r->nloads++;
	}
	qsort(r->loads, r->nloads, sizeof(*r->loads), cmp_load);
	return RBP_OK;
}

/* Register path as file of the next map; consecutive duplicates share. */
static int add_file(struct core_reader *r, const char *path, size_t len)
{
	struct core_file *f = r->nfiles ? &r->files[r->nfiles - 1] : NULL;

	if (f && strlen(f->path) == len && !memcmp(f->path, path, len))
		return RBP_OK;
	f = &r->files[r->nfiles];
	f->path = strndup(path, len);
	if (!f->path)
		return RBP_ENOMEM;
	f->fd = -1;
	r->nfiles++;
	return RBP_OK;
}

static int cmp_map(const void *a, const void *b)
{
	const struct core_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * NT_FILE: count, page size, count x (start, end, page offset), then count
 * NUL-terminated paths.  A second NT_FILE note is ignored.
 */
static int parse_nt_file(struct core_reader *r, const unsigned char *d,
			 size_t len)
{
	uint64_t count, page;
	const char *s, *end = (const char *)d + len;

	if (r->maps || len < 16)
		return r->maps ? RBP_OK : RBP_EBADCORE;
	count = rd64(d);
	page = rd64(d + 8);
	if (count > (len - 16) / 24 || page == 0 || (page & (page - 1)))
		return RBP_EBADCORE;
	r->maps = calloc(count ? count : 1, sizeof(*r->maps));
	r->files = calloc(count ? count : 1, sizeof(*r->files));
	if (!r->maps || !r->files)
		return RBP_ENOMEM;
	s = (const char *)d + 16 + count * 24;
	for (size_t i = 0; i < count; i++) {
		const unsigned char *e = d + 16 + i * 24;
		const char *nul = memchr(s, '\0', (size_t)(end - s));
		struct core_map *m = &r->maps[i];
		int err;

		if (!nul)
			return RBP_EBADCORE;
		m->start = rd64(e);
		m->end = rd64(e + 8);
		m->offset = rd64(e + 16) * page;
		if (m->end < m->start || rd64(e + 16) > UINT64_MAX / page)
			return RBP_EBADCORE;
		err = add_file(r, s, (size_t)(nul - s));
		if (err)
			return err;
		m->file = r->nfiles - 1;
		r->nmaps++;
		s = nul + 1;
	}
	qsort(r->maps, r->nmaps, sizeof(*r->maps), cmp_map);
	return RBP_OK;
}

static int add_tid(struct core_notes *cn, pid_t tid)
{
	if (rbp_grow(&cn->tids, &cn->tids_cap, cn->ntids + 1, sizeof(*cn->tids)))
		return RBP_ENOMEM;
	cn->tids[cn->ntids++] = tid;
	return RBP_OK;
}

/* One "CORE" note of the given type. */
static int handle_note(struct core_reader *r, struct core_notes *cn,
		       uint32_t type, const unsigned char *d, size_t len)
{
	switch (type) {
	case NT_PRSTATUS_:
		if (len < PRSTATUS_PID_OFF + 4)
			return RBP_EBADCORE;
		return add_tid(cn, (pid_t)rd32(d + PRSTATUS_PID_OFF));
	case NT_PRPSINFO_:
		if (len < PRPSINFO_FNAME_OFF + 16)
			return RBP_EBADCORE;
		cn->pid = (pid_t)rd32(d + PRPSINFO_PID_OFF);
		memcpy(cn->comm, d + PRPSINFO_FNAME_OFF, 16);
		cn->comm[16] = '\0';
		return RBP_OK;
	case NT_FILE_:
		return parse_nt_file(r, d, len);
	}
	return RBP_OK;
}

/* Walk the notes in buf[0..len): 4-byte aligned name and desc. */
static int parse_notes(struct core_reader *r, struct core_notes *cn,
		       const unsigned char *buf, size_t len)
{
	size_t off = 0;

	while (len - off >= 12) {
		uint32_t namesz = rd32(buf + off), descsz = rd32(buf + off + 4);
		uint32_t type = rd32(buf + off + 8);
		size_t name_pad = ((size_t)namesz + 3) & ~(size_t)3;
		size_t desc_pad = ((size_t)descsz + 3) & ~(size_t)3;
		const unsigned char *name = buf + off + 12;
		int err;

		off += 12;
		if (name_pad > len - off || desc_pad > len - off - name_pad)
			return RBP_EBADCORE;
		off += name_pad;
		if (namesz == 5 && !memcmp(name, "CORE", 5)) {
			err = handle_note(r, cn, type, buf + off, descsz);
			if (err)
				return err;
		}
		off += desc_pad;
	}
	return RBP_OK;
}

/* Read and parse every PT_NOTE; at least one must exist and be whole. */
static int read_notes(struct core_reader *r, struct core_notes *cn)
{
	size_t n = rbp_elf_phnum(r->elf), found = 0;

	for (size_t i = 0; i < n; i++) {
		const struct rbp_elf_phdr *p = rbp_elf_phdr(r->elf, i);
		unsigned char *buf;
		int err;

		if (p->type != PT_NOTE_)
			continue;
		if (p->filesz > MAX_NOTES_SIZE ||
		    p->filesz > rbp_elf_file_size(r->elf))
			return RBP_EBADCORE;
		buf = malloc(p->filesz ? (size_t)p->filesz : 1);
		if (!buf)
			return RBP_ENOMEM;
		err = rbp_elf_pread(r->elf, p->offset, buf, (size_t)p->filesz);
		if (!err)
			err = parse_notes(r, cn, buf, (size_t)p->filesz);
		free(buf);
		if (err)
			return err == RBP_ENOMEM ? err : RBP_EBADCORE;
		found++;
	}
	return found ? RBP_OK : RBP_EBADCORE;
}

/* 1 when [start, end) overlaps an NT_FILE entry (sorted, disjoint). */
static int overlaps_file(const struct core_reader *r, uint64_t start,
			 uint64_t end)
{
	size_t lo = 0, hi = r->nmaps;

	while (lo < hi) {  /* first entry ending after start */
		size_t mid = lo + (hi - lo) / 2;

		if (r->maps[mid].end <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nmaps && r->maps[lo].start < end;
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct rbp_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The target's maps: every NT_FILE entry (prot from the PT_LOAD at its
 * start), plus every PT_LOAD no file entry overlaps, as anonymous memory.
 */
static int build_maps(const struct core_reader *r, struct rbp_maps *out)
{
	out->v = calloc(r->nmaps + r->nloads + 1, sizeof(*out->v));
	if (!out->v)
		return RBP_ENOMEM;
	for (size_t i = 0; i < r->nmaps; i++) {
		const struct core_map *cm = &r->maps[i];
		struct rbp_mapping *m = &out->v[out->n];
		uint64_t next;
		const struct core_load *l = load_at(r, cm->start, &next);

		m->start = cm->start;
		m->end = cm->end;
		m->offset = cm->offset;
		m->prot = l ? l->prot : 0;
		m->path = strdup(r->files[cm->file].path);
		if (!m->path)
			return RBP_ENOMEM;
		out->n++;
	}
	for (size_t i = 0; i < r->nloads; i++) {
		const struct core_load *l = &r->loads[i];
		struct rbp_mapping *m = &out->v[out->n];

		if (overlaps_file(r, l->vaddr, l->vaddr + l->memsz))
			continue;
		m->start = l->vaddr;
		m->end = l->vaddr + l->memsz;
		m->prot = l->prot;
		out->n++;
	}
	qsort(out->v, out->n, sizeof(*out->v), cmp_mapping);
	return RBP_OK;
}

/* Open the core and parse everything the reader needs. */
static int core_reader_open(const char *path, const char *sysroot,
			    struct core_reader **out, struct core_notes *cn)
{
	struct core_reader *r = calloc(1, sizeof(*r));
	int err;

	*out = NULL;
	if (!r)
		return RBP_ENOMEM;
	r->base.ops = &core_ops;
	r->sysroot = strdup(sysroot ? sysroot : "");
	err = r->sysroot ? rbp_elf_open(path, &r->elf) : RBP_ENOMEM;
	if (err == RBP_EBADELF || (!err && rbp_elf_type(r->elf) != 4))
		err = RBP_EBADCORE;
	if (!err)
		err = collect_loads(r);
	if (!err)
		err = read_notes(r, cn);
	if (err) {
		core_close(&r->base);
		return err;
	}
	*out = r;
	return RBP_OK;
}

/* *out owned by the caller (rbp_target_close). */
int rbp_target_open_core(const char *path, const char *sysroot,
			 struct rbp_target **out)
{
	struct core_notes cn = { 0 };
	struct core_reader *r = NULL;
	struct rbp_target *t;
	int err;

	*out = NULL;
	if (sysroot && strlen(sysroot) >= sizeof(t->root))
		return RBP_EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return RBP_ENOMEM;
	err = core_reader_open(path, sysroot, &r, &cn);
	if (!err) {
		t->mem = &r->base;
		err = build_maps(r, &t->maps);
	}
	t->core_tids = cn.tids;
	t->n_core_tids = cn.ntids;
	if (err) {
		rbp_target_close(t);
		return err;
	}
	t->is_core = 1;
	t->pid = cn.pid ? cn.pid : (cn.ntids ? cn.tids[0] : 0);
	t->ns_pid = t->pid;
	memcpy(t->core_comm, cn.comm, sizeof(t->core_comm));
	snprintf(t->root, sizeof(t->root), "%s", sysroot ? sysroot : "");
	*out = t;
	return RBP_OK;
}
