/*
 * output.h - one writer per output format behind one small interface.
 *
 * A writer turns a struct rbp_profile into a file.  It writes to a stdio
 * stream it does not own, never prints elsewhere, and returns RBP_OK or an
 * error (RBP_EIO when the stream failed: disk full, closed pipe).  Writers
 * emit everything in a stable order (sorted by name, then by id) so that
 * the same profile always gives the same bytes: golden tests depend on it.
 */
#ifndef RBP_OUTPUT_OUTPUT_H
#define RBP_OUTPUT_OUTPUT_H

#include <stdio.h>

#include "profile/profile.h"

struct rbp_output_opts {
	const char *title;      /* flame graph title, e.g. "rbpeek: ruby app.rb (pid 123), 10 s" */
	/*
	 * The flame graph opens with the samples flagged RBP_SAMPLE_IDLE left
	 * out, and keeps them behind its idle control (the other writers are
	 * given a view without them instead).
	 */
	int hide_idle;
	/*
	 * The title of the other idle view (idle samples shown when hide_idle,
	 * else left out), for the flame graph's idle control to keep its title
	 * true; NULL: the title is the same in both.
	 */
	const char *title_alt;
	/*
	 * p is a diff of two recordings (profile/diff.h): the flame graph,
	 * summary and pprof compare NEW's samples with BASE's
	 * (RBP_SAMPLE_BASE); the other writers refuse it.
	 */
	int diff;
	/*
	 * The call graph's pruning (callgraph.c), as pprof's: functions under
	 * node_fraction of the samples, all but the node_count largest, calls
	 * under edge_fraction.  0: the defaults (0.005, 80, 0.001); a
	 * negative fraction: none (everything kept).
	 */
	double node_fraction, edge_fraction;
	size_t node_count;
};

struct rbp_format {
	const char *name;       /* -f NAME */
	const char *ext;        /* default file extension, without the dot */
	const char *desc;       /* one line for --help */
	int (*write)(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
};

/* All formats, in the order --help lists them, ended by a NULL name. */
extern const struct rbp_format rbp_formats[];
const struct rbp_format *rbp_format_find(const char *name);
/*
 * The formats a file name's ending stands for, space-separated: one name
 * (".svg" is "flamegraph"), several when it is ambiguous (".json" is
 * "speedscope chrome"), or NULL when it says nothing.
 */
const char *rbp_format_by_name(const char *path);
/* "flamegraph, speedscope, ..." for error messages. */
const char *rbp_format_names(void);

/* Writers (each in its own file). */
int rbp_write_collapsed(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_flamegraph(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_speedscope(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_pprof(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_callgrind(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_summary(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_summary_by_line(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_chrome(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_raw(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_callgraph(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
int rbp_write_dot(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out);
/*
 * Whether this build lays call graphs out (Graphviz's library: gvrender.c);
 * without it -f callgraph writes the DOT text.  rbp_callgraph_render: DOT
 * text to an SVG with its script; RBP_EINVAL (not DOT, or no Graphviz),
 * RBP_EIO, RBP_ENOMEM.
 */
int rbp_callgraph_renders(void);
int rbp_callgraph_render(const char *dot, FILE *out);

/*
 * An upper estimate (within a small factor for real profiles) of the bytes
 * format f writes for p, from its interned frames and stacks, without
 * writing anything (estimate.c).  The count stops once it passes limit
 * (then *bytes > limit), so the work is bounded by limit too.  RBP_ENOMEM.
 */
int rbp_output_estimate(const struct rbp_profile *p, const struct rbp_format *f, uint64_t limit,
			uint64_t *bytes);

/*
 * Frames grouped into functions: frames with the same label and path (they
 * differ by line) are one function.  The shared notion of "function" of
 * summary, pprof, callgrind and chrome.
 */
struct rbp_function {
	const char *label, *path;
	int32_t first_line;  /* smallest known first line of the function, 0 unknown */
	int32_t line;        /* first_line, or the line of its first frame when unknown */
	uint32_t rep;        /* its first frame */
};
/*
 * func_of[frame] (caller's array of p->n_frames + 1) gets each frame's
 * function index; *funcs (malloc'd, *n entries, in order of first frame)
 * describes them.  RBP_ENOMEM.
 */
int rbp_functions(const struct rbp_profile *p, uint32_t *func_of, struct rbp_function **funcs,
		  size_t *n);

/*
 * Rows of a "% self  % total" table (summary, top): one per function (as
 * rbp_functions groups frames) or, by_line, one per frame.  % self counts
 * samples whose innermost frame is the row; % total samples with the row
 * anywhere in the stack, once per sample even under recursion.
 */
struct rbp_row {
	const char *label, *path;
	int32_t line;        /* the function's line, or the frame's */
	uint8_t kind;        /* enum rbp_pframe_kind of its (first) frame */
	uint64_t self, total;
	uint32_t stamp;      /* last node counted into total, for recursion */
};
/*
 * row_of[frame] (caller's array of p->n_frames + 1) gets each frame's row;
 * *rows (malloc'd, *n entries, counts zero) describes them.  RBP_ENOMEM.
 */
int rbp_rows_make(const struct rbp_profile *p, int by_line, uint32_t *row_of,
		  struct rbp_row **rows, size_t *n);
/* Add node_count[node] samples of every stack node into the rows' counts. */
void rbp_rows_count(const struct rbp_profile *p, const uint64_t *node_count,
		    const uint32_t *row_of, struct rbp_row *rows, size_t n_rows);

/*
 * Samples grouped by thread, each group in time order (a counting sort):
 * the samples of thread t are by_thread[start[t] .. start[t + 1]).  Both
 * arrays malloc'd (start: n_threads + 1 entries).  RBP_ENOMEM.
 */
int rbp_samples_by_thread(const struct rbp_profile *p, size_t **start, uint32_t **by_thread);

/* A thread in the order every writer lists threads: by pid, then tid. */
struct rbp_thread_ord {
	int32_t pid, tid;
	uint32_t idx;   /* index into p->threads */
};
/* p's threads in that order (malloc'd, n_threads + 1 entries), or NULL (no memory). */
struct rbp_thread_ord *rbp_thread_order(const struct rbp_profile *p);

/*
 * The display name of a frame as flame graphs and folded stacks show it:
 * "label (path:line)" for Ruby and C frames ("label" alone when the path is
 * unknown), the label alone for synthetic thread/process roots.
 */
int rbp_frame_name(const struct rbp_pframe *f, char *buf, size_t cap);

/* The flame graph's callers/callees script (sandwich.c), after its own. */
extern const char rbp_fg_sandwich_script[];

#endif
