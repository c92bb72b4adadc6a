/*
 * term.h - the terminal for `rbpeek top`: keys without echo, the alternate
 * screen, the window size, and a restore that runs on every way out.
 */
#ifndef RBP_CLI_TERM_H
#define RBP_CLI_TERM_H

/*
 * Take over the terminal on fd 0 (keys) and 1 (screen): no echo, keys as
 * they are typed, reads that never block, the alternate screen, cursor
 * hidden.  ISIG stays on: Ctrl-C still sends SIGINT, for the caller to
 * turn into a quit.  Restored by term_restore(), which also runs at exit,
 * after a fatal signal (which then takes its default action) and around
 * Ctrl-Z.  Returns -1 (errno set) when fd 0 or 1 is not a terminal.
 */
int term_enter(void);
/* Give the terminal back as it was.  Idempotent and async-signal-safe. */
void term_restore(void);
/* Window size; 24x80 when unknown. */
void term_size(int *rows, int *cols);
/* 1 once after the window was resized (or the program was resumed). */
int term_take_resize(void);

/* Keys term_key() returns besides plain bytes. */
enum { TERM_KEY_LEFT = 0x100, TERM_KEY_RIGHT, TERM_KEY_UP, TERM_KEY_DOWN };
/* The next key typed, or -1 when none is waiting. */
int term_key(void);
/*
 * Around a job-control stop (cli_suspend_if_pending): give the terminal
 * back before, take it again after (when it was ours) and ask for a redraw.
 */
void term_before_stop(void);
void term_after_stop(void);

#endif
