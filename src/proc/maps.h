/*
 * maps.h - what is mapped where in the target (/proc/PID/maps, or the
 * NT_FILE note of a core file).
 */
#ifndef RBP_PROC_MAPS_H
#define RBP_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RBP_PROT_R 1
#define RBP_PROT_W 2
#define RBP_PROT_X 4

struct rbp_mapping {
	uint64_t start;   /* first address */
	uint64_t end;     /* one past the last address */
	uint64_t offset;  /* file offset of start */
	unsigned prot;    /* RBP_PROT_* (cores: unknown bits are 0) */
	char *path;       /* owned; NULL for anonymous, "[heap]" etc. kept */
	int deleted;      /* 1 when the kernel marked path " (deleted)";
			     the suffix is not part of path */
};

struct rbp_maps {
	struct rbp_mapping *v;  /* sorted by start */
	size_t n;
};

/* Parse the text of a /proc/PID/maps file.  *out is owned by the caller. */
int rbp_maps_parse(const char *text, size_t len, struct rbp_maps *out);
/* Read and parse /proc/PID/maps. */
int rbp_maps_read_pid(pid_t pid, struct rbp_maps *out);
/* The mapping containing addr, or NULL. */
const struct rbp_mapping *rbp_maps_find(const struct rbp_maps *m,
					uint64_t addr);
void rbp_maps_free(struct rbp_maps *m);

#endif
