/*
 * stacks.h - what a stack read hands out: every thread of a Ruby process
 * with its frames (struct rbp_stacks), and frames copied elsewhere at one
 * moment to be decoded like a read (struct rbp_frame_copy).  The types are
 * the walker's output and the sampler's input; the reads that fill them are
 * vm.h's.
 */
#ifndef RBP_RUBY_STACKS_H
#define RBP_RUBY_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum rbp_frame_kind {
	RBP_FRAME_RUBY = 0,   /* a Ruby method, block, class body, top level */
	RBP_FRAME_CFUNC = 1,  /* a method implemented in C */
	RBP_FRAME_NATIVE = 2, /* a machine-code function (--native): a C function
			       * a C method calls, merged above that method */
};

struct rbp_frame {
	const char *label;    /* "Foo::Bar#baz", "block in Foo#x", "Integer#times" */
	const char *path;     /* absolute path; for C frames the calling Ruby frame's; "" unknown */
	int32_t line;         /* line executing now; 0 unknown */
	int32_t first_line;   /* first line of the method/block; 0 for C frames */
	uint8_t kind;         /* enum rbp_frame_kind */
	uint64_t cfunc;       /* C frames: the C function implementing the method
			       * (rb_method_definition_t body.cfunc.func), 0 unknown */
};

struct rbp_thread {
	uint64_t addr;        /* rb_thread_t in the target */
	pid_t tid;            /* OS thread id, 0 when the Ruby thread has none (yet) */
	const char *name;     /* Thread#name, NULL when unset */
	uint8_t is_main;      /* the VM's main thread */
	uint8_t has_gvl;      /* holds the global VM lock right now */
	int8_t running;       /* 1 running, 0 blocked in a system call, -1 unknown
				 * (known only when read paused) */
	uint8_t gc;           /* enum rbp_gc_phase (ruby/gc.h): this thread is running
				 * the garbage collector; 0 (RBP_GC_NONE) otherwise */
	int err;              /* RBP_OK, or why this thread's stack could not be read */
	size_t first_frame;   /* index of the innermost frame in rbp_stacks.frames */
	size_t n_frames;
};

/*
 * The name rbpeek shows for a thread, as far as Ruby knows it: Thread#name,
 * else "main" for the main thread; NULL when Ruby has none (then callers
 * show the OS thread name, /proc/PID/task/TID/comm).
 */
static inline const char *rbp_thread_ruby_name(const struct rbp_thread *t)
{
	return t->name ? t->name : t->is_main ? "main" : NULL;
}

/*
 * The stacks of all threads.  Zero-initialise it, pass it to
 * rbp_vm_read_stacks() as often as wanted (buffers are reused), then
 * rbp_stacks_free() it.
 */
struct rbp_stacks {
	struct rbp_thread *threads;   /* main thread first, then creation order */
	size_t n_threads, cap_threads;
	struct rbp_frame *frames;     /* per thread, innermost first */
	size_t n_frames, cap_frames;
	/* scratch for rbp_vm_read_stacks_native() */
	uint64_t *pcs;                /* native stacks, RBP_NATIVE_MAX_FRAMES per thread */
	size_t *n_pcs;                /* per thread: addresses in pcs */
	size_t cap_pcs, cap_n_pcs;
	struct rbp_frame *merged;     /* the merged frames being built */
	size_t cap_merged;
	/* paused reads: the longest a thread was held stopped (first stop to
	 * release), nanoseconds; 0 when read without pausing */
	uint64_t held_ns;
	/* paused reads: the hold reached the bound (rbp_vm_set_hold_budget)
	 * before the read was done, so the threads were let go and the read
	 * finished (or was made) without them stopped, as --nonblocking does */
	uint8_t over_budget;
	/* reads of this call (RBP_PAUSE_NONE, RBP_PAUSE_VERIFY) that found a
	 * thread torn: 0, 1 or 2 */
	uint8_t torn_reads;
	/* RBP_PAUSE_VERIFY: both verified reads tore, so a thread was stopped */
	uint8_t stopped;
};

/* Free what rbp_vm_read_stacks() and its kin grew; s is zeroed, ready for reuse. */
void rbp_stacks_free(struct rbp_stacks *s);

/* Frames copied at one moment (rbp_vm_decode_frames() in vm.h decodes them). */
struct rbp_frame_copy {
	pid_t tid;
	const uint8_t *frames;   /* n rb_control_frame_t's as copied, innermost first */
	const uint64_t *env;     /* per frame ep[-2], ep[-1], ep[0]; all 0 (or env NULL):
				  * not copied, read live */
	size_t n;
};

#endif
