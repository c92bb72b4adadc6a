/*
 * bpfopt.c - --sampler=ptrace|bpf for record, top and agent: the choice, and
 * the one warning when the in-kernel sampler cannot be set up (the
 * recording's status, or the agent's, says why).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/err.h"

int cli_sampler_opt(const char *cmd, const char *arg, int *bpf)
{
	if (!strcmp(arg, "ptrace"))
		*bpf = 0;
	else if (!strcmp(arg, "bpf"))
		*bpf = 1;
	else
		return cli_usage_error(cmd, "invalid sampler '%s' (ptrace or bpf)", arg);
	return 0;
}

void cli_bpf_fallback(const char *why, int err)
{
	fprintf(stderr, "rbpeek: warning: --sampler=bpf: %s; sampling with ptrace instead%s\n", why,
		err == RBP_EPERM ? " (eBPF needs root, or CAP_BPF and CAP_PERFMON)" : "");
}
