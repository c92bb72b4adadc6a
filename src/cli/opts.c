/*
 * opts.c - the option parsing every command shares.  cli_getopt() runs
 * getopt_long over a command's table and takes the options commands have
 * in common (--help, the target options, -r/-d, -o/-f, --raw-file and
 * --no-raw, --sampler, --idle and --no-idle), so that each is parsed, and each usage error
 * worded, in one place; the command sees only its own options.  The
 * checks after the option loop (operands left, which target was named,
 * sampling options that do not go together) are here too.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "output/output.h"
#include "profile/subject.h"

/* A PID argument; 0 when it is not one. */
static int parse_pid(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v <= 0 || v > 0x3fffffff)
		return 0;
	return (int)v;
}

/* A -r rate (an integer, 1 to 100000 per second); 0 when it is not one. */
static unsigned parse_rate(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return !*s || *end || v < 1 || v > 100000 ? 0 : (unsigned)v;
}

int cli_parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || !(v > 0) || v > 1e7)
		return -1;
	*out = v;
	return 0;
}

/* --help: the command's usage, then (formats) one line per output format; on stdout. */
static void print_usage(const struct cli_parser *p)
{
	fputs(p->usage, stdout);
	for (const struct rbp_format *f = rbp_formats; p->formats && f->name; f++)
		printf("  %-16s %s\n", f->name, f->desc);
}

/* Whether option c is one cli_getopt() takes for p's command. */
static int shared(const struct cli_parser *p, int c)
{
	switch (c) {
	case 'h': case ':': case '?':
		return 1;
	case 'p': case 'c': case 'S': case 'F': case 'L':
		return p->t != NULL;
	case 'r': case 'd':
		return p->rate != NULL;
	case 'o': case 'f':
		return p->output != NULL;
	case CLI_OPT_RAWFILE: case CLI_OPT_NORAW:
		return p->raw != NULL;
	case CLI_OPT_SAMPLER:
		return p->bpf != NULL;
	case CLI_OPT_IDLE: case CLI_OPT_NOIDLE:
		return p->idle != NULL;
	default:
		return 0;
	}
}

/*
 * Take shared option c (its value in optarg) into its place: 0, or the
 * usage error printed and EXIT_USAGE.
 */
static int take(const struct cli_parser *p, int c, char **argv)
{
	const char *cmd = p->cmd;

	switch (c) {
	case 'h':
		print_usage(p);
		exit(0);
	case ':':
		return cli_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
	case '?':
		return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
	case 'p':
		if (!(p->t->pid = parse_pid(optarg)))
			return cli_usage_error(cmd, "invalid PID '%s'", optarg);
		return 0;
	case 'c': p->t->core = optarg; return 0;
	case 'S': p->t->sysroot = optarg; return 0;
	case 'F': p->t->force_version = optarg; return 0;
	case 'L': return cli_layout_opt(cmd, optarg, &p->t->layout);
	case 'r':
		if (!(*p->rate = parse_rate(optarg)))
			return cli_usage_error(cmd, "invalid rate '%s' (1 to 100000 %s)", optarg, p->unit);
		return 0;
	case 'd':
		if (cli_parse_seconds(optarg, p->duration))
			return cli_usage_error(cmd, "invalid duration '%s' (seconds)", optarg);
		return 0;
	case 'o': *p->output = optarg; return 0;
	case 'f': *p->format = optarg; return 0;
	case CLI_OPT_NORAW: *p->raw = ""; return 0;
	case CLI_OPT_SAMPLER: return cli_sampler_opt(cmd, optarg, p->bpf);
	case CLI_OPT_IDLE: *p->idle = 1; return 0;
	case CLI_OPT_NOIDLE: *p->idle = 0; return 0;
	default:   /* CLI_OPT_RAWFILE */
		if (!*optarg || !strcmp(optarg, "-"))
			return cli_usage_error(cmd, "--raw-file wants a file name");
		*p->raw = optarg;
		return 0;
	}
}

int cli_getopt(int argc, char **argv, struct cli_parser *p)
{
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, p->shortopts, p->longopts, &p->index)) != -1 &&
	       shared(p, c))
		if (take(p, c, argv))
			return CLI_OPT_ERROR;
	return c;
}

int cli_no_operands(const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

int cli_sampling_check(const char *cmd, int native, int nonblocking, int bpf, unsigned rate,
		       const char *conflict)
{
	if (native && !rbp_subject_native_available())
		return cli_no_native();
	if (bpf && conflict)
		return cli_usage_error(cmd, "--sampler=bpf cannot be used with %s", conflict);
	if (bpf && rate > 10000)
		return cli_usage_error(cmd, "--sampler=bpf samples at most 10000 Hz");
	if (native && nonblocking)
		return cli_usage_error(cmd, "--native cannot be used with --nonblocking "
				       "(native stacks are read while the process is paused)");
	return 0;
}

int cli_target_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o)
{
	if (cli_no_operands(cmd, argc, argv))
		return EXIT_USAGE;
	if (!o->pid == !o->core)
		return cli_usage_error(cmd, "give exactly one of --pid PID or --core FILE");
	if (o->sysroot && !o->core)
		return cli_usage_error(cmd, "--sysroot goes with --core");
	return 0;
}

int cli_pid_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o,
		  const char *missing)
{
	if (cli_no_operands(cmd, argc, argv))
		return EXIT_USAGE;
	if (!o->pid)
		return cli_usage_error(cmd, "%s", missing);
	return 0;
}
