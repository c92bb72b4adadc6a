/*
 * openvm.c - opening what a one-shot command reads and attaching to its
 * Ruby VM: the options and environment that shape the attach (--layout,
 * $RBPEEK_DISCOVERY, $RBPEEK_LAYOUT), waiting for a process that is still
 * starting (one line on stderr), and the warnings an attach may leave
 * (an assumed layout, features the layout cannot read).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/invoker.h"
#include "cli/signals.h"
#include "profile/subject.h"
#include "ruby/layout.h"
#include "ruby/vm.h"
#include "util/err.h"

unsigned cli_discovery_env(void)
{
	const char *e = getenv("RBPEEK_DISCOVERY");
	unsigned m = 0;

	if (!e)
		return 0;
	if (strstr(e, "symbol"))
		m |= RBP_DISCOVER_SYMBOL;
	if (strstr(e, "code"))
		m |= RBP_DISCOVER_CODE;
	if (strstr(e, "scan"))
		m |= RBP_DISCOVER_SCAN;
	return m;
}

int cli_parse_layout(const char *s)
{
	return !strcmp(s, "auto") ? RBP_LAYOUT_AUTO : !strcmp(s, "table") ? RBP_LAYOUT_TABLE :
	       !strcmp(s, "dwarf") ? RBP_LAYOUT_DWARF : -1;
}

int cli_layout_opt(const char *cmd, const char *arg, const char **layout)
{
	if (cli_parse_layout(arg) < 0)
		return cli_usage_error(cmd, "--layout '%s': give auto, table or dwarf", arg);
	*layout = arg;
	return 0;
}

void cli_vm_env(struct rbp_vm_opts *vo, const char *layout)
{
	const char *e = layout ? layout : getenv("RBPEEK_LAYOUT");
	int mode = e ? cli_parse_layout(e) : RBP_LAYOUT_AUTO;

	vo->discovery = cli_discovery_env();
	vo->layout = mode < 0 ? RBP_LAYOUT_AUTO : (enum rbp_layout_mode)mode;
	vo->test_no_table = (e = getenv("RBPEEK_TEST_NO_TABLE")) && !strcmp(e, "1");
}

static void say_waiting(void *ctx)
{
	fprintf(stderr, "rbpeek: process %d is starting (its Ruby VM is not set up yet): waiting "
		"up to %.0f s\n", *(const int *)ctx, (double)RBP_SUBJECT_READY_NS / 1e9);
}

int cli_attach_pid(int pid, struct rbp_vm_opts *vo, struct rbp_subject *s)
{
	return rbp_subject_wait_ready(s, pid, vo, RBP_SUBJECT_READY_NS, say_waiting,
				      cli_should_stop, &pid);
}

int cli_open_vm(const struct cli_target_opts *o, struct rbp_vm_opts *vo, struct cli_subject *subj,
		struct rbp_subject *s)
{
	int err;

	subj->pid = o->pid;
	subj->core = o->core;
	subj->forced = vo->force_version = o->force_version;
	cli_vm_env(vo, o->layout);
	/* a core file needs no privilege: under sudo it is read as the user */
	if (o->core && (err = cli_drop_to_invoker("core file")))
		return RBP_EPERM;
	err = o->core ? rbp_subject_open(s, o->pid, o->core, o->sysroot, vo) :
	      cli_attach_pid(o->pid, vo, s);
	if (!rbp_subject_opened(s))
		return err;
	subj->version = vo->found_version;
	subj->vo = vo;
	if (!err) {
		cli_layout_warning(s->vm);
		if (!subj->own_features)
			cli_feature_warning(s->vm);
	}
	return err;
}

void cli_layout_warning(const struct rbp_vm *vm)
{
	const struct rbp_vm_info *in = rbp_vm_info(vm);

	if (in->layout_assumed)
		fprintf(stderr, "rbpeek: warning: no layout for Ruby %s; using Ruby %s's, the "
			"nearest older one, which fits this process (its main thread's frames "
			"and labels check out); if a structure changed, names or lines may be "
			"wrong: an rbpeek that knows Ruby %s, or a Ruby with debug info, removes "
			"the guess\n", in->version, in->layout_version, in->version);
}

void cli_feature_warning(const struct rbp_vm *vm)
{
	const struct rbp_vm_info *in = rbp_vm_info(vm);

	/* a DWARF layout lacking what the collector's phase needs: stacks still work */
	if (in->unavailable & (1u << RBP_FEAT_GC))
		fprintf(stderr, "rbpeek: warning: Ruby %s's layout lacks %s: the collector's "
			"phase is not readable, so no GC frames are shown (stacks are exact)\n",
			in->version, in->missing[RBP_FEAT_GC]);
	if (in->unavailable & (1u << RBP_FEAT_THREAD_STATE))
		fprintf(stderr, "rbpeek: warning: Ruby %s's layout lacks %s: which thread holds "
			"the GVL is not known (--gvl shows none; stacks are exact)\n",
			in->version, in->missing[RBP_FEAT_THREAD_STATE]);
}
