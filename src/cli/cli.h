/*
 * cli.h - the front end: commands, exit codes, user-facing messages.  Only
 * this layer prints or exits.
 */
#ifndef RBP_CLI_H
#define RBP_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rbp_vm;
struct rbp_vm_opts;

/* Exit codes, documented in docs/troubleshooting.md and the man page. */
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
	EXIT_TOOBIG = 12,    /* report: the output would pass the bound for the raw
			      * file's size (--max-output raises it) */
};

/* What the error is about, so messages can name it. */
struct cli_subject {
	int pid;              /* target PID, or 0 */
	const char *core;     /* core file path, or NULL */
	const char *version;  /* Ruby version when known */
	const char *forced;   /* --force-version, when given */
	const struct rbp_vm_opts *vo; /* the attach's outcome (layout tried), or NULL */
	int own_features;     /* the command says itself what its layout cannot read
			       * (heap): no feature warnings at attach */
};

/*
 * Print "rbpeek: error: ..." (plus a hint line when there is advice) for a
 * core error code, and return the matching exit code.
 */
int cli_fail(int err, const struct cli_subject *subj);
/* --native asked of a build without libdw (NATIVE=0): says so; returns EXIT_USAGE. */
int cli_no_native(void);

/* A --sampler value: *bpf = 0 for "ptrace", 1 for "bpf"; else the usage error (EXIT_USAGE). */
int cli_sampler_opt(const char *cmd, const char *arg, int *bpf);
/*
 * --sampler=bpf could not be set up (why, err: the recording's status,
 * profile/recording.h, or the agent's, rbp_agent_sampler_open): the one
 * warning saying so, and that ptrace samples instead.
 */
void cli_bpf_fallback(const char *why, int err);

/* Print "rbpeek: error: <msg>" plus "try 'rbpeek <cmd> --help'"; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- opening the VM (openvm.c) ---- */
/*
 * The one warning for an assumed layout (a Ruby newer than every table,
 * read with the nearest older table after it validated); nothing otherwise.
 */
void cli_layout_warning(const struct rbp_vm *vm);
/* The features the layout cannot read that the stacks would show (GC frames,
 * the GVL's holder): one warning line each, when so. */
void cli_feature_warning(const struct rbp_vm *vm);
/*
 * VM discovery methods allowed by $RBPEEK_DISCOVERY ("symbol", "code",
 * "scan", comma-separated; a debugging aid), 0 for all.
 */
unsigned cli_discovery_env(void);
struct rbp_vm;
struct rbp_vm_opts;
/*
 * A --layout value ("auto", "table", "dwarf") as enum rbp_layout_mode;
 * -1 when it is none of them.
 */
int cli_parse_layout(const char *s);
/* Take a --layout value into *layout; the usage error (EXIT_USAGE) when bad. */
int cli_layout_opt(const char *cmd, const char *arg, const char **layout);
/*
 * What the environment and the --layout option (NULL when not given) add
 * to vo: discovery ($RBPEEK_DISCOVERY), the layout source (the option, else
 * $RBPEEK_LAYOUT, else auto) and, for tests, $RBPEEK_TEST_NO_TABLE=1 (attach
 * as if rbpeek had no table for the Ruby's version).
 */
void cli_vm_env(struct rbp_vm_opts *vo, const char *layout);
struct cli_target_opts;
struct rbp_subject;
/*
 * Open what the target options o name (the core file when o->core is
 * set, else process o->pid) into s (zeroed) and attach to its Ruby VM with
 * vo, whose forced version, discovery and layout source come from o and
 * the environment.  Fills subj for cli_fail().  Returns an RBP_E* code;
 * the caller closes s (rbp_subject_close), on success or failure.
 */
/*
 * Attach to live process pid, waiting (at most RBP_SUBJECT_READY_NS, with
 * one line on stderr) while it is starting and its Ruby VM is not set up.
 */
int cli_attach_pid(int pid, struct rbp_vm_opts *vo, struct rbp_subject *s);
int cli_open_vm(const struct cli_target_opts *o, struct rbp_vm_opts *vo, struct cli_subject *subj,
		struct rbp_subject *s);
/*
 * The options that name what a one-shot command reads: -p/--pid, -c/--core,
 * --sysroot (long option value 'S'), --force-version ('F') and --layout ('L').
 */
struct cli_target_opts {
	int pid;
	const char *core;
	const char *sysroot;
	const char *force_version;
	const char *layout;   /* --layout, validated; NULL when not given */
};
/*
 * Entries of a getopt_long table for the options cli_getopt() takes (its
 * cases), and the table's end: --help, then the terminator.
 */
#define CLI_OPT_PID { "pid", required_argument, NULL, 'p' }
#define CLI_OPTS_CORE { "core", required_argument, NULL, 'c' }, \
	{ "sysroot", required_argument, NULL, 'S' }
#define CLI_OPTS_LAYOUT { "force-version", required_argument, NULL, 'F' }, \
	{ "layout", required_argument, NULL, 'L' }
/* All of them: a process or a core file (heap, snapshot). */
#define CLI_OPTS_TARGET CLI_OPT_PID, CLI_OPTS_CORE, CLI_OPTS_LAYOUT
#define CLI_OPTS_END { "help", no_argument, NULL, 'h' }, { 0 }
/* -o FILE and -f FORMAT of the commands that write a profile or trace. */
#define CLI_OPTS_OUTPUT { "output", required_argument, NULL, 'o' }, \
	{ "format", required_argument, NULL, 'f' }
/* -r N and -d SECONDS of the commands that watch a process. */
#define CLI_OPTS_WATCH { "rate", required_argument, NULL, 'r' }, \
	{ "duration", required_argument, NULL, 'd' }
/* The values of the shared options below that have no short form. */
enum { CLI_OPT_RAWFILE = 0x1000, CLI_OPT_NORAW, CLI_OPT_SAMPLER, CLI_OPT_IDLE, CLI_OPT_NOIDLE };
/* --raw-file PATH and --no-raw of the commands that keep a raw profile. */
#define CLI_OPTS_RAW { "raw-file", required_argument, NULL, CLI_OPT_RAWFILE }, \
	{ "no-raw", no_argument, NULL, CLI_OPT_NORAW }
/* --sampler ptrace|bpf of the commands that sample (cli_sampler_opt). */
#define CLI_OPTS_SAMPLER { "sampler", required_argument, NULL, CLI_OPT_SAMPLER }
/* --idle and --no-idle of the commands that write a profile (keep threads waiting for work). */
#define CLI_OPTS_IDLE { "idle", no_argument, NULL, CLI_OPT_IDLE }, \
	{ "no-idle", no_argument, NULL, CLI_OPT_NOIDLE }
/*
 * A command's options as cli_getopt() parses them (opts.c): the command's
 * name (for the messages), its --help text, getopt_long's short and long
 * options, and where the options commands share go.  A NULL place leaves
 * those options to the command, as values of its own.
 */
struct option;
struct cli_parser {
	const char *cmd;               /* "record" */
	const char *usage;             /* the text of -h/--help */
	int formats;                   /* --help ends with the list of output formats */
	const char *shortopts;         /* as getopt_long's, ':' first (after any '+') */
	const struct option *longopts; /* ends with CLI_OPTS_END */
	struct cli_target_opts *t;     /* -p/--pid, and --core, --sysroot, --force-version,
					* --layout where longopts has them */
	const char *unit;              /* -r's unit in its message ("Hz", "stacks/s") */
	unsigned *rate;                /* -r N and -d SECONDS: CLI_OPTS_WATCH */
	double *duration;
	const char **output, **format; /* -o FILE and -f FORMAT: CLI_OPTS_OUTPUT */
	const char **raw;              /* CLI_OPTS_RAW: the path, "" for --no-raw */
	int *bpf;                      /* CLI_OPTS_SAMPLER: 1 for --sampler=bpf */
	int *idle;                     /* CLI_OPTS_IDLE: 1 for --idle, 0 for --no-idle */
	int index;                     /* out: longopts' index of the last long option */
};
/* What cli_getopt() returns after a usage error. */
#define CLI_OPT_ERROR (-2)
/*
 * The next of the command's own options (its argument in optarg), after
 * taking those p has a place for (-h/--help prints the help and exits 0);
 * -1 after the last option (operands from optind on, as getopt_long), or
 * CLI_OPT_ERROR after a usage error (printed: an invalid value, a missing
 * value, an unknown option), for which the command returns EXIT_USAGE.
 */
int cli_getopt(int argc, char **argv, struct cli_parser *p);
/* After the option loop: no operands left.  Returns 0 or EXIT_USAGE (message printed). */
int cli_no_operands(const char *cmd, int argc, char **argv);
/*
 * After the option loop of a command that samples (record, top), in this
 * order: --native only in a build that has it; --sampler=bpf with none of
 * the options it cannot go with (conflict: the first given, else NULL)
 * and at most 10000 Hz; --native not with --nonblocking.  Returns 0 or
 * EXIT_USAGE (message printed).
 */
int cli_sampling_check(const char *cmd, int native, int nonblocking, int bpf, unsigned rate,
		       const char *conflict);
/*
 * After the option loop: no operands left and exactly one of --pid or
 * --core.  Returns 0 or EXIT_USAGE (message printed).
 */
int cli_target_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o);

/*
 * What the commands that watch a live process share (opts.c, watch.c).
 *
 * A duration or delay in seconds (over 0, at most 1e7) into *out: 0, or
 * -1 when s is not one (the caller says so).
 */
int cli_parse_seconds(const char *s, double *out);
/*
 * After the option loop of a command that watches a live process: no
 * operands left, and --pid given (else the usage error missing).  Returns
 * 0 or EXIT_USAGE (message printed).
 */
int cli_pid_check(const char *cmd, int argc, char **argv, const struct cli_target_opts *o,
		  const char *missing);
/*
 * Whether the profile (output, as cli_check_output) and the raw file (raw:
 * a --raw-file path; NULL or "" skip it) can be written.  Prints the
 * error; returns 0 or EXIT_OUTPUT.
 */
int cli_check_outputs(const char *output, const char *raw);
/* Why sampling ended (an enum rbp_stop_reason, profile/sampler.h), in the
 * words of the closing statistics ("duration reached"). */
const char *cli_stop_words(int stop);
/* rbpeek's own CPU time (user + system, seconds) and peak RSS (MB): 0, or -1. */
int cli_own_usage(double *cpu_s, double *max_rss_mb);

/* How cli_spawn() runs the program. */
enum {
	CLI_SPAWN_AS_INVOKER = 1,    /* under sudo: as the invoking user, no capability */
};
/*
 * Fork and exec cmd (spawn.c).  Returns the child's pid, or -1 with the
 * error printed when it could not be started.
 */
int cli_spawn(char **cmd, unsigned flags);
/*
 * cli_spawn with a gate: the child, once it is the user it will run as,
 * keeps keep_fd open across exec (when >= 0), names it in $keep_env as
 * "FD:PID", and waits; the parent runs before_exec(child pid, arg) and then
 * lets it exec.  trace opens the program's kernel streams this way.
 */
struct cli_spawn_gate {
	int keep_fd;
	const char *keep_env;
	void (*before_exec)(pid_t child, void *arg);
	void *arg;
};
int cli_spawn_gated(char **cmd, unsigned flags, const struct cli_spawn_gate *g);

int cmd_snapshot(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_alloc(int argc, char **argv);
int cmd_heap(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_agent(int argc, char **argv);

struct rbp_profile;
struct rbp_format;
/*
 * The output format (outfmt.c): given (-f NAME, or NULL), else what the
 * ending of output (-o FILE, or NULL) stands for, else flamegraph.  Prints
 * the usage error and returns EXIT_USAGE when the name is unknown, when -f
 * and the ending disagree, when the ending fits several formats, or when
 * it is a trace's (cli_perfetto_name).
 */
int cli_pick_format(const char *cmd, const char *given, const char *output,
		    const struct rbp_format **fmt);
/* Whether output's name ends as a Perfetto trace's does (.pftrace, .perfetto, .perfetto-trace). */
int cli_perfetto_name(const char *output);
/*
 * trace -o output: a name that stands for a profile format (prof.svg,
 * prof.pb.gz, prof.speedscope.json, ...) is a usage error (printed;
 * EXIT_USAGE), else 0.
 */
int cli_check_trace_name(const char *output);
/*
 * The same choice among names: fits is the space-separated list of names
 * the file's ending stands for (NULL: any).  *name is given, else the one
 * fit, else NULL (the caller's default).  Returns 0 or EXIT_USAGE.
 */
int cli_pick_name(const char *cmd, const char *given, const char *fits, const char *output,
		  const char **name);
/*
 * Whether the output can be created: -o FILE (NULL: a default name in the
 * current directory; "-": stdout, always).  Prints the error; returns 0 or
 * EXIT_OUTPUT.  Commands reading a live process call it after attaching,
 * so that a permission problem with the target is told first.
 */
int cli_check_output(const char *output);
struct rbp_output_opts;
/*
 * Write a profile in a format to path ("-" for stdout): into a temporary
 * file beside it (O_EXCL|O_NOFOLLOW), renamed into place when complete, so
 * a failed write leaves nothing behind.  Under sudo the file is created by
 * the invoking user (see invoker.h and write.c).  Prints the error;
 * returns 0 or EXIT_OUTPUT.
 */
int cli_write_file(const struct rbp_profile *p, const struct rbp_format *f,
		   const struct rbp_output_opts *oo, const char *path);
/*
 * 0 when a file can be written at path (by the invoking user, under sudo):
 * its directory is writable, it is not a directory, its name leaves room
 * for the temporary name.  Else -1 with errno set.
 */
int cli_check_writable(const char *path);
/*
 * "DIR/rbpeek-PID-YYYYmmdd-HHMMSS.EXT" (DIR "" for the current directory),
 * reserved by creating it empty; "-2", "-3", ... when taken.
 */
void cli_default_output(char *buf, size_t n, const char *dir, int pid, const char *ext);
/*
 * The title of a written profile ("rbpeek: pid P CMD, S s, N samples"),
 * saying how many samples of threads waiting for work (RBP_SAMPLE_IDLE)
 * are hidden unless keep_idle.  Returns buf.
 */
char *cli_profile_title(const struct rbp_profile *p, size_t idle, int keep_idle, char *buf,
			size_t n);
/*
 * Write a finished recording: a raw copy (announced on stderr) and fmt to
 * output (NULL: a new "rbpeek-PID-DATE-TIME.EXT" in the current
 * directory).  raw is where the copy goes: NULL for the cache directory
 * ($XDG_CACHE_HOME/rbpeek, trimmed afterwards: cli_raw_cache_trim), "" for
 * none (--no-raw), else a path (--raw-file).  The raw copy has every
 * sample; fmt leaves out those flagged with a bit of hide (RBP_SAMPLE_IDLE
 * unless --idle).  Under sudo all of it is done as the invoking user, in
 * that user's cache directory.  Prints what it wrote; returns 0 or
 * EXIT_OUTPUT.
 */
int cli_write_outputs(const struct rbp_profile *p, const struct rbp_format *fmt,
		      const char *output, const char *raw, unsigned hide, int silent,
		      const char *title);
/*
 * The same for --diff: the raw copy is of p (the new recording), fmt is
 * written from diff (rbp_profile_diff of a BASE and p).
 */
int cli_write_outputs_diff(const struct rbp_profile *p, const struct rbp_profile *diff,
			   const struct rbp_format *fmt, const char *output, const char *raw,
			   int silent, const char *title);
/*
 * --diff BASE (diff.c), of record and report.  cli_diff_load: whether fmt
 * can show a diff (flamegraph, summary, pprof), then BASE's raw file into
 * *base (idle threads marked); prints the error and returns EXIT_USAGE or
 * EXIT_RAW (*base then freed), else 0.  cli_diff_write: NEW (cur, idle
 * threads marked) against it, idle samples left out unless keep_idle, as
 * cli_write_outputs_diff writes; returns its exit code.
 */
int cli_diff_load(const char *cmd, const char *path, const struct rbp_format *fmt,
		  struct rbp_profile *base);
int cli_diff_write(const struct rbp_profile *base, const char *base_path,
		   const struct rbp_profile *cur, const struct rbp_format *fmt, const char *output,
		   const char *raw, int keep_idle, int silent);
/*
 * The call graph's pruning options (graphopt.c): cli_graph_opt takes
 * --NAME ARG (node-fraction, edge-fraction, node-count; the usage error,
 * EXIT_USAGE, when bad); cli_graph_opts puts them into a writer's options.
 */
#define CLI_OPTS_GRAPH { "node-fraction", required_argument, NULL, CLI_OPT_GRAPH }, \
	{ "edge-fraction", required_argument, NULL, CLI_OPT_GRAPH }, \
	{ "node-count", required_argument, NULL, CLI_OPT_GRAPH }
#define CLI_OPT_GRAPH 0x1100
int cli_graph_opt(const char *cmd, const char *name, const char *arg);
void cli_graph_opts(struct rbp_output_opts *oo);
/* How many raw files, and bytes, the cache directory keeps (README, man page). */
#define CLI_RAW_KEEP 20
#define CLI_RAW_KEEP_BYTES (512ull << 20)
/*
 * Remove the older raw files rbpeek wrote in the cache directory dir (its
 * own names, regular files of the user, raw content) beyond the newest
 * keep and keep_bytes; the newest always stays.  Returns how many went.
 */
int cli_raw_cache_trim(const char *dir, size_t keep, unsigned long long keep_bytes);

#endif
