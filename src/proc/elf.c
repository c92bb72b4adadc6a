/*
 * elf.c - ELF64 little-endian files read with pread, trusting nothing.
 *
 * Workload: the Ruby layer opens a handful of files (ruby, libruby, libc)
 * and looks up a handful of names in each, in symbol tables that can hold
 * 100k entries.  So the file header and program headers are read and
 * checked at open; the section headers are checked at open too (except for
 * core files, which need none and may be truncated); a symbol table is read
 * into memory on the first lookup that needs it, and indexed once with an
 * open-addressing hash of names, so that every later lookup is O(1).
 *
 * Hostile input: every offset, size and count read from the file is checked
 * against the file size before it is used, and no allocation is larger than
 * the file, so a corrupt file costs at most its own size in memory.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/elf.h"
#include "util/err.h"

#define EHDR_SIZE 64
#define PHDR_SIZE 56
#define SHDR_SIZE 64
#define SYM_SIZE 24

#define ET_CORE_ 4
#define PT_LOAD_ 1
#define SHT_SYMTAB_ 2
#define SHT_DYNSYM_ 11
#define SHT_GNU_VERSYM_ 0x6fffffff
#define SHN_UNDEF_ 0
#define PN_XNUM_ 0xffff
#define VERSYM_HIDDEN 0x8000

/* One symbol table (.dynsym or .symtab), loaded lazily. */
struct elf_symtab {
	uint64_t off, size;     /* section contents in the file (0 size: none) */
	uint64_t str_off, str_size; /* its string table (sh_link) */
	uint64_t ver_off;       /* .gnu.version for .dynsym, 0 when absent */
	int loaded;             /* 1 once tried; err holds the outcome */
	int err;
	unsigned char *syms;    /* raw Elf64_Sym array, nsyms entries */
	size_t nsyms;
	char *strs;             /* string table, NUL-terminated copy */
	uint16_t *versym;       /* per-symbol version index, or NULL */
	uint32_t *hash;         /* open addressing: symbol index + 1, 0 empty */
	size_t hash_mask;
};

struct rbp_elf {
	int fd;
	uint64_t size;              /* file size */
	int type;                   /* e_type */
	struct rbp_elf_phdr *ph;    /* program headers */
	size_t phnum;
	struct elf_symtab tabs[2];  /* [0] .dynsym, [1] .symtab */
};

static uint16_t get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* 1 when [off, off+len) lies inside the file. */
static int in_file(const struct rbp_elf *e, uint64_t off, uint64_t len)
{
	return off <= e->size && len <= e->size - off;
}

/* Read exactly len bytes at off; RBP_EBADELF when outside the file. */
int rbp_elf_pread(struct rbp_elf *e, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;

	if (!in_file(e, off, len))
		return RBP_EBADELF;
	while (done < len) {
		ssize_t r = pread(e->fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return RBP_EIO;
		if (r == 0)
			return RBP_EBADELF;  /* file shrank under us */
		done += (size_t)r;
	}
	return RBP_OK;
}

/* Read and check program headers (e_phnum may be PN_XNUM: see shdr 0). */
static int load_phdrs(struct rbp_elf *e, uint64_t phoff, size_t phnum)
{
	unsigned char raw[PHDR_SIZE];

	if (phnum == 0)
		return RBP_OK;
	if (phnum > e->size / PHDR_SIZE || !in_file(e, phoff, phnum * PHDR_SIZE))
		return RBP_EBADELF;
	e->ph = calloc(phnum, sizeof(*e->ph));
	if (!e->ph)
		return RBP_ENOMEM;
	e->phnum = phnum;
	for (size_t i = 0; i < phnum; i++) {
		struct rbp_elf_phdr *p = &e->ph[i];
		int err = rbp_elf_pread(e, phoff + i * PHDR_SIZE, raw, sizeof(raw));

		if (err)
			return err;
		p->type = get32(raw);
		p->flags = get32(raw + 4);
		p->offset = get64(raw + 8);
		p->vaddr = get64(raw + 16);
		p->filesz = get64(raw + 32);
		p->memsz = get64(raw + 40);
		p->align = get64(raw + 48);
		if (p->type == PT_LOAD_ && p->vaddr + p->memsz < p->vaddr)
			return RBP_EBADELF;
	}
	return RBP_OK;
}

/* One section header, the fields we use. */
struct shdr {
	uint32_t type, link;
	uint64_t offset, size, entsize;
};

static int read_shdr(struct rbp_elf *e, uint64_t shoff, size_t i,
		     struct shdr *s)
{
	unsigned char raw[SHDR_SIZE];
	int err = rbp_elf_pread(e, shoff + i * SHDR_SIZE, raw, sizeof(raw));

	if (err)
		return err;
	s->type = get32(raw + 4);
	s->offset = get64(raw + 24);
	s->size = get64(raw + 32);
	s->link = get32(raw + 40);
	s->entsize = get64(raw + 56);
	return RBP_OK;
}

/*
 * Record where .dynsym/.symtab and their string tables are; nothing is
 * read beyond the headers.  Sections with NOBITS-like bogus extents are
 * rejected here, so the lazy load can trust the recorded extents.
 */
static int scan_sections(struct rbp_elf *e, uint64_t shoff, size_t shnum)
{
	struct shdr s, str;
	uint64_t ver_off = 0, ver_size = 0;

	if (shnum > e->size / SHDR_SIZE || !in_file(e, shoff, shnum * SHDR_SIZE))
		return RBP_EBADELF;
	for (size_t i = 0; i < shnum; i++) {
		int err = read_shdr(e, shoff, i, &s);
		struct elf_symtab *t;

		if (err)
			return err;
		if (s.type == SHT_GNU_VERSYM_ && !ver_off) {
			ver_off = s.offset;
			ver_size = s.size;
			continue;
		}
		if (s.type != SHT_DYNSYM_ && s.type != SHT_SYMTAB_)
			continue;
		t = &e->tabs[s.type == SHT_SYMTAB_];
		if (t->size || s.size == 0)
			continue;  /* keep the first of each kind */
		if ((s.entsize && s.entsize != SYM_SIZE) || s.size % SYM_SIZE ||
		    !in_file(e, s.offset, s.size) || s.link >= shnum)
			return RBP_EBADELF;
		err = read_shdr(e, shoff, s.link, &str);
		if (err)
			return err;
		if (!in_file(e, str.offset, str.size))
			return RBP_EBADELF;
		t->off = s.offset;
		t->size = s.size;
		t->str_off = str.offset;
		t->str_size = str.size;
	}
	/* .gnu.version is used only when it matches .dynsym entry for entry. */
	if (ver_off && e->tabs[0].size && ver_size == e->tabs[0].size / SYM_SIZE * 2 &&
	    in_file(e, ver_off, ver_size))
		e->tabs[0].ver_off = ver_off;
	return RBP_OK;
}

/* Check the file header; fill the header and section table positions. */
static int parse_ehdr(struct rbp_elf *e, uint64_t *phoff, size_t *phnum,
		      uint64_t *shoff, size_t *shnum)
{
	unsigned char h[EHDR_SIZE];
	int err = rbp_elf_pread(e, 0, h, sizeof(h));

	if (err)
		return RBP_EBADELF;
	if (memcmp(h, "\177ELF", 4) || h[4] != 2 /* ELFCLASS64 */ ||
	    h[5] != 1 /* ELFDATA2LSB */ || h[6] != 1 /* EV_CURRENT */)
		return RBP_EBADELF;
	e->type = get16(h + 16);
	if (e->type < 2 || e->type > ET_CORE_)
		return RBP_EBADELF;
	if (get16(h + 54) != PHDR_SIZE && get16(h + 56) != 0)
		return RBP_EBADELF;
	*phoff = get64(h + 32);
	*shoff = get64(h + 40);
	*phnum = get16(h + 56);
	*shnum = get16(h + 60);
	if (*shoff && get16(h + 58) != SHDR_SIZE)
		*shoff = 0, *shnum = 0;  /* unusable section headers: ignore */
	return RBP_OK;
}

/*
 * Extended numbering: counts that do not fit 16 bits live in section
 * header 0.  Cores need it only for phnum; they ignore sections.
 */
static int extended_counts(struct rbp_elf *e, uint64_t shoff, size_t *phnum,
			   size_t *shnum)
{
	unsigned char raw[SHDR_SIZE];
	int need_sh = *shnum == 0 && shoff && e->type != ET_CORE_;

	if (*phnum != PN_XNUM_ && !need_sh)
		return RBP_OK;
	if (!shoff || rbp_elf_pread(e, shoff, raw, sizeof(raw)))
		return RBP_EBADELF;
	if (*phnum == PN_XNUM_)
		*phnum = get32(raw + 44);  /* sh_info */
	if (need_sh) {
		uint64_t n = get64(raw + 32);  /* sh_size */

		if (n > e->size / SHDR_SIZE)
			return RBP_EBADELF;
		*shnum = (size_t)n;
	}
	return RBP_OK;
}

/* Parse headers of an opened file; e->fd and e->size are set. */
static int elf_init(struct rbp_elf *e)
{
	uint64_t phoff, shoff;
	size_t phnum, shnum;
	int err;

	err = parse_ehdr(e, &phoff, &phnum, &shoff, &shnum);
	if (!err)
		err = extended_counts(e, shoff, &phnum, &shnum);
	if (!err)
		err = load_phdrs(e, phoff, phnum);
	if (!err && e->type != ET_CORE_ && shoff && shnum)
		err = scan_sections(e, shoff, shnum);
	return err;
}

int rbp_open_regular(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), flags;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (flags = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Open path; on success *out is owned by the caller (rbp_elf_close). */
int rbp_elf_open(const char *path, struct rbp_elf **out)
{
	struct rbp_elf *e;
	struct stat st;
	int err;

	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return RBP_ENOMEM;
	e->fd = rbp_open_regular(path);
	if (e->fd < 0) {
		int e_no = errno;
		free(e);
		return e_no == ENOMEM ? RBP_ENOMEM : e_no == EINVAL ? RBP_EBADELF : RBP_ENOFILE;
	}
	if (fstat(e->fd, &st)) {
		rbp_elf_close(e);
		return RBP_EBADELF;
	}
	e->size = (uint64_t)st.st_size;
	err = elf_init(e);
	if (err) {
		rbp_elf_close(e);
		return err;
	}
	*out = e;
	return RBP_OK;
}

static void symtab_free(struct elf_symtab *t)
{
	free(t->syms);
	free(t->strs);
	free(t->versym);
	free(t->hash);
}

/* Frees everything e owns, and e.  NULL-safe. */
void rbp_elf_close(struct rbp_elf *e)
{
	if (!e)
		return;
	if (e->fd >= 0)
		close(e->fd);
	symtab_free(&e->tabs[0]);
	symtab_free(&e->tabs[1]);
	free(e->ph);
	free(e);
}

/* FNV-1a of a NUL-terminated name. */
static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

/* Name of symbol i, or NULL when its st_name is outside the string table. */
static const char *sym_name(const struct elf_symtab *t, size_t i)
{
	uint32_t off = get32(t->syms + i * SYM_SIZE);

	return off < t->str_size ? t->strs + off : NULL;
}

/* How good a definition symbol i is: higher wins among equal names. */
static int sym_rank(const struct elf_symtab *t, size_t i)
{
	const unsigned char *s = t->syms + i * SYM_SIZE;
	int bind = s[4] >> 4;
	int rank = 0;

	if (get16(s + 6) != SHN_UNDEF_)
		rank += 8;
	if (!t->versym || !(t->versym[i] & VERSYM_HIDDEN))
		rank += 4;
	if (bind == 1 /* STB_GLOBAL */)
		rank += 2;
	else if (bind == 2 /* STB_WEAK */)
		rank += 1;
	return rank;
}

/* Index every named symbol by name; equal names keep the best rank. */
static int symtab_index(struct elf_symtab *t)
{
	size_t cap = 16;

	while (cap < t->nsyms * 2)
		cap *= 2;
	t->hash = calloc(cap, sizeof(*t->hash));
	if (!t->hash)
		return RBP_ENOMEM;
	t->hash_mask = cap - 1;
	for (size_t i = 1; i < t->nsyms; i++) {
		const char *name = sym_name(t, i);
		size_t h;

		if (!name || !*name)
			continue;
		for (h = name_hash(name) & t->hash_mask; t->hash[h];
		     h = (h + 1) & t->hash_mask) {
			size_t j = t->hash[h] - 1;

			if (strcmp(sym_name(t, j), name))
				continue;
			if (sym_rank(t, i) > sym_rank(t, j))
				t->hash[h] = (uint32_t)i + 1;
			break;
		}
		if (!t->hash[h])
			t->hash[h] = (uint32_t)i + 1;
	}
	return RBP_OK;
}

/* Read one table's symbols, strings and versions; then index them. */
static int symtab_load(struct rbp_elf *e, struct elf_symtab *t)
{
	int err;

	t->nsyms = (size_t)(t->size / SYM_SIZE);
	if (t->nsyms >= UINT32_MAX)
		return RBP_EBADELF;
	t->syms = malloc((size_t)t->size);
	t->strs = malloc((size_t)t->str_size + 1);
	if (!t->syms || !t->strs)
		return RBP_ENOMEM;
	err = rbp_elf_pread(e, t->off, t->syms, (size_t)t->size);
	if (!err)
		err = rbp_elf_pread(e, t->str_off, t->strs, (size_t)t->str_size);
	if (err)
		return err;
	t->strs[t->str_size] = '\0';
	if (t->ver_off) {
		t->versym = malloc(t->nsyms * 2 + 1);
		if (!t->versym)
			return RBP_ENOMEM;
		err = rbp_elf_pread(e, t->ver_off, t->versym, t->nsyms * 2);
		if (err)
			return err;
		for (size_t i = 0; i < t->nsyms; i++)
			t->versym[i] = le16toh(t->versym[i]);
	}
	return symtab_index(t);
}

/* Look name up in one table; loads it on first use. */
static int symtab_lookup(struct rbp_elf *e, struct elf_symtab *t,
			 const char *name, uint64_t *vaddr, uint64_t *size)
{
	const unsigned char *s;
	size_t h;

	if (!t->size)
		return RBP_ENOSYM;
	if (!t->loaded) {
		t->loaded = 1;
		t->err = symtab_load(e, t);
	}
	if (t->err)
		return t->err;
	for (h = name_hash(name) & t->hash_mask; t->hash[h];
	     h = (h + 1) & t->hash_mask) {
		size_t i = t->hash[h] - 1;

		if (strcmp(sym_name(t, i), name))
			continue;
		s = t->syms + i * SYM_SIZE;
		if (get16(s + 6) == SHN_UNDEF_)
			return RBP_ENOSYM;
		*vaddr = get64(s + 8);
		if (size)
			*size = get64(s + 16);
		return RBP_OK;
	}
	return RBP_ENOSYM;
}

/* Defined symbol by exact name, .dynsym first, then .symtab. */
int rbp_elf_symbol(struct rbp_elf *e, const char *name, uint64_t *vaddr,
		   uint64_t *size)
{
	int err = symtab_lookup(e, &e->tabs[0], name, vaddr, size);

	if (err == RBP_ENOSYM)
		err = symtab_lookup(e, &e->tabs[1], name, vaddr, size);
	return err;
}

int rbp_elf_has_symtab(const struct rbp_elf *e)
{
	return e->tabs[1].size > 0;
}

/* Page alignment of a segment: p_align when a sane power of two. */
static uint64_t seg_align(const struct rbp_elf_phdr *p)
{
	if (p->align >= 2 && !(p->align & (p->align - 1)))
		return p->align;
	return 1;
}

uint64_t rbp_elf_base_vaddr(const struct rbp_elf *e)
{
	uint64_t base = UINT64_MAX;

	for (size_t i = 0; i < e->phnum; i++) {
		const struct rbp_elf_phdr *p = &e->ph[i];

		if (p->type == PT_LOAD_ && p->vaddr < base)
			base = p->vaddr & ~(seg_align(p) - 1);
	}
	return base == UINT64_MAX ? 0 : base;
}

/* The PT_LOAD whose file-backed part contains vaddr, or NULL. */
static const struct rbp_elf_phdr *load_at(const struct rbp_elf *e,
					  uint64_t vaddr)
{
	for (size_t i = 0; i < e->phnum; i++) {
		const struct rbp_elf_phdr *p = &e->ph[i];
		uint64_t fsz = p->filesz < p->memsz ? p->filesz : p->memsz;

		if (p->type == PT_LOAD_ && vaddr >= p->vaddr &&
		    vaddr - p->vaddr < fsz)
			return p;
	}
	return NULL;
}

/* File bytes behind link-time addresses; may span adjacent segments. */
int rbp_elf_read_vaddr(struct rbp_elf *e, uint64_t vaddr, void *buf,
		       size_t len)
{
	while (len) {
		const struct rbp_elf_phdr *p = load_at(e, vaddr);
		uint64_t fsz, skip, n;

		if (!p)
			return RBP_EFAULT;
		fsz = p->filesz < p->memsz ? p->filesz : p->memsz;
		skip = vaddr - p->vaddr;
		n = fsz - skip < len ? fsz - skip : len;
		if (p->offset + skip < p->offset ||
		    rbp_elf_pread(e, p->offset + skip, buf, (size_t)n))
			return RBP_EFAULT;
		buf = (char *)buf + n;
		vaddr += n;
		len -= (size_t)n;
	}
	return RBP_OK;
}

/*
 * The kernel maps a segment from file offset PAGE_DOWN(p_offset) at
 * bias + PAGE_DOWN(p_vaddr), so the byte at file offset o has link-time
 * address p_vaddr - p_offset + o.  A mapping of the file at map_offset is
 * matched to the segment that starts in its first page, else to any
 * segment whose file range contains map_offset.
 */
int rbp_elf_load_bias(const struct rbp_elf *e, uint64_t map_start,
		      uint64_t map_offset, uint64_t *bias)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	const struct rbp_elf_phdr *best = NULL;

	for (size_t i = 0; i < e->phnum; i++) {
		const struct rbp_elf_phdr *p = &e->ph[i];
		uint64_t first = p->offset & ~(page - 1);

		if (p->type != PT_LOAD_ || map_offset < first ||
		    map_offset - first >= p->filesz + (p->offset - first))
			continue;
		if (first == map_offset) {
			best = p;
			break;
		}
		if (!best)
			best = p;
	}
	if (!best)
		return RBP_EINVAL;
	*bias = map_start - (best->vaddr - (best->offset - map_offset));
	return RBP_OK;
}

size_t rbp_elf_phnum(const struct rbp_elf *e)
{
	return e->phnum;
}

const struct rbp_elf_phdr *rbp_elf_phdr(const struct rbp_elf *e, size_t i)
{
	return i < e->phnum ? &e->ph[i] : NULL;
}

int rbp_elf_type(const struct rbp_elf *e)
{
	return e->type;
}

uint64_t rbp_elf_file_size(const struct rbp_elf *e)
{
	return e->size;
}

/* Find NT_GNU_BUILD_ID (type 3, owner "GNU") in the PT_NOTE segments. */
int rbp_elf_build_id(struct rbp_elf *e, uint8_t *buf, size_t cap, size_t *len)
{
	for (size_t i = 0; i < e->phnum; i++) {
		const struct rbp_elf_phdr *ph = &e->ph[i];
		unsigned char notes[4096];
		size_t n = ph->filesz < sizeof(notes) ? (size_t)ph->filesz : sizeof(notes);

		if (ph->type != 4 /* PT_NOTE */ || rbp_elf_pread(e, ph->offset, notes, n))
			continue;
		for (size_t off = 0; off + 12 <= n;) {
			uint32_t namesz = get32(notes + off), descsz = get32(notes + off + 4);
			uint32_t type = get32(notes + off + 8);
			size_t name_off = off + 12, desc_off = name_off + ((namesz + 3u) & ~3u);
			if (namesz > n || descsz > n || desc_off + descsz > n)
				break;
			if (type == 3 && namesz == 4 && !memcmp(notes + name_off, "GNU", 4)) {
				if (descsz > cap)
					return RBP_EINVAL;
				memcpy(buf, notes + desc_off, descsz);
				*len = descsz;
				return RBP_OK;
			}
			off = desc_off + ((descsz + 3u) & ~3u);
		}
	}
	return RBP_ENOSYM;
}
