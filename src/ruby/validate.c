/*
 * validate.c - check that the layout in use fits the process, before any
 * label is trusted.
 *
 * A layout table is right for a Ruby built the usual way from that
 * version's source.  It is wrong for a Ruby newer than every table (when
 * rbpeek falls back to the nearest older one), and for a Ruby built with
 * options that change a structure (-DVM_DEBUG_BP_CHECK=1 adds a field to
 * every control frame, so every frame after the first is read at the wrong
 * place).  A wrong layout must be refused, never turned into a profile of
 * plausible wrong names and lines.  Discovery already checked the VM
 * (vm -> main thread -> vm, a sane thread count); this adds, on the main
 * thread:
 *
 *   structure  its control frames tile the VM stack's frame area with the
 *              layout's frame size; each frame's environment flags carry
 *              one of the VM's frame magics; a Ruby frame's iseq decodes
 *              and its pc lies inside that iseq's bytecode;
 *   meaning    the walker's Ruby frames have string labels and paths;
 *              an absolute path is a regular file of the target (live
 *              processes) and the frame's line is within that file.  A
 *              file replaced since it was loaded (a deploy) can fail that
 *              for a right layout, so it refuses only when no frame's file
 *              checks out; a wrong layout gives no file at all.
 *
 * A live process runs while it is read, so a check that fails is retried
 * (a torn read does not repeat; a wrong layout fails every time).  A main
 * thread that pushes and pops frames without pause (an allocation loop of
 * C calls) can tear every read on a loaded machine: the last try reads
 * with the process held, once, for about as long as one sample's read
 * (a wrong layout fails held too; nothing else at attach stops it).
 */
#include "ruby/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALIDATE_TRIES 4
#define VALIDATE_FRAMES 512          /* innermost control frames checked */
#define VALIDATE_FILE_MAX (64u << 20) /* longest source file whose lines we count */

/* 1 when m is one of the VM's frame magics. */
static int known_magic(const struct rbp_layout *L, uint64_t m)
{
	const uint32_t magics[] = {
		L->frame_magic.cfunc, L->frame_magic.method, L->frame_magic.block,
		L->frame_magic.class, L->frame_magic.top, L->frame_magic.eval,
		L->frame_magic.rescue, L->frame_magic.dummy, L->frame_magic.ifunc,
	};
	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if (m == magics[i])
			return 1;
	return 0;
}

/* The main thread's execution context. */
static int main_ec(struct rbp_vm *vm, uint64_t *ec)
{
	const struct rbp_layout *L = vm->L;
	uint64_t th;
	int err;

	if ((err = rv_word(vm, vm->vm_addr + L->vm.main_thread, &th)))
		return err;
	if (L->shape.thread_ec == RBP_THREAD_EC_EMBEDDED) {
		*ec = th + L->thread.ec;
		return RBP_OK;
	}
	return rv_word(vm, th + L->thread.ec, ec);
}

/*
 * Structure of the main thread's control frames.  *n_ruby gets the number
 * of Ruby frames whose iseq was checked.  RBP_ECORRUPT when a frame does
 * not fit the layout.
 */
static int check_frames(struct rbp_vm *vm, size_t *n_ruby, const char **why)
{
	const struct rbp_layout *L = vm->L;
	uint64_t ec, stack, size, cfp, flags;
	uint8_t *buf;
	int err;

	*n_ruby = 0;
	*why = "the main thread's execution context does not read "
	       "(rb_thread_t.ec, rb_execution_context_t)";
	if ((err = main_ec(vm, &ec)) || (err = rv_word(vm, ec + L->ec.vm_stack, &stack)) ||
	    (err = rv_word(vm, ec + L->ec.vm_stack_size, &size)) ||
	    (err = rv_word(vm, ec + L->ec.cfp, &cfp)))
		return err;
	if (!stack && !cfp)
		return RBP_OK;   /* not running Ruby yet, or done */
	/* a VM stack without a frame pointer (or one without a stack) is not a
	 * state Ruby leaves an execution context in: ec.cfp or ec.vm_stack is
	 * not where the layout says (a field inserted before it) */
	*why = !cfp ? "the main thread's execution context has a VM stack but no frame pointer "
		      "(rb_execution_context_t.cfp)" :
		      "the main thread's execution context has a frame pointer but no VM stack "
		      "(rb_execution_context_t.vm_stack)";
	if (!stack || !cfp)
		return RBP_ECORRUPT;
	*why = "the main thread's control frames do not tile its VM stack "
	       "(rb_execution_context_t.vm_stack_size, cfp; sizeof(rb_control_frame_t))";
	if (size > (1ull << 32) || L->cfp.size == 0)
		return RBP_ECORRUPT;
	uint64_t end = stack + size * 8;
	if (cfp < stack || cfp > end || (end - cfp) % L->cfp.size)
		return RBP_ECORRUPT;
	size_t n = (size_t)((end - cfp) / L->cfp.size);
	if (n > VALIDATE_FRAMES)
		n = VALIDATE_FRAMES;
	if (!n)
		return RBP_OK;
	if (!(buf = malloc(n * L->cfp.size)))
		return RBP_ENOMEM;
	if ((err = rv_read(vm, cfp, buf, n * L->cfp.size)))
		goto out;
	for (size_t i = 0; i < n && !err; i++) {
		const uint8_t *f = buf + i * L->cfp.size;
		uint64_t ep = rv_u64(f, L->cfp.ep), iseq = rv_u64(f, L->cfp.iseq);
		uint64_t pc = rv_u64(f, L->cfp.pc), magic;
		const struct rv_iseq *info;
		*why = "a control frame's environment carries no frame magic "
		       "(rb_control_frame_t.ep, sizeof(rb_control_frame_t))";
		if (!ep || (ep & 7) || rv_word(vm, ep + 8 * (int64_t)L->env.flags, &flags)) {
			err = RBP_ECORRUPT;
			break;
		}
		magic = flags & L->frame_magic.mask;
		if (!known_magic(L, magic)) {
			err = RBP_ECORRUPT;
			break;
		}
		*why = "a Ruby frame's pc is not in its iseq's bytecode (rb_control_frame_t.iseq, "
		       "pc; rb_iseq_constant_body.iseq_encoded, iseq_size)";
		if (magic == L->frame_magic.cfunc || magic == L->frame_magic.ifunc ||
		    magic == L->frame_magic.dummy || !iseq || !pc)
			continue;
		if (rv_iseq(vm, iseq, &info) || pc < info->iseq_encoded ||
		    pc > info->iseq_encoded + 8ull * info->iseq_size) {
			err = RBP_ECORRUPT;
			break;
		}
		(*n_ruby)++;
	}
out:
	free(buf);
	return err;
}

/* Lines of a file of the target (live processes); -1 when it cannot be read. */
static long file_lines(struct rbp_vm *vm, const char *path)
{
	char real[4200], buf[65536];
	struct stat st;
	long lines = 0;
	ssize_t n;
	size_t total = 0;
	int fd;

	if (rbp_target_path(vm->t, path, real, sizeof(real)))
		return -1;
	/* never block on a FIFO or device the target names */
	if ((fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > VALIDATE_FILE_MAX) {
		close(fd);
		return -1;
	}
	char last = '\n';
	while ((n = read(fd, buf, sizeof(buf))) > 0 && total < VALIDATE_FILE_MAX) {
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		last = buf[n - 1];
		total += (size_t)n;
	}
	close(fd);
	return lines + (last != '\n');
}

/*
 * Meaning of the main thread's Ruby frames, as the walker labels them.
 * *n_checked gets the number of Ruby frames with a label and a path.
 */
static int check_labels(struct rbp_vm *vm, const struct rbp_stacks *st, size_t *n_checked,
			const char **why)
{
	size_t files_ok = 0, files_bad = 0;
	const char *file_why = NULL;

	*n_checked = 0;
	for (size_t t = 0; t < st->n_threads; t++) {
		const struct rbp_thread *th = &st->threads[t];
		if (!th->is_main)
			continue;
		if (th->err) {
			*why = "the main thread's stack does not read";
			return RBP_ECORRUPT;
		}
		for (size_t i = th->first_frame; i < th->first_frame + th->n_frames; i++) {
			const struct rbp_frame *f = &st->frames[i];
			if (f->kind != RBP_FRAME_RUBY)
				continue;
			if (!f->label || !f->label[0] || !f->path || !f->path[0]) {
				*why = "a Ruby frame of the main thread has no label or path";
				return RBP_ECORRUPT;
			}
			if (f->line < 0) {
				*why = "a Ruby frame of the main thread has a negative line";
				return RBP_ECORRUPT;
			}
			(*n_checked)++;
			if (vm->t->is_core || f->path[0] != '/')
				continue;   /* "-e", "<internal:kernel>", "(eval)": no file */
			long lines = file_lines(vm, f->path);
			if (lines < 0) {
				file_why = "the main thread's Ruby frames name files that do not exist";
				files_bad++;
			} else if (f->line > lines + 1) {
				file_why = "the main thread's Ruby frames have lines past their files' ends";
				files_bad++;
			} else {
				files_ok++;
			}
		}
	}
	if (files_bad && !files_ok) {
		*why = file_why;
		return RBP_ECORRUPT;
	}
	return RBP_OK;
}

/*
 * The structure check and the stacks' read, with the process held when
 * held (and the hold possible: a debugger attached leaves it unheld).
 */
static int read_structure(struct rbp_vm *vm, int held, size_t *n_ruby, struct rbp_stacks *st,
			  const char **why)
{
	struct rbp_pause *pause = NULL;
	sigset_t old;
	int err;

	if (held && rv_pause(vm, NULL, 0, &pause, &old))
		pause = NULL;
	/* check_frames() says why it fails */
	if (!(err = check_frames(vm, n_ruby, why)) && (err = rbp_vm_read_stacks(vm, st)))
		*why = "the threads do not read";
	if (pause)
		rv_resume(vm, pause, &old);
	return err;
}

int rv_validate(struct rbp_vm *vm, int need_evidence)
{
	struct rbp_stacks st = { 0 };
	const char *why = "";
	int err = RBP_OK;

	for (int attempt = 0; attempt < VALIDATE_TRIES; attempt++) {
		size_t n_ruby = 0, n_labels = 0;
		int held = attempt == VALIDATE_TRIES - 1 && !vm->t->is_core;
		why = "";
		if ((err = read_structure(vm, held, &n_ruby, &st, &why))) {
			/* why says which */
		} else if (!(err = check_labels(vm, &st, &n_labels, &why)) && need_evidence &&
			   !(n_ruby && n_labels)) {
			err = RBP_ECORRUPT;
			why = "the main thread has no Ruby frame to check the layout with";
		}
		if (!err || err == RBP_ENOPROC || err == RBP_EPERM || err == RBP_ENOMEM ||
		    vm->t->is_core)
			break;
		usleep(2000u << attempt);
	}
	rbp_stacks_free(&st);
	vm->info.validation = err ? why : "";
	/* what the walk cached with this layout is kept: it passed */
	return err && err != RBP_ENOPROC && err != RBP_EPERM && err != RBP_ENOMEM ?
	       RBP_ELAYOUT : err;
}
