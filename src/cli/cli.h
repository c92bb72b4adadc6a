/*
 * cli.h - the front end: commands, exit codes, user-facing messages.  Only
 * this layer prints or exits.
 */
#ifndef RBP_CLI_H
#define RBP_CLI_H

#include <stddef.h>

struct rbp_target;
struct rbp_vm;
struct rbp_vm_opts;

/* Exit codes, documented in the README and the man page. */
enum rbp_exit {
	EXIT_OK_ = 0,
	EXIT_INTERNAL = 1,   /* a bug or an unexpected system error */
	EXIT_USAGE = 2,      /* bad or missing options */
	EXIT_NOPROC = 3,     /* no such process, or it exited */
	EXIT_PERM = 4,       /* not allowed to read or trace the target */
	EXIT_NOTRUBY = 5,    /* the target is not a Ruby process */
	EXIT_VERSION = 6,    /* Ruby version without a layout table, or a layout
			      * that does not fit the process */
	EXIT_VM = 7,         /* Ruby VM not found, or its memory inconsistent */
	EXIT_CORE = 8,       /* bad core file */
	EXIT_NOSAMPLES = 9,  /* the recording got no samples (nothing written) */
	EXIT_OUTPUT = 10,    /* the output file could not be written */
	EXIT_RAW = 11,       /* bad raw file given to report */
};

/* What the error is about, so messages can name it. */
struct cli_subject {
	int pid;              /* target PID, or 0 */
	const char *core;     /* core file path, or NULL */
	const char *version;  /* Ruby version when known */
	const char *forced;   /* --force-version, when given */
	const struct rbp_vm_opts *vo; /* the attach's outcome (layout tried), or NULL */
};

/*
 * Print "rbpeek: error: ..." (plus a hint line when there is advice) for a
 * core error code, and return the matching exit code.
 */
int cli_fail(int err, const struct cli_subject *subj);
/*
 * The one warning for an assumed layout (a Ruby newer than every table,
 * read with the nearest older table after it validated); nothing otherwise.
 */
void cli_layout_warning(const struct rbp_vm *vm);
/* Print "rbpeek: error: <msg>" plus "try 'rbpeek <cmd> --help'"; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * VM discovery methods allowed by $RBPEEK_DISCOVERY ("symbol", "code",
 * "scan", comma-separated; a debugging aid), 0 for all.
 */
unsigned cli_discovery_env(void);
struct rbp_target;
struct rbp_vm;
struct rbp_vm_opts;
/*
 * Open the target (the core file when core is non-NULL, else process pid)
 * and attach to its Ruby VM with vo, whose discovery comes from the
 * environment.  Fills subj for cli_fail().  Returns an RBP_E* code; the
 * caller frees whatever of *t and *vm is set, on success or failure.
 */
int cli_open_vm(int pid, const char *core, const char *sysroot, struct rbp_vm_opts *vo,
		struct cli_subject *subj, struct rbp_target **t, struct rbp_vm **vm);
/* Parse a PID argument; 0 on error. */
int cli_parse_pid(const char *s);
/* Parse a -r rate (an integer, 1 to 100000 per second); 0 on error. */
unsigned cli_parse_rate(const char *s);

/*
 * The options that name what a one-shot command reads: -p/--pid, -c/--core,
 * --sysroot (long option value 'S') and --force-version ('F').
 */
struct cli_target_opts {
	int pid;
	const char *core;
	const char *sysroot;
	const char *force_version;
};
/*
 * The default case of a command's getopt_long loop: takes option c (value
 * in optarg) when it is one of the target options (o may be NULL for a
 * command without them) and returns 0; else prints the usage error for a
 * bad PID, a missing value (':') or an unknown option and returns
 * EXIT_USAGE.
 */
int cli_other_opt(const char *cmd, int c, char **argv, struct cli_target_opts *o);
/*
 * After the option loop: no operands left and exactly one of --pid or
 * --core.  Returns 0 or EXIT_USAGE (message printed).
 */
int cli_target_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o);

/* How cli_spawn() runs the program. */
enum {
	CLI_SPAWN_AS_INVOKER = 1,    /* under sudo: as the invoking user, never root */
	CLI_SPAWN_KEEP_PERFMON = 2,  /* and with CAP_PERFMON (ambient), for the tracer */
};
/*
 * Fork and exec cmd (spawn.c).  Returns the child's pid, or -1 with the
 * error printed when it could not be started.
 */
int cli_spawn(char **cmd, unsigned flags);
/*
 * Under sudo: a copy of tracefs's raw_syscalls and sched event
 * descriptions in a new directory the invoking user may read (for the
 * tracer's $RBPEEK_TRACEFS), else NULL.  Remove it with cli_tracefs_remove().
 */
char *cli_tracefs_copy(void);
void cli_tracefs_remove(char *dir);   /* NULL-safe; frees dir */

int cmd_snapshot(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_alloc(int argc, char **argv);
int cmd_heap(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_top(int argc, char **argv);

struct rbp_profile;
struct rbp_format;
struct rbp_output_opts;
/*
 * Write a profile in a format to path ("-" for stdout): into a temporary
 * file beside it, renamed into place when complete, so a failed write
 * leaves nothing behind.  Under sudo the file is given to the invoking
 * user.  Prints the error; returns 0 or EXIT_OUTPUT.
 */
int cli_write_file(const struct rbp_profile *p, const struct rbp_format *f,
		   const struct rbp_output_opts *oo, const char *path);
/* 0 when a file can be created at path (its directory is writable). */
int cli_check_writable(const char *path);
/* Give a file we created to the user who ran sudo (no-op otherwise). */
void cli_chown_to_invoker(const char *path);
/*
 * "DIR/rbpeek-PID-YYYYmmdd-HHMMSS.EXT" (DIR "" for the current directory),
 * reserved by creating it empty; "-2", "-3", ... when taken.
 */
void cli_default_output(char *buf, size_t n, const char *dir, int pid, const char *ext);
/*
 * Write a finished recording: a raw copy in the cache directory
 * ($XDG_CACHE_HOME/rbpeek, announced on stderr) and fmt to output.
 * Prints what it wrote; returns 0 or EXIT_OUTPUT.
 */
int cli_write_outputs(const struct rbp_profile *p, const struct rbp_format *fmt,
		      const char *output, int silent, const char *title);

#endif
