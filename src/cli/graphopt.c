/*
 * graphopt.c - the call graph's pruning options of record and report
 * (--node-fraction, --edge-fraction, --node-count), kept until the output
 * is written (cli_graph_opts fills the writer's options).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "output/output.h"

static double node_fraction, edge_fraction;   /* 0: the writer's default; < 0: none */
static size_t node_count;

int cli_graph_opt(const char *cmd, const char *name, const char *arg)
{
	char *end;

	if (!strcmp(name, "node-count")) {
		long n = strtol(arg, &end, 10);
		if (end == arg || *end || n < 1 || n > 100000)
			return cli_usage_error(cmd, "--node-count wants a number of functions from 1 to "
					       "100000, not '%s'", arg);
		node_count = (size_t)n;
		return 0;
	}
	double v = strtod(arg, &end);
	if (end == arg || *end || !(v >= 0) || v >= 1)
		return cli_usage_error(cmd, "--%s wants a fraction of the samples from 0 to below 1 "
				       "(0.005 is 0.5%%), not '%s'", name, arg);
	if (!strcmp(name, "node-fraction"))
		node_fraction = v ? v : -1;
	else
		edge_fraction = v ? v : -1;
	return 0;
}

void cli_graph_opts(struct rbp_output_opts *oo)
{
	oo->node_fraction = node_fraction;
	oo->edge_fraction = edge_fraction;
	oo->node_count = node_count;
}
