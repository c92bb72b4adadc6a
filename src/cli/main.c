/*
 * main.c - parse the command name and dispatch to cmd_<name>().
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
	"usage: rbpeek <command> [options]\n"
	"\n"
	"See what a running Ruby program is doing, from outside: no gem, no restart.\n"
	"\n"
	"commands:\n"
	"  alloc      watch a process allocate objects: counts per class and site, live\n"
	"  heap       count the objects on a process's heap by type and class\n"
	"  inspect    show what rbpeek finds in a process and how (for bug reports)\n"
	"  record     sample a process until Ctrl-C and write a flame graph (or another format)\n"
	"  report     convert a raw profile file to any output format\n"
	"  snapshot   print the Ruby stack of every thread of a process (--pid) or core file (--core)\n"
	"  top        a live, top-like view of the functions a process spends its time in\n"
	"  trace      run a Ruby program with the in-process tracer and write a Perfetto trace\n"
	"\n"
	"options:\n"
	"  -h, --help     show this help (rbpeek <command> --help for a command's options)\n"
	"  -V, --version  print rbpeek's version\n"
	"\n"
	"exit codes: 0 ok, 1 internal error, 2 usage, 3 no such process, 4 permission denied,\n"
	"5 not a Ruby process, 6 unsupported Ruby version, 7 Ruby VM not found, 8 bad core file,\n"
	"9 no samples recorded, 10 output not written, 11 bad raw file\n";

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "alloc", cmd_alloc },
	{ "inspect", cmd_inspect },
	{ "record", cmd_record },
	{ "report", cmd_report },
	{ "snapshot", cmd_snapshot },
	{ "top", cmd_top },
	{ "trace", cmd_trace },
	{ "dump", cmd_snapshot },   /* alias familiar to rbspy users */
	{ "heap", cmd_heap },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("rbpeek %s\n", RBP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
}
