#include "util/hmap.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

int rbp_hmap_get(const struct rbp_hmap *m, uint64_t key, uint64_t *val)
{
	if (!m->cap || !key)
		return 0;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 1;
		}
		if (!m->keys[i])
			return 0;
	}
}

/* Rehash into a table twice as large (or 64 slots). */
static int grow(struct rbp_hmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint64_t *nv = calloc(ncap, sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return RBP_ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = slot_of(m->keys[i], ncap);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return RBP_OK;
}

int rbp_hmap_put(struct rbp_hmap *m, uint64_t key, uint64_t val)
{
	if (!key)
		return RBP_EINVAL;
	if ((m->len + 1) * 4 > m->cap * 3) {
		int err = grow(m);
		if (err)
			return err;
	}
	size_t i = slot_of(key, m->cap);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->len++;
	m->keys[i] = key;
	m->vals[i] = val;
	return RBP_OK;
}

void rbp_hmap_reset(struct rbp_hmap *m)
{
	if (m->len)
		memset(m->keys, 0, m->cap * sizeof(*m->keys));
	m->len = 0;
}

void rbp_hmap_clear(struct rbp_hmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
	m->cap = m->len = 0;
}
