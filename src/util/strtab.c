#include "util/strtab.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/vec.h"

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

uint64_t rbp_strtab_id(struct rbp_strtab *t, const char *s)
{
	uint64_t key = str_hash(s), v;

	if (t->err)
		return 0;
	while (rbp_hmap_get(&t->index, key, &v)) {
		if (!strcmp(t->v[v], s))
			return v;
		key = rbp_mix64(key, 1);   /* another string with this hash: probe on */
	}
	if ((t->err = rbp_grow(&t->v, &t->cap, t->n + 1, sizeof(*t->v))) ||
	    (t->err = rbp_hmap_put(&t->index, key, t->n)))
		return 0;
	t->v[t->n] = s;
	return t->n++;
}

void rbp_strtab_free(struct rbp_strtab *t)
{
	rbp_hmap_clear(&t->index);
	free(t->v);
	memset(t, 0, sizeof(*t));
}
