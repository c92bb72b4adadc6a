/*
 * bpfopt.c - --sampler=ptrace|bpf for record, top and agent: the choice, and
 * the one warning when the in-kernel sampler cannot be set up (record and
 * top: the recording's status says why; the agent: its engine).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "profile/bpfsampler.h"
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

struct rbp_bpf_sampler *cli_bpf_engine(uint32_t rate_hz)
{
	struct rbp_bpf_sampler *s = NULL;
	char why[768];
	int err;

	if (!(err = rbp_bpf_sampler_open(rate_hz, &s, why, sizeof(why))))
		return s;
	cli_bpf_fallback(why, err);
	return NULL;
}
