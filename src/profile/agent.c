/*
 * agent.c - rbpeek agent's main loop (see agent.h): keep the process set
 * current, let the sampler fill one profile per process, and every
 * interval hand each profile to the exporter and the send queue.
 *
 * The loop runs in slices of at most scan_ms: rescan /proc, sample until
 * the end of the slice, then (when the interval is over) flush.  A process
 * that exits is flushed when the sampler drops it, so its last seconds are
 * sent too.  Per process it keeps what labels the profile (service name,
 * pids, Ruby version, container) and the profile of the interval, which
 * is replaced by an empty one at each flush: memory does not grow with
 * time, and max_samples / max_nodes bound it within an interval.
 */
#include "profile/agent.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "proc/environ.h"
#include "proc/uts.h"
#include "profile/agent_int.h"
#include "util/err.h"

/* What the agent keeps per watched process (member->user). */
struct aproc {
	pid_t pid, ns_pid;
	char service[128];
	char version[32];
	char container[72];       /* container id from /proc/PID/cgroup, "" none */
	char pod_uid[40];         /* Kubernetes: the pod's UID from the cgroup path, "" none */
	char pod[72];             /* its name: the host name of the container's UTS namespace */
	char k8s_ns[72];          /* its namespace, from the downward API's environment */
	char pid_s[16], ns_pid_s[16];
	struct rbp_profile prof;  /* the interval's samples */
	int prof_ok;              /* prof initialised */
	uint64_t t0_ns;           /* monotonic start of the interval */
	uint64_t from_unix_ns;
};

struct agent {
	const struct rbp_agent_opts *o;
	const struct rbp_agent_sampler *sampler;
	void *sampler_state;
	struct rbp_procset *procs;
	struct agent_shared sh;
	char hostname[128];
	int err;                  /* first RBP_ENOMEM met in a callback */
	uint64_t empty;           /* intervals with no samples (nothing sent) */
	char *env;                /* ENV_MAX bytes: a process's environment, read */
	char server_shown[1024];  /* the server's URL, its password hidden */
};

#define ENV_MAX (256 * 1024)

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- options ------------------------------------------------------------- */

void rbp_agent_opts_init(struct rbp_agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->rate_hz = 100;
	o->interval_s = 10;
	o->max_processes = 512;
	o->max_samples = 100000;
	o->max_nodes = 100000;
	o->max_pending = 1000;
	o->max_pending_bytes = 32ull << 20;
	o->timeout_ms = 10000;
	o->backoff_max_s = 60;
	o->scan_ms = 1000;
}

static int why_set(char *why, size_t cap, const char *msg)
{
	if (why && cap)
		snprintf(why, cap, "%s", msg);
	return RBP_EINVAL;
}

/* An unsigned number within [lo, hi]; a "k"/"M" suffix multiplies by 1024s when bytes. */
static int number(const char *v, uint64_t lo, uint64_t hi, int bytes, uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	if (!isdigit((unsigned char)*v))
		return -1;
	n = strtoull(v, &end, 10);
	if (bytes && (*end == 'k' || *end == 'K'))
		n <<= 10, end++;
	else if (bytes && (*end == 'm' || *end == 'M'))
		n <<= 20, end++;
	if (errno || *end || n < lo || n > hi)
		return -1;
	*out = n;
	return 0;
}

/* A label name as Prometheus and Pyroscope take it: [a-zA-Z_][a-zA-Z0-9_]*. */
static int label_name_ok(const char *k)
{
	if (!*k || isdigit((unsigned char)*k))
		return 0;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_')
			return 0;
	return 1;
}

static int set_label(struct rbp_agent_opts *o, const char *v, char *why, size_t cap)
{
	const char *eq = strchr(v, '=');
	char key[64];
	size_t kl = eq ? (size_t)(eq - v) : 0;

	if (!eq || !kl || kl >= sizeof(key))
		return why_set(why, cap, "a label is KEY=VALUE");
	memcpy(key, v, kl);
	key[kl] = 0;
	if (!label_name_ok(key))
		return why_set(why, cap, "a label's key is letters, digits and '_' (not first a digit)");
	if (!strcmp(key, "service_name") || !strcmp(key, "__name__"))
		return why_set(why, cap, "service_name comes from each process (its "
			       "PYROSCOPE_APPLICATION_NAME or OTEL_SERVICE_NAME, else its program)");
	if (strlen(eq + 1) >= sizeof(o->label_values[0]) || !eq[1])
		return why_set(why, cap, "a label's value is 1 to 127 characters");
	for (size_t i = 0; i < o->n_labels; i++)
		if (!strcmp(o->label_keys[i], key)) {   /* the last one given wins */
			strcpy(o->label_values[i], eq + 1);
			return RBP_OK;
		}
	if (o->n_labels == RBP_AGENT_MAX_LABELS)
		return why_set(why, cap, "too many labels (32 at most)");
	strcpy(o->label_keys[o->n_labels], key);
	strcpy(o->label_values[o->n_labels++], eq + 1);
	return RBP_OK;
}

/* "Name: value": a token for the name, a value without control bytes; not one we send. */
static int set_header(struct rbp_agent_opts *o, const char *v, char *why, size_t cap)
{
	static const char *const ours[] = { "host", "content-length", "content-type",
					     "transfer-encoding", "connection", "user-agent" };
	const char *colon = strchr(v, ':');
	size_t nl = colon ? (size_t)(colon - v) : 0;

	if (!colon || !nl)
		return why_set(why, cap, "a header is 'Name: value'");
	for (size_t i = 0; i < nl; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("!#$%&'*+-.^_`|~", v[i]))
			return why_set(why, cap, "a header's name is letters, digits and -");
	for (const char *c = colon + 1; *c; c++)
		if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
			return why_set(why, cap, "no control characters in a header's value");
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (strlen(ours[i]) == nl && !strncasecmp(v, ours[i], nl))
			return why_set(why, cap, "rbpeek sets that header itself");
	if (strlen(v) >= sizeof(o->headers[0]))
		return why_set(why, cap, "a header is at most 511 bytes");
	if (o->n_headers == RBP_AGENT_MAX_HEADERS)
		return why_set(why, cap, "too many headers (16 at most)");
	strcpy(o->headers[o->n_headers++], v);
	return RBP_OK;
}

/* A header that carries a credential, by its name (Authorization, X-Api-Key, a token...). */
static int secret_header(const char *h)
{
	static const char *const words[] = { "auth", "token", "key", "secret", "password", "cookie" };
	size_t nl = strcspn(h, ":");

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		for (size_t k = 0; k + strlen(words[i]) <= nl; k++)
			if (!strncasecmp(h + k, words[i], strlen(words[i])))
				return 1;
	return 0;
}

int rbp_agent_opt_set(struct rbp_agent_opts *o, const char *key, const char *v, char *why,
		      size_t cap)
{
	static const struct { const char *key; size_t off; uint64_t lo, hi, mul; int bytes, u64; } nums[] = {
		{ "rate", offsetof(struct rbp_agent_opts, rate_hz), 1, 10000, 1, 0, 0 },
		{ "interval", offsetof(struct rbp_agent_opts, interval_s), 1, 3600, 1, 0, 0 },
		{ "max-processes", offsetof(struct rbp_agent_opts, max_processes), 1, 100000, 1, 0, 0 },
		{ "max-samples", offsetof(struct rbp_agent_opts, max_samples), 1, 100000000, 1, 0, 0 },
		{ "max-nodes", offsetof(struct rbp_agent_opts, max_nodes), 1, 100000000, 1, 0, 0 },
		{ "max-pending", offsetof(struct rbp_agent_opts, max_pending), 1, 1000000, 1, 0, 0 },
		{ "max-pending-bytes", offsetof(struct rbp_agent_opts, max_pending_bytes), 4096,
		  1ull << 40, 1, 1, 1 },
		{ "timeout", offsetof(struct rbp_agent_opts, timeout_ms), 1, 600, 1000, 0, 0 },
		{ "backoff-max", offsetof(struct rbp_agent_opts, backoff_max_s), 1, 3600, 1, 0, 0 },
		{ "scan-interval", offsetof(struct rbp_agent_opts, scan_ms), 1, 60, 1000, 0, 0 },
	};
	uint64_t n;

	if (!strcmp(key, "server")) {
		struct rbp_url u;
		int bad = strlen(v) >= sizeof(o->server) || rbp_url_parse(v, &u);
		explicit_bzero(u.password, sizeof(u.password));
		if (bad)
			return why_set(why, cap, "not an http[s]://HOST[:PORT][/PATH] URL");
#ifndef RBP_TLS
		if (u.tls)
			return why_set(why, cap, "https: this rbpeek was built without TLS (make TLS=0; "
				       "libssl-dev was missing)");
#endif
		strcpy(o->server, v);
		return RBP_OK;
	}
	static const struct { const char *key; size_t off, cap; } strs[] = {
		{ "ca-file", offsetof(struct rbp_agent_opts, ca_file), sizeof(o->ca_file) },
		{ "basic-auth-user", offsetof(struct rbp_agent_opts, basic_user), sizeof(o->basic_user) },
		{ "basic-auth-password-file", offsetof(struct rbp_agent_opts, password_file),
		  sizeof(o->password_file) },
		{ "bearer-token-file", offsetof(struct rbp_agent_opts, bearer_file), sizeof(o->bearer_file) },
		{ "tenant-id", offsetof(struct rbp_agent_opts, tenant_id), sizeof(o->tenant_id) },
	};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (strcmp(key, strs[i].key))
			continue;
		if (!*v || strlen(v) >= strs[i].cap)
			return why_set(why, cap, "empty, or too long");
		for (const char *c = v; *c; c++)   /* a header's value, or a path: no control bytes */
			if ((unsigned char)*c < 0x20 || *c == 0x7f || (i == 1 && *c == ':'))
				return why_set(why, cap, i == 1 ? "no ':' or control characters in a user name" :
					       "no control characters");
		strcpy((char *)o + strs[i].off, v);
		return RBP_OK;
	}
	if (!strcmp(key, "header"))
		return set_header(o, v, why, cap);
	if (!strcmp(key, "label"))
		return set_label(o, v, why, cap);
	if (!strcmp(key, "pause")) {
		if (strcmp(v, "yes") && strcmp(v, "no"))
			return why_set(why, cap, "yes or no");
		o->pause = !strcmp(v, "yes");
		return RBP_OK;
	}
	if (!strcmp(key, "sampler")) {
		if (strcmp(v, "bpf") && strcmp(v, "ptrace"))
			return why_set(why, cap, "bpf or ptrace");
		o->ptrace = !strcmp(v, "ptrace");
		return RBP_OK;
	}
	if (!strcmp(key, "require-env")) {
		if (strlen(v) >= sizeof(o->require_env) || strchr(v, '='))
			return why_set(why, cap, "an environment variable's name");
		strcpy(o->require_env, v);
		return RBP_OK;
	}
	if (!strcmp(key, "metrics")) {
		if (strlen(v) >= sizeof(o->metrics) || !strchr(v, ':'))
			return why_set(why, cap, "the metrics address is HOST:PORT, e.g. 127.0.0.1:9393");
		strcpy(o->metrics, v);
		return RBP_OK;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		if (number(v, nums[i].lo, nums[i].hi, nums[i].bytes, &n)) {
			char msg[96];
			snprintf(msg, sizeof(msg), "a whole number from %llu to %llu%s",
				 (unsigned long long)nums[i].lo, (unsigned long long)nums[i].hi,
				 nums[i].bytes ? " (k and M suffixes allowed)" : "");
			return why_set(why, cap, msg);
		}
		n *= nums[i].mul;
		if (nums[i].u64)
			*(uint64_t *)((char *)o + nums[i].off) = n;
		else
			*(uint32_t *)((char *)o + nums[i].off) = (uint32_t)n;
		return RBP_OK;
	}
	return why_set(why, cap, "unknown");
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* One "key = value" line (NUL-ended, trimmed of nothing yet). */
static int config_line(struct rbp_agent_opts *o, char *line, unsigned no, char *why, size_t cap)
{
	char *s = trim(line), *eq, msg[200];
	int err;

	if (!*s || *s == '#')
		return RBP_OK;
	if (!(eq = strchr(s, '='))) {
		snprintf(why, cap, "line %u: not 'key = value'", no);
		return RBP_EINVAL;
	}
	*eq = 0;
	char *key = trim(s), *val = trim(eq + 1);
	/* the file's content is never echoed: a key is named only when it is one of ours */
	if (!(err = rbp_agent_opt_set(o, key, val, msg, sizeof(msg)))) {
		struct rbp_url u;
		if (!strcmp(key, "server") && !rbp_url_parse(val, &u) && u.password[0])
			o->secret_in_config = 1;
		if (!strcmp(key, "header") && secret_header(val))
			o->secret_in_config = 1;
		explicit_bzero(u.password, sizeof(u.password));
	} else {
		if (!strcmp(msg, "unknown"))
			snprintf(why, cap, "line %u: unknown key (the keys are the long options' "
				 "names: server, rate, label, ...)", no);
		else
			snprintf(why, cap, "line %u: %s: %s", no, key, msg);
	}
	return err;
}

int rbp_agent_config_fd(struct rbp_agent_opts *o, int fd, char *why, size_t cap)
{
	struct stat st;
	char *text, *p;
	size_t n = 0;
	ssize_t r;
	unsigned no = 0;
	int err = RBP_OK;

	if (fstat(fd, &st))
		return RBP_EIO;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, cap, "not a regular file");
		return RBP_EINVAL;
	}
	if (st.st_size > RBP_AGENT_CONFIG_MAX) {
		snprintf(why, cap, "larger than %d bytes", RBP_AGENT_CONFIG_MAX);
		return RBP_EINVAL;
	}
	if (!(text = malloc(RBP_AGENT_CONFIG_MAX + 2)))
		return RBP_ENOMEM;
	/* the size may change under us: read at most one byte past the limit */
	while (n <= RBP_AGENT_CONFIG_MAX &&
	       (r = read(fd, text + n, RBP_AGENT_CONFIG_MAX + 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(text);
			return RBP_EIO;
		}
		n += (size_t)r;
	}
	if (n > RBP_AGENT_CONFIG_MAX) {
		free(text);
		snprintf(why, cap, "larger than %d bytes", RBP_AGENT_CONFIG_MAX);
		return RBP_EINVAL;
	}
	text[n] = 0;
	for (p = text; !err && p < text + n;) {
		char *nl = memchr(p, '\n', (size_t)(text + n - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(text + n - p);
		no++;
		if (len > RBP_AGENT_LINE_MAX) {
			/* never cut a line in two: the tail of a long comment is no setting */
			snprintf(why, cap, "line %u: longer than %d bytes", no, RBP_AGENT_LINE_MAX);
			err = RBP_EINVAL;
			break;
		}
		if (memchr(p, 0, len)) {
			snprintf(why, cap, "line %u: a NUL byte (not a text file?)", no);
			err = RBP_EINVAL;
			break;
		}
		p[len] = 0;
		err = config_line(o, p, no, why, cap);
		p += len + 1;
	}
	explicit_bzero(text, n);
	free(text);
	/* like ssh with a private key: a secret others may read is refused */
	if (!err && o->secret_in_config && (st.st_mode & 077)) {
		snprintf(why, cap, "holds a secret (a password or a token) and others may read it: "
			 "chmod 600 it");
		err = RBP_EINVAL;
	}
	return err;
}

int rbp_agent_config(struct rbp_agent_opts *o, const char *path, char *why, size_t cap)
{
	/* O_NONBLOCK: a FIFO there cannot block the open; anything not regular is refused */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY), err;

	if (fd < 0)
		return RBP_EIO;
	err = rbp_agent_config_fd(o, fd, why, cap);
	close(fd);
	return err;
}

/* ---- what labels a process ----------------------------------------------- */

/* Read a small /proc file whole (NUL-separated or not) into buf; its length. */
static size_t read_proc(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	size_t n = 0;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = 0;
	return n;
}

/*
 * s (at most len bytes) into out (cap > 0), cut to fit at the end of a
 * whole UTF-8 character, never inside one.
 */
void agent_copy_text(char *out, size_t cap, const char *s, size_t len)
{
	size_t n = strnlen(s, len);

	if (n >= cap) {
		n = cap - 1;
		/* back off over continuation bytes to the start of the cut character */
		while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(out, s, n);
	out[n] = 0;
}

/* The value of an environment variable of the process, "" when unset (env: n bytes, NUL-ended). */
static void env_of(const char *env, size_t n, const char *var, char *out, size_t cap)
{
	size_t vl = strlen(var);

	out[0] = 0;
	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strncmp(env + i, var, vl) && env[i + vl] == '=') {
			agent_copy_text(out, cap, env + i + vl + 1, n - i - vl - 1);
			return;
		}
}

/* The environment of the process (m's target when given) into ag->env, NUL-ended; its length. */
static size_t environment(struct agent *ag, pid_t pid, struct rbp_target *t)
{
	size_t n = 0;

	/* the environment as the process holds it: a title it set may have
	 * overwritten what /proc/PID/environ shows (puma's tag) */
	if (!t || rbp_target_environ(t, ag->env, ENV_MAX - 1, &n))
		rbp_proc_environ(pid, ag->env, ENV_MAX - 1, &n);
	ag->env[n] = 0;
	return n;
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/*
 * The program's name from its command line: the script a ruby runs
 * ("ruby bin/app.rb" -> "app"), the command under "bundle exec", else the
 * program itself ("puma", or the first word of a title it set).
 */
void agent_program_name(const char *cmd, size_t n, char *out, size_t cap)
{
	const char *args[16];
	size_t na = 0, i = 0, k;

	for (; i < n && na < 16; i += strlen(cmd + i) + 1)
		args[na++] = cmd + i;
	out[0] = 0;
	if (!na)
		return;
	k = 0;
	if (!strncmp(base(args[0]), "ruby", 4)) {
		for (k = 1; k < na && args[k][0] == '-'; k++) {
			if (!strcmp(args[k], "-e"))
				break;
			if (strchr("IrCEx", args[k][1]) && !args[k][2])
				k++;   /* an option with its value apart */
		}
		if (k >= na || !strcmp(args[k], "-e"))
			k = 0;
	}
	if (!strcmp(base(args[k]), "bundle") && k + 2 < na && !strcmp(args[k + 1], "exec"))
		k += 2;
	/*
	 * A title a program set ("puma 6.4.0 (tcp://...)": one string, the
	 * rest of the area NULs): its first word.  An argument (a script's
	 * path, "/srv/my app/bin/app.rb") is whole.
	 */
	int title = k == 0;
	for (size_t j = 1; j < na && title; j++)
		title = !args[j][0];
	char word[4096];
	size_t wl = title ? strcspn(args[k], " ") : strlen(args[k]);
	if (wl >= sizeof(word))
		wl = sizeof(word) - 1;
	memcpy(word, args[k], wl);
	word[wl] = 0;
	const char *b = base(word);
	size_t l = strlen(b);
	if (l > 3 && !strcmp(b + l - 3, ".rb"))
		l -= 3;
	agent_copy_text(out, cap, b, l);
}

void agent_container_id(const char *buf, size_t n, char *out, size_t cap)
{
	size_t run = 0;

	out[0] = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && isxdigit((unsigned char)buf[i]) && !isupper((unsigned char)buf[i])) {
			run++;
			continue;
		}
		if (run == 64 && cap > 64) {
			memcpy(out, buf + i - 64, 64);
			out[64] = 0;
		}
		run = 0;
	}
}

/* Where the downward API usually puts a pod's namespace (env: fieldRef metadata.namespace). */
static const char *const ns_vars[] = { "POD_NAMESPACE", "KUBERNETES_NAMESPACE", "K8S_NAMESPACE",
				       "MY_POD_NAMESPACE" };

void agent_pod_uid(const char *text, size_t n, char *out, size_t cap)
{
	out[0] = 0;
	if (cap < 37 || !memmem(text, n, "kubepods", 8))
		return;
	/* "pod" then a UUID, its '-' written '_' by the systemd cgroup driver */
	for (const char *p = text; (p = memmem(p, n - (size_t)(p - text), "pod", 3)); p += 3) {
		const char *u = p + 3;
		size_t i;
		if ((size_t)(u - text) + 36 > n)
			break;
		for (i = 0; i < 36; i++) {
			int sep = i == 8 || i == 13 || i == 18 || i == 23;
			if (sep ? (u[i] != '-' && u[i] != '_') :
			    !(isdigit((unsigned char)u[i]) || (u[i] >= 'a' && u[i] <= 'f')))
				break;
		}
		if (i < 36 || ((size_t)(u - text) + 36 < n && isxdigit((unsigned char)u[36])))
			continue;
		for (i = 0; i < 36; i++)
			out[i] = u[i] == '_' ? '-' : u[i];
		out[36] = 0;
	}
}

static void describe(struct agent *ag, struct aproc *a, struct rbp_procset_member *m)
{
	char cmd[4096], *env = ag->env;
	size_t n;

	a->pid = m->pid;
	a->ns_pid = m->t->ns_pid;
	snprintf(a->pid_s, sizeof(a->pid_s), "%d", (int)a->pid);
	snprintf(a->ns_pid_s, sizeof(a->ns_pid_s), "%d", (int)a->ns_pid);
	snprintf(a->version, sizeof(a->version), "%s", rbp_vm_info(m->vm)->version);
	n = environment(ag, m->pid, m->t);
	env_of(env, n, "PYROSCOPE_APPLICATION_NAME", a->service, sizeof(a->service));
	if (!a->service[0])
		env_of(env, n, "OTEL_SERVICE_NAME", a->service, sizeof(a->service));
	if (!a->service[0]) {
		n = read_proc(m->pid, "cmdline", cmd, sizeof(cmd));
		agent_program_name(cmd, n, a->service, sizeof(a->service));
	}
	if (!a->service[0])
		snprintf(a->service, sizeof(a->service), "ruby");
	n = read_proc(m->pid, "cgroup", cmd, sizeof(cmd));
	agent_container_id(cmd, n, a->container, sizeof(a->container));
	agent_pod_uid(cmd, n, a->pod_uid, sizeof(a->pod_uid));
	if (a->pod_uid[0]) {   /* a Kubernetes pod */
		n = environment(ag, m->pid, m->t);
		for (size_t i = 0; i < sizeof(ns_vars) / sizeof(ns_vars[0]) && !a->k8s_ns[0]; i++)
			env_of(ag->env, n, ns_vars[i], a->k8s_ns, sizeof(a->k8s_ns));
		if (rbp_proc_uts_hostname(m->pid, a->pod, sizeof(a->pod)))
			env_of(ag->env, n, "POD_NAME", a->pod, sizeof(a->pod));
	}
}

/* procset filter: --require-env. */
static int has_env(void *ctx, pid_t pid)
{
	struct agent *ag = ctx;
	const char *var = ag->o->require_env, *env = ag->env;
	size_t n = environment(ag, pid, NULL), vl = strlen(var);

	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strncmp(env + i, var, vl) && env[i + vl] == '=')
			return 1;
	return 0;
}

/* ---- profiles ------------------------------------------------------------ */

static int new_interval(struct aproc *a, struct rbp_procset_member *m, const struct rbp_agent_opts *o)
{
	int err;

	/* the member's caches hold ids of the old profile */
	rbp_hmap_clear(&m->frame_ids);
	rbp_hmap_clear(&m->tid_names);
	if ((err = rbp_profile_init(&a->prof)))
		return err;
	a->prof_ok = 1;
	a->t0_ns = agent_mono_ns();
	a->from_unix_ns = unix_ns();
	a->prof.meta.pid = (int32_t)a->pid;
	a->prof.meta.rate_hz = o->rate_hz;
	a->prof.meta.on_cpu = o->sampler && o->sampler->on_cpu;
	a->prof.meta.start_unix_ns = a->from_unix_ns;
	a->prof.meta.ruby_version = rbp_profile_str(&a->prof, a->version);
	a->prof.meta.cmdline = rbp_profile_str(&a->prof, m->cmdline);
	return RBP_OK;
}

/* The request's labels for a's profile (service_name is the name itself). */
static void labels(const struct agent *ag, const struct aproc *a, struct rbp_agent_meta *meta)
{
	const struct rbp_agent_opts *o = ag->o;

#define LABEL(k, v) do { meta->keys[meta->n_labels] = (k); meta->values[meta->n_labels++] = (v); } while (0)
	LABEL("hostname", ag->hostname);
	LABEL("pid", a->pid_s);
	if (a->ns_pid != a->pid)
		LABEL("namespace_pid", a->ns_pid_s);
	LABEL("ruby_version", a->version);
	if (a->container[0])
		LABEL("container_id", a->container);
	if (a->pod_uid[0])
		LABEL("pod_uid", a->pod_uid);
	if (a->pod[0])
		LABEL("pod", a->pod);
	if (a->k8s_ns[0])
		LABEL("namespace", a->k8s_ns);
	for (size_t i = 0; i < o->n_labels; i++)
		LABEL(o->label_keys[i], o->label_values[i]);
#undef LABEL
}

/* The exporter's request for profile p of a: a queue item (*out, malloc'd). */
static int request(struct agent *ag, const struct aproc *a, const struct rbp_profile *p,
		   uint64_t until_unix_ns, struct agent_item **out)
{
	const struct rbp_agent_exporter *ex = ag->o->exporter;
	struct rbp_agent_meta meta = { .service = a->service, .rate_hz = ag->o->rate_hz };
	struct agent_item *it;
	size_t cap = 32768, len = 0;
	char *body = NULL;
	FILE *f;
	int err;

	meta.from_unix_s = a->from_unix_ns / 1000000000ull;
	meta.until_unix_s = until_unix_ns / 1000000000ull;
	if (meta.until_unix_s <= meta.from_unix_s)
		meta.until_unix_s = meta.from_unix_s + 1;
	labels(ag, a, &meta);
	if (!(it = calloc(1, sizeof(*it))) || !(it->target = malloc(cap)) ||
	    !(f = open_memstream(&body, &len))) {
		agent_item_free(it);
		return RBP_ENOMEM;
	}
	err = ex->encode(p, f);
	if (fclose(f) && !err)
		err = RBP_EIO;
	if (!err)
		err = ex->target(&meta, it->target, cap);
	if (err) {
		free(body);
		agent_item_free(it);
		return err;
	}
	it->body = (unsigned char *)body;
	it->len = len;
	*out = it;
	return RBP_OK;
}

/* Queue a's profile of the interval (unless empty); start a new one unless last. */
static int flush(struct agent *ag, struct aproc *a, struct rbp_procset_member *m, int last)
{
	struct rbp_profile view;
	struct agent_item *it;
	size_t dropped;
	int err;

	if (!a->prof_ok)
		return last ? RBP_OK : new_interval(a, m, ag->o);
	uint64_t now = unix_ns();
	a->prof.meta.duration_ns = now - a->from_unix_ns;
	/* threads waiting for work are left out, as record leaves them out */
	if (!(err = rbp_profile_view_without(&a->prof, RBP_SAMPLE_IDLE, &view, &dropped))) {
		if (!view.n_samples)
			ag->empty++;
		else if (!(err = request(ag, a, &view, now, &it)))
			agent_enqueue(&ag->sh, it);
		rbp_profile_view_free(&view);
	}
	rbp_profile_free(&a->prof);
	a->prof_ok = 0;
	if (err == RBP_ENOMEM)
		return err;
	if (err) {   /* a profile that could not be encoded is dropped, not fatal */
		pthread_mutex_lock(&ag->sh.mu);
		ag->sh.st.profiles_dropped++;
		pthread_mutex_unlock(&ag->sh.mu);
	}
	return last ? RBP_OK : new_interval(a, m, ag->o);
}

/* procset drop hook: the process exited (or is re-attached): send what it has. */
static void on_drop(void *ctx, struct rbp_procset_member *m)
{
	struct agent *ag = ctx;
	struct aproc *a = m->user;
	int err;

	if (!a)
		return;
	if ((err = flush(ag, a, m, 1)) && !ag->err)
		ag->err = err;
	if (ag->sampler->unwatch)
		ag->sampler->unwatch(ag->sampler_state, m);
	free(a);
	m->user = NULL;
}

/* New members get their record and first profile. */
static int adopt(struct agent *ag)
{
	int err;

	for (size_t i = 0; i < rbp_procset_count(ag->procs); i++) {
		struct rbp_procset_member *m = rbp_procset_member(ag->procs, i);
		struct aproc *a;
		if (m->user)
			continue;
		if (!(a = calloc(1, sizeof(*a))))
			return RBP_ENOMEM;
		describe(ag, a, m);
		m->user = a;
		if ((err = new_interval(a, m, ag->o)))
			return err;
		if (ag->sampler->watch && (err = ag->sampler->watch(ag->sampler_state, m)))
			return err;
	}
	return RBP_OK;
}

static struct rbp_profile *sink_profile(void *ctx, struct rbp_procset_member *m, uint64_t *t0)
{
	struct agent *ag = ctx;
	struct aproc *a = m->user;

	if (!a || !a->prof_ok || a->prof.n_samples >= ag->o->max_samples ||
	    a->prof.n_nodes >= ag->o->max_nodes || a->prof.n_frames >= ag->o->max_nodes)
		return NULL;
	*t0 = a->t0_ns;
	return &a->prof;
}

static int flush_all(struct agent *ag, int last)
{
	int err;

	for (size_t i = 0; i < rbp_procset_count(ag->procs); i++) {
		struct rbp_procset_member *m = rbp_procset_member(ag->procs, i);
		if (m->user && (err = flush(ag, m->user, m, last)))
			return err;
	}
	return RBP_OK;
}

/* Counters for the metrics, and the log lines the sender left. */
static void publish(struct agent *ag, const struct rbp_agent_sampler_stats *ss)
{
	char lines[AGENT_LOG_LINES][256];
	size_t n;

	pthread_mutex_lock(&ag->sh.mu);
	ag->sh.st.processes_watched = rbp_procset_count(ag->procs);
	ag->sh.st.processes_attached = rbp_procset_attached(ag->procs);
	ag->sh.st.processes_capped = rbp_procset_capped(ag->procs);
	ag->sh.st.samples = ss->samples;
	ag->sh.st.samples_lost = ss->lost;
	ag->sh.st.ticks = ss->ticks;
	ag->sh.st.ticks_late = ss->late;
	ag->sh.st.profiles_empty = ag->empty;
	n = ag->sh.n_log;
	memcpy(lines, ag->sh.log, sizeof(lines[0]) * n);
	ag->sh.n_log = 0;
	pthread_mutex_unlock(&ag->sh.mu);
	for (size_t i = 0; i < n && ag->o->log; i++)
		ag->o->log(ag->o->ctx, lines[i]);
}

static int loop(struct agent *ag, struct rbp_agent_sampler_stats *ss)
{
	const struct rbp_agent_opts *o = ag->o;
	const struct rbp_agent_sink sink = { .profile = sink_profile, .ctx = ag };
	uint64_t interval = (uint64_t)o->interval_s * 1000000000ull;
	uint64_t slice = (uint64_t)o->scan_ms * 1000000ull;
	uint64_t next_flush = agent_mono_ns() + interval;
	int err;

	while (!(o->should_stop && o->should_stop(o->ctx))) {
		uint64_t now = agent_mono_ns();
		if ((err = rbp_procset_refresh(ag->procs, now)) || (err = adopt(ag)))
			return err;
		uint64_t until = now + slice < next_flush ? now + slice : next_flush;
		if ((err = ag->sampler->run(ag->sampler_state, ag->procs, until, &sink,
					    o->should_stop, o->ctx, ss)))
			return err;
		if (ag->err)
			return ag->err;
		if (agent_mono_ns() >= next_flush) {
			if ((err = flush_all(ag, 0)))
				return err;
			next_flush += interval;
			if (next_flush < agent_mono_ns())
				next_flush = agent_mono_ns() + interval;
		}
		publish(ag, ss);
	}
	return flush_all(ag, 1);
}

/* Base64 (RFC 4648) of s[0..n) into out (cap >= 4 * (n + 2) / 3 + 1). */
static void base64(const unsigned char *s, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t k = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		out[k++] = t[v >> 18 & 63];
		out[k++] = t[v >> 12 & 63];
		out[k++] = i + 1 < n ? t[v >> 6 & 63] : '=';
		out[k++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[k] = 0;
}

/*
 * The server's client: its URL, the CA file, and the headers every request
 * carries (credentials, tenant, the user's), wiped here once copied.
 */
static int client(const struct rbp_agent_opts *o, struct rbp_http_client **out)
{
	size_t cap = 8192 + RBP_AGENT_MAX_HEADERS * 520, n = 0;
	char *h = malloc(cap), cred[512], b64[700];
	struct rbp_url u;
	int err;

	if (!h)
		return RBP_ENOMEM;
	h[0] = 0;
	if ((err = rbp_url_parse(o->server, &u))) {
		free(h);
		return err;
	}
	const char *user = o->basic_user[0] ? o->basic_user : u.user;
	const char *pass = o->password[0] ? o->password : u.password;
	if (o->bearer[0]) {
		n += (size_t)snprintf(h + n, cap - n, "Authorization: Bearer %s\r\n", o->bearer);
	} else if (user[0]) {
		int l = snprintf(cred, sizeof(cred), "%s:%s", user, pass);
		base64((const unsigned char *)cred, l > 0 && (size_t)l < sizeof(cred) ? (size_t)l : 0, b64);
		n += (size_t)snprintf(h + n, cap - n, "Authorization: Basic %s\r\n", b64);
		explicit_bzero(cred, sizeof(cred));
		explicit_bzero(b64, sizeof(b64));
	}
	if (o->tenant_id[0])
		n += (size_t)snprintf(h + n, cap - n, "X-Scope-OrgID: %s\r\n", o->tenant_id);
	for (size_t i = 0; i < o->n_headers && n < cap; i++)
		n += (size_t)snprintf(h + n, cap - n, "%s\r\n", o->headers[i]);
	err = n >= cap ? RBP_EINVAL : rbp_http_client_new(&u, o->ca_file, h, out, NULL, 0);
	explicit_bzero(h, cap);
	explicit_bzero(u.password, sizeof(u.password));
	free(h);
	return err;
}

int rbp_agent_run(const struct rbp_agent_opts *o, struct rbp_agent_stats *st)
{
	struct agent ag = { .o = o, .sampler = o->sampler ? o->sampler : &rbp_agent_ptrace_sampler };
	struct rbp_agent_sampler_stats ss = { 0 };
	pthread_t sender, metrics;
	sigset_t all, old;
	int err, have_sender = 0, have_metrics = 0;

	if (st)
		memset(st, 0, sizeof(*st));
	ag.sh.metrics_fd = -1;
	if (!o->exporter)
		return RBP_EINVAL;
	if ((err = client(o, &ag.sh.client)))
		return err;
	rbp_url_redact(o->server, ag.server_shown, sizeof(ag.server_shown));
	if (gethostname(ag.hostname, sizeof(ag.hostname) - 1))
		strcpy(ag.hostname, "unknown");
	ag.sh.server = ag.server_shown;
	ag.sh.ctype = o->exporter->content_type;
	ag.sh.timeout_ms = o->timeout_ms;
	ag.sh.backoff_max_s = o->backoff_max_s;
	ag.sh.max_pending = o->max_pending;
	ag.sh.max_pending_bytes = o->max_pending_bytes;
	if (!(ag.env = malloc(ENV_MAX))) {
		rbp_http_client_free(ag.sh.client);
		return RBP_ENOMEM;
	}
	if ((err = agent_shared_init(&ag.sh))) {
		rbp_http_client_free(ag.sh.client);
		free(ag.env);
		return err;
	}
	if (o->metrics[0] && (err = rbp_http_listen(o->metrics, &ag.sh.metrics_fd)))
		goto done;
	if ((err = rbp_procset_new_all(&o->vo, o->max_processes, &ag.procs)))
		goto done;
	rbp_procset_on_drop(ag.procs, on_drop, &ag);
	if (o->require_env[0])
		rbp_procset_filter(ag.procs, has_env, &ag);
	if ((err = ag.sampler->open(o, &ag.sampler_state)))
		goto done;
	/* the helper threads take no signals: a stop signal wakes the sampling thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = RBP_ENOMEM;
	have_sender = !pthread_create(&sender, NULL, agent_sender, &ag.sh);
	have_metrics = have_sender && ag.sh.metrics_fd >= 0 &&
		       !pthread_create(&metrics, NULL, agent_metrics, &ag.sh);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!have_sender || (ag.sh.metrics_fd >= 0 && !have_metrics))
		goto done;
	if (have_metrics && o->listening)
		o->listening(o->ctx, rbp_http_port(ag.sh.metrics_fd));
	err = loop(&ag, &ss);
done:
	if (ag.procs) {
		/* the members' last profiles are queued by flush_all; records freed here */
		rbp_procset_free(ag.procs);
		ag.procs = NULL;
	}
	pthread_mutex_lock(&ag.sh.mu);
	ag.sh.stop = 1;
	ag.sh.drain_until_ms = agent_mono_ms() + o->timeout_ms;
	pthread_cond_broadcast(&ag.sh.cv);
	pthread_mutex_unlock(&ag.sh.mu);
	if (have_sender)
		pthread_join(sender, NULL);
	if (have_metrics)
		pthread_join(metrics, NULL);
	if (ag.sampler_state)
		ag.sampler->close(ag.sampler_state);
	if (ag.sh.metrics_fd >= 0)
		close(ag.sh.metrics_fd);
	if (st) {
		*st = ag.sh.st;
		st->samples = ss.samples;
		st->samples_lost = ss.lost;
		st->ticks = ss.ticks;
		st->ticks_late = ss.late;
		st->profiles_empty = ag.empty;
		st->server_up = ag.sh.state != SERVER_DOWN;
	}
	for (size_t i = 0; i < ag.sh.n_log && o->log; i++)
		o->log(o->ctx, ag.sh.log[i]);
	agent_shared_destroy(&ag.sh);
	rbp_http_client_free(ag.sh.client);
	free(ag.env);
	return err;
}
