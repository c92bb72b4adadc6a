/*
 * errors.c - core error codes turned into words, advice and exit codes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "cli/cli.h"
#include "profile/subject.h"
#include "ruby/layout.h"
#include "ruby/vm.h"
#include "util/err.h"

static void subject(char *buf, size_t n, const struct cli_subject *s)
{
	if (s->core)
		snprintf(buf, n, "core file '%s'", s->core);
	else
		snprintf(buf, n, "process %d", s->pid);
}

int cli_fail(int err, const struct cli_subject *s)
{
	char who[4200];

	subject(who, sizeof(who), s);
	switch (err) {
	case RBP_ENOPROC:
		fprintf(stderr, "rbpeek: error: %s: no such process (or it exited)\n", who);
		return EXIT_NOPROC;
	case RBP_EPERM:
		fprintf(stderr, "rbpeek: error: %s: permission denied\n"
			"hint: run rbpeek as root (sudo) or as the process's owner; in a container "
			"add --cap-add SYS_PTRACE; check kernel.yama.ptrace_scope "
			"(sysctl kernel.yama.ptrace_scope=0 allows tracing your own processes)\n", who);
		return EXIT_PERM;
	case RBP_EPTRACE:
		fprintf(stderr, "rbpeek: error: %s: cannot pause it: it is already being traced "
			"(a debugger?)\nhint: detach the debugger, or use --nonblocking\n", who);
		return EXIT_PERM;
	case RBP_ENOTRUBY:
		if (s->core) {
			fprintf(stderr, "rbpeek: error: %s: not the core of a Ruby process "
				"(no Ruby interpreter among its mapped files)\n", who);
			return EXIT_CORE;
		}
		fprintf(stderr, "rbpeek: error: %s is not a Ruby process "
			"(no libruby or ruby binary with a ruby_version symbol is mapped)\n"
			"hint: a shell script or process manager may run Ruby as its child: find it "
			"with 'pgrep -a ruby', or follow its children with --subprocesses "
			"(record, top, snapshot)\n", who);
		return EXIT_NOTRUBY;
	case RBP_EVERSION: {
		const char *v = s->forced ? s->forced : s->version && *s->version ? s->version : "?";
		const char *near = rbp_layout_closest(v);
		if (s->forced)
			fprintf(stderr, "rbpeek: error: --force-version %s: rbpeek has no layout for "
				"that version\n", v);
		else
			fprintf(stderr, "rbpeek: error: %s: Ruby %s is not supported\n", who, v);
		fprintf(stderr, "hint: supported versions: %s", rbp_layout_supported());
		if (near)
			fprintf(stderr, "; the closest is %s: try --force-version %s", near, near);
		fputc('\n', stderr);
		return EXIT_VERSION;
	}
	case RBP_ENODWARF:
		fprintf(stderr, "rbpeek: error: %s: --layout dwarf: %s\n"
			"hint: use a Ruby built with debug information (-g, the default of "
			"ruby-build, asdf and the official images) or install its debug symbols; "
			"'rbpeek inspect' says what was looked for; --layout auto falls back to "
			"the compiled table\n", who, rbp_strerror(err));
		return EXIT_VERSION;
	case RBP_ELAYOUT: {
		const struct rbp_vm_opts *vo = s->vo;
		const char *v = s->version && *s->version ? s->version : "?";
		const char *used = vo && vo->layout_used ? vo->layout_used : "?";
		const char *why = vo && vo->layout_problem && *vo->layout_problem ?
				  vo->layout_problem : "the VM's structures do not validate";
		if (s->forced)
			fprintf(stderr, "rbpeek: error: --force-version %s: Ruby %s's memory layout "
				"does not fit %s (%s)\n", s->forced, used, who, why);
		else if (vo && vo->layout_assumed)
			fprintf(stderr, "rbpeek: error: %s: rbpeek has no layout for Ruby %s, and the "
				"nearest older one (Ruby %s) does not fit it (%s)\n", who, v, used, why);
		else
			fprintf(stderr, "rbpeek: error: %s: the memory layout of Ruby %s does not fit "
				"it (%s); this Ruby's structures differ from its release's (a "
				"development tree, a vendor patch, or build options such as "
				"-DVM_DEBUG_BP_CHECK=1)\n", who, used, why);
		fprintf(stderr, "hint: rbpeek refuses rather than show wrong names and lines; "
			"a Ruby built with debug info (DWARF, Ruby's default -ggdb3) gives its "
			"own layout; 'rbpeek inspect' lists the layouts tried");
		if (vo && vo->layout_assumed && !s->forced)
			fprintf(stderr, "; or use an rbpeek that knows Ruby %s (this one knows %s; "
				"--force-version X.Y.Z tries one of them)", v, rbp_layout_supported());
		fputc('\n', stderr);
		return EXIT_VERSION;
	}
	case RBP_ENOFILE:
	case RBP_EIO:
		if (s->core) {
			/* the reason (permission: under sudo a core is read as the user) */
			int unreadable = access(s->core, R_OK) != 0;

			fprintf(stderr, "rbpeek: error: %s: cannot open it%s%s\n", who,
				unreadable ? ": " : "", unreadable ? strerror(errno) : "");
			return EXIT_CORE;
		}
		break;
	case RBP_EBADCORE:
	case RBP_EBADELF:
		if (s->core) {
			fprintf(stderr, "rbpeek: error: %s: not a valid ELF core file "
				"(truncated or not a core)\n", who);
			return EXIT_CORE;
		}
		break;
	case RBP_ENONATIVE:
		return cli_no_native();
	case RBP_ENOTREADY:
		/* decided from what was read (a null VM pointer, no main thread
		 * yet); a live process was waited for first (cli_attach_pid) */
		if (s->core) {
			fprintf(stderr, "rbpeek: error: %s: %s\nhint: the process was starting up or "
				"shutting down when the core was made\n", who, rbp_strerror(err));
			return EXIT_CORE;
		}
		fprintf(stderr, "rbpeek: error: %s: %s after %.0f s of waiting\n"
			"hint: a Ruby process sets its VM up within milliseconds of its start; one "
			"that takes longer may be stopped (kill -CONT) or about to exit; try again "
			"once it runs\n", who, rbp_strerror(err), (double)RBP_SUBJECT_READY_NS / 1e9);
		return EXIT_VM;
	case RBP_ENOVM:
	case RBP_ECORRUPT:
	case RBP_EFAULT:
	case RBP_ETOODEEP:
		fprintf(stderr, "rbpeek: error: %s: %s\n", who, rbp_strerror(err));
		if (s->core)
			fprintf(stderr, "hint: the core file may be truncated, or its mapped "
				"files differ from the ones the process used\n");
		else
			fprintf(stderr, "hint: 'rbpeek inspect --pid %d' says which layouts were "
				"tried and what did not fit\n", s->pid);
		return s->core ? EXIT_CORE : EXIT_VM;
	default:
		break;
	}
	fprintf(stderr, "rbpeek: error: %s: %s\n", who, rbp_strerror(err));
	return EXIT_INTERNAL;
}

int cli_no_native(void)
{
	fprintf(stderr, "rbpeek: error: --native is not available: this rbpeek was built "
		"without libdw (elfutils)\n"
		"hint: install libdw-dev (Debian, Ubuntu) or elfutils-devel, then rebuild rbpeek "
		"(make, or gem install rbpeek again)\n");
	return EXIT_USAGE;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("rbpeek: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'rbpeek %s%s--help'\n", cmd ? cmd : "", cmd ? " " : "");
	return EXIT_USAGE;
}
