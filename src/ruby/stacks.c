/*
 * stacks.c - the buffers of a stack read (stacks.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ruby/stacks.h"

void rbp_stacks_free(struct rbp_stacks *s)
{
	free(s->threads);
	free(s->frames);
	free(s->pcs);
	free(s->n_pcs);
	free(s->merged);
	memset(s, 0, sizeof(*s));
}
