/*
 * collapsed.c - folded stacks, one line per distinct stack:
 *   "outer (a.rb:1);inner (a.rb:5) 42"
 * Lines are sorted, so the same profile gives the same file.  Semicolons in
 * frame names are replaced by ':' since they separate frames.
 */
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/err.h"

struct line {
	char *text;
	uint64_t count;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* "a;b;c" for a node, built from the root down. */
static char *stack_text(const struct rbp_profile *p, uint32_t node)
{
	size_t depth = p->nodes[node].depth, len = 0, cap = 256;
	uint32_t *frames = malloc((depth + 1) * sizeof(*frames));
	char *s = malloc(cap), name[8192];

	if (!frames || !s)
		goto fail;
	rbp_profile_stack(p, node, frames, depth);
	s[0] = 0;
	for (size_t i = 0; i < depth; i++) {
		rbp_frame_name(&p->frames[frames[i]], name, sizeof(name));
		for (char *c = name; *c; c++)
			if (*c == ';' || *c == '\n')
				*c = ':';
		size_t nl = strlen(name);
		if (len + nl + 2 > cap) {
			while (len + nl + 2 > cap)
				cap *= 2;
			char *ns = realloc(s, cap);
			if (!ns)
				goto fail;
			s = ns;
		}
		if (i)
			s[len++] = ';';
		memcpy(s + len, name, nl + 1);
		len += nl;
	}
	free(frames);
	return s;
fail:
	free(frames);
	free(s);
	return NULL;
}

int rbp_write_collapsed(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	uint64_t *counts = calloc(p->n_nodes, sizeof(*counts));
	struct line *lines = NULL;
	size_t n = 0;
	int err = RBP_OK;

	if (!counts)
		return RBP_ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++)
		counts[p->samples[i].node]++;
	for (size_t i = 1; i < p->n_nodes; i++)
		n += counts[i] != 0;
	if (!(lines = calloc(n + 1, sizeof(*lines)))) {
		free(counts);
		return RBP_ENOMEM;
	}
	n = 0;
	for (uint32_t i = 1; i < p->n_nodes; i++) {
		if (!counts[i])
			continue;
		if (!(lines[n].text = stack_text(p, i))) {
			err = RBP_ENOMEM;
			goto done;
		}
		lines[n++].count = counts[i];
	}
	qsort(lines, n, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)lines[i].count);
	if (ferror(out))
		err = RBP_EIO;
done:
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	free(counts);
	return err;
}
