/*
 * term.c - the terminal for `rbpeek top` (see term.h).
 *
 * Plain ANSI/VT100 sequences and termios, no curses: the screen is redrawn
 * whole about once a second, so there is nothing for a screen-diffing
 * library to save, and every terminal tmux or a Linux console emulates
 * understands the handful of sequences used (alternate screen 1049, cursor
 * home, erase to end of line/screen, cursor hide/show, reverse video).
 *
 * The terminal must never be left raw.  The saved termios is put back by
 * term_restore(), which only calls tcsetattr() and write() (both
 * async-signal-safe) and is idempotent, from:
 *   - atexit (normal exits and exit() on error paths),
 *   - the caller's quit path (SIGINT/SIGTERM/SIGHUP set a flag there),
 *   - a handler for fatal signals (SEGV, BUS, FPE, ILL, ABRT), installed
 *     with SA_RESETHAND so the signal then takes its default action,
 *   - Ctrl-Z: signals.c notes it and the sampling loop stops rbpeek
 *     between two samples (never while it holds the target paused), with
 *     term_before_stop() and term_after_stop() around the stop: restore,
 *     and once continued take the terminal again and ask for a full
 *     redraw.
 */
#include "cli/term.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define ENTER_SEQ "\033[?1049h\033[?25l\033[H\033[2J"
#define LEAVE_SEQ "\033[0m\033[?25h\033[?1049l"

static struct termios saved;               /* the terminal as we found it */
static volatile sig_atomic_t active;       /* 1 while the terminal is ours */
static volatile sig_atomic_t resized;      /* SIGWINCH or SIGCONT seen */
static int handlers_installed;

static void put(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(1, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Keys as typed, no echo, reads that return at once. */
static int raw_mode(void)
{
	struct termios t = saved;

	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(0, TCSAFLUSH, &t))
		return -1;
	put(ENTER_SEQ);
	active = 1;
	return 0;
}

void term_restore(void)
{
	int e = errno;

	if (active) {
		active = 0;
		tcsetattr(0, TCSAFLUSH, &saved);
		put(LEAVE_SEQ);
	}
	errno = e;
}

static void on_fatal(int sig)
{
	term_restore();   /* SA_RESETHAND: returning re-raises with the default action */
	if (sig == SIGABRT)
		raise(sig);
}

static void on_winch(int sig)
{
	resized = 1;
}

static int was_active;   /* the terminal was ours when the stop came */

void term_before_stop(void)
{
	was_active = active;
	term_restore();
}

void term_after_stop(void)
{
	if (was_active)
		raw_mode();
	resized = 1;
}

static void install_handlers(void)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
	struct sigaction sa = { 0 };

	if (handlers_installed)
		return;
	handlers_installed = 1;
	atexit(term_restore);
	sa.sa_handler = on_fatal;
	sa.sa_flags = (int)SA_RESETHAND;
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
}

int term_enter(void)
{
	if (!isatty(0) || !isatty(1)) {
		errno = ENOTTY;
		return -1;
	}
	if (tcgetattr(0, &saved))
		return -1;
	install_handlers();
	return raw_mode();
}

void term_size(int *rows, int *cols)
{
	struct winsize ws;

	if (!ioctl(1, TIOCGWINSZ, &ws) && ws.ws_row && ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	} else {
		*rows = 24;
		*cols = 80;
	}
}

int term_take_resize(void)
{
	int r = resized;
	resized = 0;
	return r;
}

static int read_byte(void)
{
	unsigned char c;
	return read(0, &c, 1) == 1 ? c : -1;
}

int term_key(void)
{
	int c = read_byte();

	if (c != 033)
		return c;
	/* an arrow key arrives as ESC [ A..D (or ESC O A..D) in one write */
	int b = read_byte();
	if (b != '[' && b != 'O')
		return b < 0 ? 033 : b;
	switch (read_byte()) {
	case 'A': return TERM_KEY_UP;
	case 'B': return TERM_KEY_DOWN;
	case 'C': return TERM_KEY_RIGHT;
	case 'D': return TERM_KEY_LEFT;
	default: return -1;
	}
}
