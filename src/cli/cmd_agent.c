/*
 * cmd_agent.c - `rbpeek agent`: profile every Ruby process of the host
 * continuously and push the profiles to Pyroscope (profile/agent.h does
 * the work); `rbpeek agent --status` asks a running agent how it does.
 * Options and config-file keys are the same names (rbp_agent_opt_set).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "cli/signals.h"
#include "output/pyroscope.h"
#include "profile/agent.h"
#include "util/err.h"
#include "util/http.h"

static const char agent_usage[] =
	"usage: rbpeek agent --server URL [options]\n"
	"       rbpeek agent --status [--metrics HOST:PORT | --config FILE]\n"
	"\n"
	"Profile every Ruby process on this host (containers included, new ones as they\n"
	"start) and push one profile per process every interval to Pyroscope's HTTP ingest\n"
	"API, in pprof format, labelled service_name, hostname, pid, ruby_version.\n"
	"\n"
	"      --server URL        where to push: http[s]://HOST[:PORT][/PATH]; https is\n"
	"                          verified against the system's CAs (TLS 1.2 or later)\n"
	"      --ca-file FILE      trust this CA too (PEM), e.g. a company's own\n"
	"      --basic-auth-user USER  basic authentication (Grafana Cloud: the stack's\n"
	"                          user id), with the password from:\n"
	"      --basic-auth-password-file FILE  its first line (mode 600: not readable by\n"
	"                          others)\n"
	"      --bearer-token-file FILE  send 'Authorization: Bearer' with its first line\n"
	"      --tenant-id ID      the tenant, sent as X-Scope-OrgID (multi-tenant Pyroscope)\n"
	"      --header 'NAME: VALUE'  one more header for every request (repeatable; its\n"
	"                          value is wiped from the command line once read, but\n"
	"                          secrets belong in --config or the -file options)\n"
	"  -r, --rate HZ           samples per second (default 100)\n"
	"  -i, --interval SECONDS  one profile per process this often (default 10)\n"
	"  -l, --label KEY=VALUE   add a label to every profile (repeatable)\n"
	"      --config FILE       read options from FILE (key = value lines, the long\n"
	"                          option names as keys); the command line wins\n"
	"      --metrics HOST:PORT serve Prometheus metrics at http://HOST:PORT/metrics\n"
	"                          (use a loopback address: 127.0.0.1:9393)\n"
	"      --status            print the metrics of the agent running at --metrics\n"
	"      --max-processes N   profile at most N processes at once (default 512)\n"
	"      --max-samples N     samples per process per interval (default 100000)\n"
	"      --max-nodes N       distinct stack nodes per process per interval\n"
	"                          (default 100000)\n"
	"      --max-pending N     profiles kept while the server is unreachable; the\n"
	"                          oldest are dropped beyond it (default 1000)\n"
	"      --max-pending-bytes SIZE  their total size (default 32M)\n"
	"      --timeout SECONDS   for each request to the server (default 10)\n"
	"      --backoff-max SECONDS  longest wait between retries (default 60)\n"
	"      --scan-interval SECONDS  how often to look for new processes (default 1)\n"
	"      --require-env NAME  profile only the processes whose environment sets NAME\n"
	"                          (opt-in per service, e.g. PYROSCOPE_APPLICATION_NAME)\n"
	"      --sampler SAMPLER   bpf (default): the kernel copies the Ruby stack of a\n"
	"                          thread it interrupts on a CPU; on-CPU samples only (no\n"
	"                          idle or blocked threads; GC frames, GVL state), at a\n"
	"                          cost that follows CPU use, not the number of processes;\n"
	"                          falls back to ptrace with a warning where eBPF is not\n"
	"                          allowed.  ptrace: read every thread's stack from outside\n"
	"                          at each tick (idle threads, GC frames; costs a read per\n"
	"                          process per tick)\n"
	"      --pause             with --sampler ptrace: stop the thread holding the GVL\n"
	"                          for each read, as record does (consistent stacks); by\n"
	"                          default nothing is stopped\n"
	"  -h, --help              show this help\n"
	"\n"
	"It logs one line to stderr when the server goes down or comes back, and runs\n"
	"until SIGINT or SIGTERM.\n";

static void log_line(void *ctx, const char *line)
{
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;

	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	fprintf(stderr, "rbpeek agent: %s %s\n", ts, line);
}

static void listening(void *ctx, int port)
{
	const struct rbp_agent_opts *o = ctx;
	char host[128];

	snprintf(host, sizeof(host), "%s", o->metrics);
	*strrchr(host, ':') = 0;
	fprintf(stderr, "rbpeek agent: metrics at http://%s:%d/metrics\n", host, port);
}

static int should_stop(void *ctx)
{
	return cli_stop_signal() != 0;
}

/* The value of metric name in a Prometheus text page, 0 when absent. */
static double metric(const char *page, const char *name)
{
	size_t l = strlen(name);

	for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, l) && p[l] == ' ')
			return atof(p + l + 1);
	return 0;
}

static int status(const struct rbp_agent_opts *o)
{
	char url[160];
	struct rbp_url u;
	char *page;
	size_t len;
	int code, err;

	if (!o->metrics[0])
		return cli_usage_error("agent", "--status needs the agent's --metrics address "
				       "(or a --config file that has it)");
	snprintf(url, sizeof(url), "http://%s", o->metrics);
	if (rbp_url_parse(url, &u))
		return cli_usage_error("agent", "bad --metrics address '%s'", o->metrics);
	if ((err = rbp_http_get(&u, "/metrics", 5000, &code, &page, &len)) || code != 200) {
		fprintf(stderr, "rbpeek: error: no agent answers at %s: %s\n"
			"hint: is 'rbpeek agent --metrics %s' running? (systemctl status rbpeek-agent)\n",
			url, err ? rbp_strerror(err) : "not a metrics page", o->metrics);
		if (!err)
			free(page);
		return EXIT_INTERNAL;
	}
#define M(n) metric(page, "rbpeek_agent_" n)
	printf("rbpeek agent at %s: server %s\n", url, M("server_up") ? "up" : "DOWN");
	printf("  processes  %.0f watched, %.0f since start, %.0f not watched (max-processes)\n",
	       M("processes_watched"), M("processes_attached_total"), M("processes_capped_total"));
	printf("  profiles   %.0f sent, %.0f pending (%.0f bytes), %.0f dropped, %.0f rejected, "
	       "%.0f failed sends\n", M("profiles_sent_total"), M("pending_profiles"),
	       M("pending_bytes"), M("profiles_dropped_total"), M("profiles_rejected_total"),
	       M("send_failures_total"));
	printf("  samples    %.0f taken, %.0f lost; %.0f ticks, %.0f late\n", M("samples_total"),
	       M("samples_lost_total"), M("ticks_total"), M("ticks_late_total"));
	printf("  server     %.0f connections opened; TLS failures: %.0f unknown CA, %.0f name "
	       "mismatch, %.0f expired, %.0f handshake\n", M("connections_total"),
	       M("tls_failures_total{reason=\"unknown_ca\"}"),
	       M("tls_failures_total{reason=\"name_mismatch\"}"),
	       M("tls_failures_total{reason=\"expired\"}"),
	       M("tls_failures_total{reason=\"handshake\"}"));
	printf("  itself     %.2f s of CPU, %.1f MiB resident\n", M("cpu_seconds_total"),
	       M("resident_memory_bytes") / 1048576.0);
#undef M
	free(page);
	return 0;
}

/* ---- the config file, opened with the invoking user's rights ------------- */

struct opener {
	const char *path;
	int sock;   /* the descriptor goes back through it */
};

/* In the invoker's process (under sudo) or ours: open the file, hand the descriptor over. */
static int open_and_send(void *arg)
{
	const struct opener *op = arg;
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, one = 'f';
	struct iovec iov = { &one, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	/* O_NONBLOCK: a FIFO cannot block the open (anything not regular is refused after) */
	int fd = open(op->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY), err;

	if (fd < 0)
		return -errno;
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	err = sendmsg(op->sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
	close(fd);
	return err;
}

/*
 * Open path as the invoking user would (under sudo: in a child that has
 * become the user, so a file only root may read is refused as it would
 * be to the user); the descriptor, or -errno.
 */
static int open_config(const char *path)
{
	char cbuf[CMSG_SPACE(sizeof(int))], one;
	struct iovec iov = { &one, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct opener op = { .path = path };
	int sv[2], rc, fd = -EIO;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	op.sock = sv[1];
	rc = cli_as_invoker(open_and_send, &op);
	close(sv[1]);
	if (rc == 0 && recvmsg(sv[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1) {
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	} else if (rc < 0) {
		fd = rc;
	} else if (rc > 0) {
		fd = -EPERM;   /* the child could not become the user: said already */
	}
	close(sv[0]);
	return fd;
}

static int read_config(struct rbp_agent_opts *o, const char *path)
{
	char why[256];
	int fd = open_config(path), err;

	if (fd < 0)
		return cli_usage_error("agent", "cannot read the config file '%s': %s%s", path,
				       strerror(-fd), -fd == EACCES && getenv("SUDO_UID") ?
				       " (it is read with your own rights, not root's)" : "");
	err = rbp_agent_config_fd(o, fd, why, sizeof(why));
	close(fd);
	if (err == RBP_EIO)
		return cli_usage_error("agent", "cannot read the config file '%s'", path);
	if (err)
		return cli_usage_error("agent", "%s: %s", path, why);
	return 0;
}

/*
 * A secret's file: its first line into out.  Opened with the invoking
 * user's rights; refused, like ssh refuses a private key, when others may
 * read or write it, or when it is not a small regular file.  The content
 * is never echoed.
 */
static int read_secret(const char *path, const char *opt, char *out, size_t cap)
{
	struct stat st;
	char buf[8192];
	ssize_t n;
	int fd = open_config(path);

	if (fd < 0)
		return cli_usage_error("agent", "%s: cannot read '%s': %s", opt, path, strerror(-fd));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size >= (off_t)sizeof(buf)) {
		close(fd);
		return cli_usage_error("agent", "%s: '%s' is not a small regular file", opt, path);
	}
	if (st.st_mode & 077) {
		close(fd);
		return cli_usage_error("agent", "%s: '%s' may be read by others (mode %03o): it holds "
				       "a secret; chmod 600 it", opt, path, (unsigned)(st.st_mode & 0777));
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return cli_usage_error("agent", "%s: cannot read '%s'", opt, path);
	buf[n] = 0;
	size_t l = strcspn(buf, "\r\n");
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			l = 0;
	if (!l || l >= cap) {
		explicit_bzero(buf, sizeof(buf));
		return cli_usage_error("agent", "%s: '%s': its first line must hold the secret "
				       "(1 to %zu printable bytes)", opt, path, cap - 1);
	}
	memcpy(out, buf, l);
	out[l] = 0;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

static const struct option long_opts[] = {
	{ "server", required_argument, NULL, 's' },
	{ "rate", required_argument, NULL, 'r' },
	{ "interval", required_argument, NULL, 'i' },
	{ "label", required_argument, NULL, 'l' },
	{ "config", required_argument, NULL, 'c' },
	{ "metrics", required_argument, NULL, 'm' },
	{ "status", no_argument, NULL, 'S' },
	{ "max-processes", required_argument, NULL, 'o' },
	{ "max-samples", required_argument, NULL, 'o' },
	{ "max-nodes", required_argument, NULL, 'o' },
	{ "max-pending", required_argument, NULL, 'o' },
	{ "max-pending-bytes", required_argument, NULL, 'o' },
	{ "timeout", required_argument, NULL, 'o' },
	{ "backoff-max", required_argument, NULL, 'o' },
	{ "scan-interval", required_argument, NULL, 'o' },
	{ "require-env", required_argument, NULL, 'o' },
	{ "sampler", required_argument, NULL, 'o' },
	{ "ca-file", required_argument, NULL, 'o' },
	{ "basic-auth-user", required_argument, NULL, 'o' },
	{ "basic-auth-password-file", required_argument, NULL, 'o' },
	{ "bearer-token-file", required_argument, NULL, 'o' },
	{ "tenant-id", required_argument, NULL, 'o' },
	{ "header", required_argument, NULL, 'H' },
	{ "pause", no_argument, NULL, 'P' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int cmd_agent(int argc, char **argv)
{
	struct cli_parser cp = { .cmd = "agent", .usage = agent_usage, .shortopts = ":r:i:l:h",
		.longopts = long_opts };
	struct rbp_agent_opts o;
	struct rbp_agent_stats st;
	char why[256];
	int c, want_status = 0, err;

	rbp_agent_opts_init(&o);
	/* the config file first, whatever its place: the command line overrides it */
	for (int i = 1; i < argc; i++) {
		const char *path = !strcmp(argv[i], "--config") ?
				   (i + 1 < argc ? argv[i + 1] : NULL) :
				   !strncmp(argv[i], "--config=", 9) ? argv[i] + 9 : NULL;
		if (!path)
			continue;
		if ((err = read_config(&o, path)))
			return err;
	}
	while ((c = cli_getopt(argc, argv, &cp)) != -1) {
		const char *key = NULL;
		switch (c) {
		case CLI_OPT_ERROR:
			return EXIT_USAGE;
		case 'c':
			continue;
		case 'S':
			want_status = 1;
			continue;
		case 'P':
			o.pause = 1;
			continue;
		case 's': key = "server"; break;
		case 'r': key = "rate"; break;
		case 'i': key = "interval"; break;
		case 'l': key = "label"; break;
		case 'm': key = "metrics"; break;
		case 'o': key = long_opts[cp.index].name; break;
		case 'H':
			/* a header may carry a credential: never echoed, wiped from argv */
			err = rbp_agent_opt_set(&o, "header", optarg, why, sizeof(why));
			explicit_bzero(optarg, strlen(optarg));
			if (err)
				return cli_usage_error("agent", "--header: %s", why);
			continue;
		}
		if (!strcmp(key, "server") && strchr(optarg, '@')) {
			struct rbp_url u;
			if (!rbp_url_parse(optarg, &u) && u.password[0]) {
				explicit_bzero(u.password, sizeof(u.password));
				explicit_bzero(optarg, strlen(optarg));
				return cli_usage_error("agent", "--server: a password on the command line "
						       "is seen by every user (ps): use "
						       "--basic-auth-password-file, or the server key of a "
						       "--config file");
			}
		}
		if (rbp_agent_opt_set(&o, key, optarg, why, sizeof(why)))
			return cli_usage_error("agent", "--%s '%s': %s", key, optarg, why);
	}
	if (cli_no_operands("agent", argc, argv))
		return EXIT_USAGE;
	if (want_status)
		return status(&o);
	if (!o.server[0])
		return cli_usage_error("agent", "--server URL is required (Pyroscope's address, "
				       "e.g. http://127.0.0.1:4040)");
	if (o.password_file[0] && (err = read_secret(o.password_file, "--basic-auth-password-file",
						     o.password, sizeof(o.password))))
		return err;
	if (o.bearer_file[0] && (err = read_secret(o.bearer_file, "--bearer-token-file", o.bearer,
						   sizeof(o.bearer))))
		return err;
	if (o.password[0] && !o.basic_user[0])
		return cli_usage_error("agent", "--basic-auth-password-file needs --basic-auth-user");
	if (o.pause && !o.ptrace)
		return cli_usage_error("agent", "--pause is for --sampler ptrace (the bpf sampler "
				       "stops nothing)");
	cli_signals_init();
	cli_vm_env(&o.vo, NULL);
	o.exporter = &rbp_pyroscope_exporter;
	o.should_stop = should_stop;
	o.log = log_line;
	o.listening = listening;
	o.ctx = &o;
	int bpf_err;
	char bpf_why[768];
	rbp_agent_sampler_open(&o, !o.ptrace, &bpf_err, bpf_why, sizeof(bpf_why));
	if (bpf_err)
		cli_bpf_fallback(bpf_why, bpf_err);
	char shown[1024];
	rbp_url_redact(o.server, shown, sizeof(shown));
	fprintf(stderr, "rbpeek agent: profiling every Ruby process at %u Hz (%s), pushing to %s "
		"every %u s\n", o.rate_hz, o.bpf ? "in-kernel sampler: on-CPU samples" :
		"ptrace sampler", shown, o.interval_s);
	err = rbp_agent_run(&o, &st);
	rbp_agent_sampler_close(&o);
	if (err) {
		if (err == RBP_ENET)
			fprintf(stderr, "rbpeek: error: cannot listen on %s for --metrics "
				"(in use, or not an address of this host)\n", o.metrics);
		else if (err == RBP_EURL)
			fprintf(stderr, "rbpeek: error: bad address '%s'\n",
				o.metrics[0] ? o.metrics : shown);
		else if (err == RBP_ETLS)
			fprintf(stderr, "rbpeek: error: cannot load the CA file '%s' (PEM "
				"certificates expected)\n", o.ca_file);
		else
			fprintf(stderr, "rbpeek: error: %s\n", rbp_strerror(err));
		return EXIT_INTERNAL;
	}
	fprintf(stderr, "rbpeek agent: stopped: %llu profiles sent, %llu dropped, %llu rejected; "
		"%llu processes profiled\n", (unsigned long long)st.profiles_sent,
		(unsigned long long)st.profiles_dropped, (unsigned long long)st.profiles_rejected,
		(unsigned long long)st.processes_attached);
	return 0;
}
