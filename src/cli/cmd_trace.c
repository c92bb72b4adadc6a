/*
 * cmd_trace.c - `rbpeek trace -o FILE -- ruby app.rb`: run a Ruby program
 * with the in-process tracer (ext/rbpeek, RbPeek::Trace) loaded from the
 * start, and save everything it recorded when the program exits.
 *
 * Unlike record, this works from inside: the program gets
 * RUBYOPT="-I<dir> -rrbpeek/trace/auto", which starts tracing and saves to
 * $RBPEEK_TRACE_OUT at exit (lib/rbpeek/trace/auto.rb), in our child only
 * ($RBPEEK_TRACE_PARENT is our PID): the program the command execs into
 * (bundle exec, binstubs, ruby -S) traces, the processes it spawns do not.  <dir> is
 * $RBPEEK_TRACE_LIB, else the ext/ directory next to this executable (the
 * build tree's copy, built for the Ruby `make` found), else the installed
 * ../lib/rbpeek/ruby (see find_lib); without any the installed rbpeek gem
 * is used.  We wait for the program, pass its exit
 * status on, and check that the trace was written.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "../../ext/rbpeek/ktrace.h"   /* the tracer's kernel streams, served to it under sudo */

static const char trace_usage[] =
	"usage: rbpeek trace -o FILE [-f perfetto|json] [--buffer-size N] [--no-c-calls]\n"
	"                    [--no-drop-root] -- CMD ARGS...\n"
	"\n"
	"Run a Ruby program with rbpeek's in-process tracer and write every method call,\n"
	"GC step and (Ruby 3.2+) GVL state of its run to FILE when it exits: a Perfetto\n"
	"trace (open it in https://ui.perfetto.dev) or Chrome JSON (-f json).\n"
	"\n"
	"options:\n"
	"  -o, --output FILE     where the trace goes (required)\n"
	"  -f, --format FMT      perfetto or json (default: json for FILE.json, else perfetto;\n"
	"                        a profile's name, FILE.svg, FILE.pb.gz, ..., is refused)\n"
	"  --buffer-size N       events kept per thread (default 1048576, 16 bytes each);\n"
	"                        when a thread records more, its oldest events are dropped\n"
	"  --no-c-calls          leave C methods out (cheaper)\n"
	"  --no-drop-root        from a root shell, run the program as root (refused under sudo;\n"
	"                        there it runs as the invoking user with no capability, and\n"
	"                        rbpeek reads its kernel streams for it)\n"
	"\n"
	"The tracer is loaded through RUBYOPT from $RBPEEK_TRACE_LIB, the build tree's\n"
	"ext/ directory, PREFIX/lib/rbpeek/ruby next to an installed rbpeek (make install,\n"
	"the Debian package; one extension per Ruby ABI), or the installed rbpeek gem.\n"
	"The command may exec the Ruby program (bundle exec, binstubs, ruby -S, a script\n"
	"that execs ruby): the process rbpeek starts is traced, whatever it execs into;\n"
	"the processes it forks or spawns are not (rake's test runner is one: trace\n"
	"'ruby -Itest FILE' instead).\n"
	"rbpeek exits with the program's status, or 10 when the trace was not written.\n";

static pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

/*
 * The directory holding rbpeek/trace/auto.rb for -I, or NULL (the gem's):
 * $RBPEEK_TRACE_LIB, else the build tree's ext/ next to this executable,
 * else an installed tree's ../lib/rbpeek/ruby (make install, the Debian
 * package), whose lib/rbpeek/trace.rb loads the extension built for the
 * Ruby it runs in from <dir>/<ABI>/.
 */
static const char *find_lib(char *buf, size_t len)
{
	static const char *const rel[] = { "/ext", "/../lib/rbpeek/ruby" };
	const char *env = getenv("RBPEEK_TRACE_LIB");
	char exe[PATH_MAX], probe[PATH_MAX + 64];
	ssize_t n;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(probe, sizeof(probe), "%s%s/rbpeek/trace/auto.rb", exe, rel[i]);
		if (access(probe, R_OK))
			continue;
		/* the installed one without "bin/..": -I wants no dot-dot surprises */
		if (i == 1 && (slash = strrchr(exe, '/')) != NULL)
			*slash = 0;
		if (snprintf(buf, len, "%s%s", exe, i == 1 ? "/lib/rbpeek/ruby" : rel[i]) >= (int)len)
			return NULL;
		return buf;
	}
	return NULL;
}

/* RUBYOPT plus our -I/-r, and the RBPEEK_TRACE_* settings. */
static int set_env(const char *out, const char *fmt, const char *size, int no_c)
{
	char lib[PATH_MAX], opt[2 * PATH_MAX + 64], parent[24];
	const char *dir = find_lib(lib, sizeof(lib)), *old = getenv("RUBYOPT");

	if (dir && strchr(dir, ' ')) {
		fprintf(stderr, "rbpeek: error: the tracer's directory '%s' has a space, which RUBYOPT cannot carry\n", dir);
		return -1;
	}
	snprintf(opt, sizeof(opt), "%s%s -rrbpeek/trace/auto%s%.*s", dir ? "-I" : "", dir ? dir : "",
		 old && *old ? " " : "", PATH_MAX, old ? old : "");
	/* auto.rb traces only in our child, whatever it execs into (not its children) */
	snprintf(parent, sizeof(parent), "%d", (int)getpid());
	if (setenv("RUBYOPT", opt, 1) || setenv("RBPEEK_TRACE_OUT", out, 1) ||
	    setenv("RBPEEK_TRACE_PARENT", parent, 1) ||
	    setenv("RBPEEK_TRACE_FORMAT", fmt, 1) || (size && setenv("RBPEEK_TRACE_BUFFER", size, 1)) ||
	    (no_c && setenv("RBPEEK_TRACE_C_CALLS", "0", 1)))
		return -1;
	return 0;
}

/* An absolute path for out (the program may change directory). */
static int absolute(const char *out, char *buf, size_t len)
{
	char cwd[PATH_MAX];

	if (out[0] == '/')
		return snprintf(buf, len, "%s", out) >= (int)len ? -1 : 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	return snprintf(buf, len, "%s/%s", cwd, out) >= (int)len ? -1 : 0;
}

/*
 * The program's kernel streams under sudo: opened here, as root, for the
 * child while it waits to exec (its only thread, which every later thread
 * inherits them from), and served to its tracer over a socket.
 */
struct kstreams {
	struct rbk_trace *t;   /* NULL when they could not be opened */
	int rc;                /* then why not: -errno and a reason */
	char why[256];
	int fd;                /* our end of the socket; -1 once closed */
	uid_t uid;             /* the user the program runs as */
	gid_t gid;
};

/*
 * Whether pid still runs as the user, with no capability: not after it
 * exec'd a setuid or setgid program or one with file capabilities (the
 * kernel then drops its per-thread events, but the per-CPU wakeup events
 * would still see it).  Only then are its requests answered.
 */
static int still_unprivileged(pid_t pid, uid_t uid, gid_t gid)
{
	char path[48], line[256];
	unsigned long v[4];
	unsigned long long cap;
	int good = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4)
			good += v[0] == uid && v[1] == uid && v[2] == uid && v[3] == uid;
		else if (sscanf(line, "Gid: %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4)
			good += v[0] == gid && v[1] == gid && v[2] == gid && v[3] == gid;
		else if (sscanf(line, "CapPrm: %llx", &cap) == 1 || sscanf(line, "CapEff: %llx", &cap) == 1)
			good += cap == 0;
	}
	fclose(f);
	return good == 4;
}

static void open_kstreams(pid_t pid, void *arg)
{
	struct kstreams *k = arg;

	k->rc = rbk_open_pid(&k->t, pid, 0, k->why, sizeof(k->why));
}

/* Wait for the child, answering its tracer's requests meanwhile. */
static int wait_serving(struct kstreams *k, int *status)
{
	for (;;) {
		pid_t w = waitpid(child, status, k->fd < 0 ? 0 : WNOHANG);
		if (w == child)
			return 0;
		if (w < 0 && errno != EINTR)
			return -1;
		if (k->fd < 0)
			continue;
		struct pollfd p = { k->fd, POLLIN, 0 };
		if (poll(&p, 1, 50) <= 0)
			continue;
		if (!still_unprivileged(child, k->uid, k->gid) || rbk_serve(k->t, k->rc, k->why, k->fd)) {
			/* it became privileged, closed its end, stalled, or spoke nonsense */
			close(k->fd);
			k->fd = -1;
			rbk_close(k->t);
			k->t = NULL;
		}
	}
}

/* Remove a stale output (as the invoking user under sudo, as every file change). */
static int unlink_fn(void *path)
{
	return unlink(path) && errno != ENOENT ? -errno : 0;
}

/*
 * Run the program and wait for it.  Under sudo (unless no_drop_root) it
 * runs as the invoking user with no capability, and its kernel streams are
 * opened here and served to it (struct kstreams).  The trace is written by
 * the program (ext/rbpeek/trace_save.c, a temporary renamed into place);
 * here it is only looked at, never followed through a symlink.
 */
static int run(char **cmd, const char *out, int no_drop_root)
{
	struct stat st;
	struct cli_invoker inv;
	struct kstreams k = { .fd = -1 };
	int status, sv[2], rc;
	/* a device or FIFO (-o /dev/stdout) is written in place and never removed */
	int special = !stat(out, &st) && !S_ISREG(st.st_mode);

	if (!special)   /* so that a stale file is not taken for this run's trace */
		cli_as_invoker(unlink_fn, (void *)out);
	if (!no_drop_root && cli_invoker(&inv) && !socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		struct cli_spawn_gate g = { sv[1], "RBPEEK_TRACE_KFD", open_kstreams, &k };
		/* a program that stops reading its answers does not hold rbpeek */
		struct timeval tmo = { 10, 0 };
		setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
		setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
		k.fd = sv[0];
		k.uid = inv.uid;
		k.gid = inv.gid;
		child = cli_spawn_gated(cmd, CLI_SPAWN_AS_INVOKER, &g);
		close(sv[1]);
	} else {
		child = cli_spawn(cmd, no_drop_root ? 0 : CLI_SPAWN_AS_INVOKER);
	}
	signal(SIGINT, SIG_IGN);  /* the terminal's Ctrl-C reaches the program itself */
	signal(SIGTERM, forward);
	signal(SIGHUP, forward);
	rc = child < 0 ? EXIT_USAGE : wait_serving(&k, &status) ? EXIT_INTERNAL : 0;
	if (k.fd >= 0)
		close(k.fd);
	rbk_close(k.t);
	if (rc)
		return rc;
	if (!special && (lstat(out, &st) || !S_ISREG(st.st_mode) || !st.st_size)) {
		fprintf(stderr, "rbpeek: error: the program exited without writing '%s'\n"
			"hint: does the command run Ruby itself or exec it (a Ruby it forks or spawns is "
			"not traced), and can that Ruby load the tracer? (build it for that Ruby: "
			"make install-tracer RUBY=that-ruby, or gem install rbpeek)\n", out);
		return EXIT_OUTPUT;
	}
	if (!special)
		fprintf(stderr, "rbpeek: trace written to %s (%lld bytes)\n", out, (long long)st.st_size);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcasecmp(s + n - k, suffix);
}

int cmd_trace(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPTS_OUTPUT,
		{ "buffer-size", required_argument, NULL, 'b' },
		{ "no-c-calls", no_argument, NULL, 'C' },
		{ "no-drop-root", no_argument, NULL, 'R' },
		CLI_OPTS_END
	};
	const char *out = NULL, *fmt = NULL, *size = NULL, *fits = NULL;
	struct cli_parser cp = { .cmd = "trace", .usage = trace_usage, .shortopts = "+:o:f:h",
		.longopts = longopts, .output = &out, .format = &fmt };
	char path[PATH_MAX];
	int c, no_c = 0, no_drop_root = 0;

	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		switch (c) {
		case CLI_OPT_ERROR: return EXIT_USAGE;
		case 'b': size = optarg; break;
		case 'C': no_c = 1; break;
		case 'R': no_drop_root = 1; break;
		}
	}
	if (fmt && strcmp(fmt, "perfetto") && strcmp(fmt, "json"))
		return cli_usage_error("trace", "unknown format '%s' (perfetto or json)", fmt);
	if (out && (c = cli_check_trace_name(out)))
		return c;
	if (out && cli_perfetto_name(out))
		fits = "perfetto";
	else if (out && ends_with(out, ".json"))
		fits = "json";
	if ((c = cli_pick_name("trace", fmt, fits, out, &fmt)))
		return c;
	if (!fmt)
		fmt = "perfetto";
	if (size) {
		char *end;
		unsigned long long n = strtoull(size, &end, 10);
		if (*end || n < 16 || n > (1ull << 32))
			return cli_usage_error("trace", "--buffer-size wants 16 .. 4294967296 events, not '%s'", size);
	}
	if (!out)
		return cli_usage_error("trace", "give the output file with -o FILE");
	if (optind >= argc)
		return cli_usage_error("trace", "give the program to run after --, e.g. -- ruby app.rb");
	if (no_drop_root && (c = cli_check_no_drop_root("trace", argv[optind])))
		return c;
	if (absolute(out, path, sizeof(path)) || cli_check_writable(path)) {
		fprintf(stderr, "rbpeek: error: cannot write '%s'\n", out);
		return EXIT_OUTPUT;
	}
	if (set_env(path, fmt, size, no_c))
		return EXIT_INTERNAL;
	return run(argv + optind, path, no_drop_root);
}
