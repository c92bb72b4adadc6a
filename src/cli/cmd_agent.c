/*
 * cmd_agent.c - `rbpeek agent`: profile every Ruby process of the host
 * continuously and push the profiles to Pyroscope (profile/agent.h does
 * the work); `rbpeek agent --status` asks a running agent how it does.
 * Options and config-file keys are the same names (rbp_agent_opt_set).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/signals.h"
#include "output/pyroscope.h"
#include "profile/agent.h"
#include "profile/bpfsampler.h"
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
	"      --server URL        where to push: http://HOST[:PORT][/PATH] (no https: use\n"
	"                          a local relay)\n"
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
	"                          idle or blocked threads, no GC frames, no GVL state), at a\n"
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
	printf("  itself     %.2f s of CPU, %.1f MiB resident\n", M("cpu_seconds_total"),
	       M("resident_memory_bytes") / 1048576.0);
#undef M
	free(page);
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
		if ((err = rbp_agent_config(&o, path, why, sizeof(why))))
			return err == RBP_EIO ?
			       cli_usage_error("agent", "cannot read the config file '%s'", path) :
			       cli_usage_error("agent", "%s: %s", path, why);
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
	o.sampler = &rbp_agent_ptrace_sampler;
	if (!o.ptrace && (o.bpf = cli_bpf_engine(o.rate_hz)))
		o.sampler = &rbp_agent_bpf_sampler;
	fprintf(stderr, "rbpeek agent: profiling every Ruby process at %u Hz (%s), pushing to %s "
		"every %u s\n", o.rate_hz, o.bpf ? "in-kernel sampler: on-CPU samples" :
		"ptrace sampler", o.server, o.interval_s);
	err = rbp_agent_run(&o, &st);
	rbp_bpf_sampler_close(o.bpf);
	if (err) {
		if (err == RBP_ENET)
			fprintf(stderr, "rbpeek: error: cannot listen on %s for --metrics "
				"(in use, or not an address of this host)\n", o.metrics);
		else if (err == RBP_EURL)
			fprintf(stderr, "rbpeek: error: bad address '%s'\n",
				err == RBP_EURL && o.metrics[0] ? o.metrics : o.server);
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
