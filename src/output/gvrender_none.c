/*
 * gvrender_none.c - a build without Graphviz (GRAPHVIZ=0, the static
 * binary): -f callgraph writes the DOT text (the CLI says so), which
 * `dot -Tsvg` lays out where Graphviz is installed.
 */
#include "output/output.h"
#include "util/err.h"

int rbp_callgraph_renders(void)
{
	return 0;
}

int rbp_callgraph_render(const char *dot, FILE *out)
{
	return RBP_EINVAL;
}
