// SPDX-License-Identifier: MIT
/*
 * cmd_top.c - `memtrack top [--interval SECONDS] FILE`: follows an artifact
 * while `track` writes it (mt_reader__follow), folds each new record into
 * the same analysis report uses, and every interval redraws a view of the
 * run: elapsed time, events/s, the tree's heap and RSS, the busiest
 * processes and, with --stacks, the call sites holding the most heap.  It
 * ends when the trailer arrives (the view then shows the final numbers,
 * those of `report`), when its writer is gone without finishing it (the
 * writer's flock released: killed, or a copied or cut file), or on q,
 * Ctrl-C, SIGTERM or SIGHUP.  When stdout is
 * not a terminal it prints one logfmt line (key=value, exact byte counts)
 * per interval instead.
 *
 * The file shows what track has flushed: at most track's --flush-ms (500 ms
 * by default) behind.  Drops are counted by the kernel and written in the
 * trailer only, so they are known at the end.
 *
 * `top [-o FILE] -- CMD` runs track on CMD itself and follows its artifact
 * (top_cmd.c).  A file that does not exist is waited for: on a terminal
 * until q, otherwise TOP_WAIT_S seconds, then top says so and exits 1.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "analyze/analysis.h"
#include "format/artifact.h"
#include "analyze/callsites.h"
#include "analyze/filter.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"
#include "cli/top_cmd.h"
#include "cli/track_output.h"

#define TOP_USAGE                                                                               \
	"usage: memtrack top [--interval SECONDS] [--pid PID] [--comm NAME] FILE, or memtrack " \
	"top [--interval SECONDS] [--pid PID] [--comm NAME] [-o FILE] -- CMD [ARGS...]; see "   \
	"memtrack help top"
#define TOP_WAIT_S 10	  /* stdout not a terminal: how long a missing file is waited for */
#define TOP_SITES 5	  /* call sites shown */
#define TOP_SITE_FRAMES 3 /* frames of each, innermost first */

struct top {
	const char *path;
	char **cmd;		   /* top -- CMD: the command track runs (in argv), else NULL */
	const char *out;	   /* -o: its artifact */
	struct top_track track;	   /* the track child of top -- CMD */
	double interval_s;	   /* between two views */
	struct proc_filter filter; /* --pid, --comm: the view is theirs alone */
	bool tty;		   /* stdout is a terminal: redraw in place */
	struct mt_reader *r;	   /* owned */
	const struct mt_header *hdr;
	struct analysis a;
	struct stack_table st;
	struct symbolizer *sym;	   /* owned; only when stacks were recorded */
	struct site_frame *frames; /* owned scratch, SITE_MAX_FRAMES */
	bool complete;		   /* the trailer was read */
	bool stopped;		   /* no trailer, and no writer holds the file any more */
	uint64_t prev_events;	   /* records at the previous view */
	double prev_s;		   /* monotonic seconds of the previous view */
	double data_s;		   /* monotonic seconds when records last arrived */
	double rate;		   /* records per second over the last interval */
};

static volatile sig_atomic_t top_stop; /* SIGINT, SIGTERM, SIGHUP */

static void on_stop_signal(int sig)
{
	top_stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Returns 0, or the exit status of a usage error (already reported). */
static int parse_args(int argc, char **argv, struct top *t)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = NULL;
		int k = cli_filter_arg(&t->filter, argc, argv, &i);
		char *end;

		if (k < 0)
			return 2;
		if (k)
			continue;
		if (!strncmp(arg, "--interval=", 11)) {
			val = arg + 11;
		} else if (!strcmp(arg, "--")) {
			t->cmd = argv + i + 1;
			break;
		} else if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) {
			if (i + 1 == argc) {
				die_msg("%s needs a file; " TOP_USAGE, arg);
				return 2;
			}
			t->out = argv[++i];
			continue;
		} else if (!strcmp(arg, "--interval")) {
			if (i + 1 == argc) {
				die_msg("--interval needs a value; " TOP_USAGE);
				return 2;
			}
			val = argv[++i];
		} else if (arg[0] == '-' && arg[1]) {
			die_msg("unknown option '%s'; " TOP_USAGE, arg);
			return 2;
		} else if (t->path) {
			die_msg("one artifact at a time ('%s' and '%s'); " TOP_USAGE, t->path, arg);
			return 2;
		} else {
			t->path = arg;
			continue;
		}
		t->interval_s = strtod(val, &end);
		if (end == val || *end || !isfinite(t->interval_s) || t->interval_s < 0.05 ||
		    t->interval_s > 3600) {
			die_msg("--interval takes seconds from 0.05 to 3600 (e.g. 1 or 0.5), not '%s'",
				val);
			return 2;
		}
	}
	if (t->cmd && !t->cmd[0]) {
		die_msg("no command after --; " TOP_USAGE);
		return 2;
	}
	if (t->cmd && t->path) {
		die_msg("top -- CMD records its own artifact: give -o %s instead of '%s'", t->path,
			t->path);
		return 2;
	}
	if (t->out && !t->cmd) {
		die_msg("-o names the artifact of top -- CMD; to follow a file give it alone: memtrack top %s",
			t->out);
		return 2;
	}
	if (!t->path && !t->cmd) {
		die_msg("no artifact given; " TOP_USAGE);
		return 2;
	}
	return 0;
}

/*
 * While the artifact does not exist: true when top is to stop waiting
 * (after one line): the track child ended without it, or stdout is no
 * terminal and TOP_WAIT_S passed (nobody may ever create it).
 */
static bool give_up_waiting(struct top *t, double since_s)
{
	if (t->track.pid && top_track_exited(&t->track)) {
		die_msg("memtrack track ended before writing '%s'; its messages are in %s", t->path,
			t->track.log);
		return true;
	}
	if (!t->tty && !t->track.pid && now_s() - since_s >= TOP_WAIT_S) {
		die_msg("'%s' does not exist after %d s; start memtrack track -o %s first, or run memtrack top -- CMD",
			t->path, TOP_WAIT_S, t->path);
		return true;
	}
	return false;
}

/*
 * Waits up to @timeout_s for a key on stdin (a terminal only).  Returns
 * true when the user asked to quit (q, Q) or a stop signal came.
 */
static bool wait_for_quit(const struct top *t, double timeout_s)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	double until = now_s() + timeout_s;
	bool keys = t->tty && isatty(STDIN_FILENO);

	while (!top_stop) {
		double left = until - now_s();
		char c;

		if (left <= 0)
			return false;
		if (poll(&p, keys ? 1 : 0, (int)(left * 1000) + 1) > 0) {
			if (read(STDIN_FILENO, &c, 1) != 1)
				keys = false; /* stdin closed: no more keys, keep going */
			else if (c == 'q' || c == 'Q')
				return true;
		}
	}
	return true;
}

/*
 * Opens the artifact, waiting while it does not exist or its header is not
 * written yet (track creates it when the command starts).  Returns 0, 1
 * after a message, or -EINTR when the user quit meanwhile.
 */
static int open_artifact(struct top *t)
{
	char err[512];
	bool said = false;
	double since = now_s();
	int rc;

	for (;;) {
		t->r = mt_reader__open(t->path, err, sizeof(err));
		if (t->r)
			break;
		if (errno != ENOENT && errno != ENODATA) {
			die_msg("cannot read '%s': %s", t->path, err);
			return 1;
		}
		if (give_up_waiting(t, since))
			return 1;
		/* not a terminal: stderr stays quiet unless top gives up */
		if (!said && t->tty && !t->track.pid)
			fprintf(stderr, "memtrack: waiting for '%s' (q quits)\n", t->path);
		said = true;
		if (wait_for_quit(t, 0.1))
			return -EINTR;
	}
	rc = mt_reader__follow(t->r);
	if (rc) {
		die_msg("cannot follow '%s': %s; top reads a regular file as track writes it",
			t->path, strerror(-rc));
		return 1;
	}
	t->hdr = mt_reader__header(t->r);
	t->a.heap_off = t->hdr->flags & MT_HDR_START_DISABLED;
	analysis_set_page_size(&t->a, t->hdr->page_size);
	return 0;
}

/*
 * Folds every record written so far into the analysis.  Returns 0 (more
 * may come), 1 when the trailer was read (t->complete), -ENOMEM, or the
 * reader's error for a corrupt file (mt_reader__error says what).
 */
static int drain(struct top *t)
{
	struct mt_event ev;
	int rc, keep;

	while ((rc = mt_reader__next(t->r, &ev)) == 1) {
		keep = proc_filter_keep(&t->filter, &ev);
		if (keep < 0 || (keep && analysis_add(&t->a, &ev)) ||
		    (keep && t->sym && stack_table_add_event(&t->st, &ev) == -ENOMEM))
			return -ENOMEM;
	}
	if (rc == -EAGAIN)
		return 0;
	if (rc == 0) {
		t->complete = true;
		analysis_finish(&t->a);
		return 1;
	}
	return rc;
}

static uint64_t total_events(const struct analysis *a)
{
	uint64_t n = a->unknown_events;

	for (unsigned i = 0; i < MT_TYPE_MAX; i++)
		n += a->events[i];
	return n;
}

/* Seconds since the recording started: its duration once complete. */
static double elapsed_s(const struct top *t)
{
	const struct mt_trailer *tr = mt_reader__trailer(t->r);
	struct timespec ts;
	uint64_t now;

	if (tr)
		return tr->duration_ns / 1e9;
	if (t->stopped) /* up to its last record: nothing ran on after it that it saw */
		return t->a.last_ts > t->hdr->start_ns ? (t->a.last_ts - t->hdr->start_ns) / 1e9
						       : 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* the header's clock is CLOCK_MONOTONIC of this machine (FORMAT.md) */
	if (t->hdr->clock_id == CLOCK_MONOTONIC && now > t->hdr->start_ns)
		return (now - t->hdr->start_ns) / 1e9;
	return t->a.last_ts > t->hdr->start_ns ? (t->a.last_ts - t->hdr->start_ns) / 1e9 : 0;
}

static uint64_t dropped(const struct top *t)
{
	const struct mt_trailer *tr = mt_reader__trailer(t->r);
	uint64_t n = 0;

	for (int i = 0; tr && i < MT_DROP_SLOTS; i++)
		n += tr->dropped[i];
	return n;
}

/* Running processes first, by RSS then heap; then the exited, by their peaks. */
static int busier(const void *x, const void *y)
{
	const struct proc_summary *p = *(const struct proc_summary *const *)x;
	const struct proc_summary *q = *(const struct proc_summary *const *)y;
	uint64_t p1 = p->exited ? p->peak_rss_bytes : p->rss_bytes;
	uint64_t q1 = q->exited ? q->peak_rss_bytes : q->rss_bytes;
	uint64_t p2 = p->exited ? p->peak_heap_bytes : p->live_bytes;
	uint64_t q2 = q->exited ? q->peak_heap_bytes : q->live_bytes;

	if (p->exited != q->exited)
		return p->exited ? 1 : -1;
	if (p1 != q1)
		return p1 < q1 ? 1 : -1;
	if (p2 != q2)
		return p2 < q2 ? 1 : -1;
	return p->pid < q->pid ? -1 : p->pid > q->pid;
}

/* The processes, busiest first, in a malloc'd array (NULL when none or -ENOMEM). */
static const struct proc_summary **busiest(const struct analysis *a)
{
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	const struct proc_summary **v = a->nprocs ? calloc(a->nprocs, sizeof(*v)) : NULL;

	for (unsigned i = 0; v && i < a->nprocs; i++)
		v[i] = &a->procs[i];
	if (v)
		qsort(v, a->nprocs, sizeof(*v), busier); // NOLINT(bugprone-sizeof-expression)
	return v;
}

static unsigned running(const struct analysis *a)
{
	unsigned n = 0;

	for (unsigned i = 0; i < a->nprocs; i++)
		n += !a->procs[i].exited;
	return n;
}

/* What a call site is ranked by: its heap now, or once complete what it leaked. */
static uint64_t site_rank(const struct top *t, const struct site *s)
{
	return t->complete ? s->leaked_bytes : s->live_bytes;
}

/*
 * The TOP_SITES call sites with the most site_rank(), the most first, into
 * @v; returns how many.  Only with stacks (t->sym).
 */
static size_t top_sites(const struct top *t, const struct site **v)
{
	const struct site_table *st = &t->a.sites;
	size_t n = 0, k;

	for (uint64_t i = 0; t->sym && i < st->nsites; i++) {
		const struct site *s = &st->sites[i];
		uint64_t x = site_rank(t, s);

		if (!x)
			continue;
		if (n < TOP_SITES)
			k = n++;
		else if (x <= site_rank(t, v[TOP_SITES - 1]))
			continue;
		else
			k = TOP_SITES - 1;
		for (; k > 0 && site_rank(t, v[k - 1]) < x; k--)
			v[k] = v[k - 1];
		v[k] = s;
	}
	return n;
}

/* "f < g < main": the innermost frames of @s's stack, in @buf. */
static const char *site_name(struct top *t, const struct site *s, char *buf, size_t len)
{
	int n = callsite_expand(t->sym, &t->st, s->stack, t->frames, SITE_MAX_FRAMES);
	size_t used = 0;
	char name[128];

	if (n <= 0)
		snprintf(buf, len, s->stack ? "(stack %llu not recorded yet)" : "(no stack)",
			 (unsigned long long)s->stack);
	for (int i = 0; i < n && i < TOP_SITE_FRAMES && used < len; i++)
		used += snprintf(buf + used, len - used, "%s%s", i ? " < " : "",
				 site_frame_label(&t->frames[i], name, sizeof(name)));
	return buf;
}

/* One line of the terminal view, cut at the terminal's width. */
static void view_line(int cols, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void view_line(int cols, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("%.*s\033[K\n", cols, line);
}

static void view_summary(const struct top *t, int cols)
{
	const struct analysis *a = &t->a;
	const struct mt_trailer *tr = mt_reader__trailer(t->r);
	char b1[32], b2[32], b3[32], b4[32], b5[32], drops[64];

	view_line(cols, "memtrack top  %s  %s", t->path, t->hdr->command);
	if (tr)
		snprintf(drops, sizeof(drops), "%llu dropped", (unsigned long long)dropped(t));
	else
		snprintf(drops, sizeof(drops), "drops counted at the end");
	view_line(cols, "elapsed %.1f s   events %llu (%.0f/s)   %s", elapsed_s(t),
		  (unsigned long long)total_events(a), t->rate, drops);
	if (t->complete)
		view_line(cols, "heap   peak %s, leaked %s",
			  human_bytes(a->peak_live_bytes, b1, sizeof(b1)),
			  human_bytes(a->leaked_bytes, b2, sizeof(b2)));
	else
		view_line(cols, "heap   %s live, peak %s",
			  human_bytes(a->live_bytes, b1, sizeof(b1)),
			  human_bytes(a->peak_live_bytes, b2, sizeof(b2)));
	if (t->complete)
		view_line(cols, "mapped peak %s, %s still mapped at exit;  memory peak %s",
			  human_bytes(a->peak_mapped_bytes, b1, sizeof(b1)),
			  human_bytes(a->leaked_mapped_bytes, b2, sizeof(b2)),
			  human_bytes(a->peak_memory_bytes, b3, sizeof(b3)));
	else
		view_line(cols, "mapped %s, peak %s;  memory %s, peak %s",
			  human_bytes(a->mapped_bytes, b1, sizeof(b1)),
			  human_bytes(a->peak_mapped_bytes, b2, sizeof(b2)),
			  human_bytes(a->live_bytes + a->mapped_bytes, b3, sizeof(b3)),
			  human_bytes(a->peak_memory_bytes, b4, sizeof(b4)));
	view_line(cols, "RSS    %s (anon %s, file %s, shmem %s), peak %s",
		  human_bytes(a->tree_rss_bytes, b1, sizeof(b1)),
		  human_bytes(a->tree_anon, b2, sizeof(b2)),
		  human_bytes(a->tree_file, b3, sizeof(b3)),
		  human_bytes(a->tree_shmem, b4, sizeof(b4)),
		  human_bytes(a->peak_rss_bytes, b5, sizeof(b5)));
	if (a->has_physical || (t->hdr->flags & MT_HDR_PHYSICAL)) /* as draw_view counts */
		view_line(cols, "physical %s, peak %s",
			  human_bytes(a->physical_bytes, b1, sizeof(b1)),
			  human_bytes(a->peak_physical_bytes, b2, sizeof(b2)));
	view_line(cols, "processes %u, %u running", a->nprocs, running(a));
}

/* The busiest processes, as many as @rows allows. */
static void view_procs(const struct top *t, int cols, int rows)
{
	const struct proc_summary **v = busiest(&t->a);
	char b1[32], b2[32], b3[32];

	view_line(cols, "%s", "");
	view_line(cols, "%8s  %-16s %11s %11s %11s %10s", "PID", "COMMAND", "HEAP", "PEAK HEAP",
		  "RSS", "ALLOCS");
	for (unsigned i = 0; v && i < t->a.nprocs && (int)i < rows; i++)
		view_line(cols, "%8u  %-16.16s %11s %11s %11s %10llu%s", v[i]->pid, v[i]->command,
			  human_bytes(v[i]->live_bytes, b1, sizeof(b1)),
			  human_bytes(v[i]->peak_heap_bytes, b2, sizeof(b2)),
			  human_bytes(v[i]->rss_bytes, b3, sizeof(b3)),
			  (unsigned long long)v[i]->allocs, v[i]->exited ? "  (exited)" : "");
	free(v);
}

static void view_sites(struct top *t, int cols)
{
	const struct site *v[TOP_SITES];
	size_t n = top_sites(t, v);
	char b[32], name[512];

	if (!t->sym)
		return;
	view_line(cols, "%s", "");
	view_line(cols, "%s",
		  t->complete ? "call sites that leaked the most:"
			      : "call sites holding the most heap:");
	for (size_t i = 0; i < n; i++)
		view_line(cols, "  %11s  %s", human_bytes(site_rank(t, v[i]), b, sizeof(b)),
			  site_name(t, v[i], name, sizeof(name)));
	if (!n)
		view_line(cols, "  (none)");
}

/* The status line: how the run stands and how to quit. */
static void view_status(const struct top *t, int cols)
{
	const struct mt_trailer *tr = mt_reader__trailer(t->r);

	view_line(cols, "%s", "");
	if (tr && tr->exit_signal)
		view_line(cols, "complete: the command was killed by signal %d", tr->exit_signal);
	else if (tr)
		view_line(cols, "complete: the command exited with %d", tr->exit_code);
	else if (t->stopped)
		view_line(
			cols,
			"the recording stopped without finishing: its writer is gone (no trailer)");
	else if (now_s() - t->data_s > 10)
		view_line(cols, "no new record for %.0f s (is track still running?)   q quits",
			  now_s() - t->data_s);
	else
		view_line(cols, "recording   q quits");
}

/* Draws the terminal view: over the last one (@in_place), or below the prompt. */
static void draw_view(struct top *t, bool in_place)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	bool physical = t->a.has_physical || (t->hdr->flags & MT_HDR_PHYSICAL);
	/* summary, 2 above the processes, the sites, the status (and a prompt below) */
	int rows, used = 6 + physical + 2 + (t->sym ? TOP_SITES + 2 : 0) + 2 + 2 * !in_place;

	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	rows = ws.ws_row > used ? ws.ws_row - used : 1;
	if (in_place)
		printf("\033[H");
	view_summary(t, ws.ws_col);
	view_procs(t, ws.ws_col, rows);
	view_sites(t, ws.ws_col);
	view_status(t, ws.ws_col);
	if (in_place)
		printf("\033[J");
	fflush(stdout);
}

/* Plain mode: one logfmt line per interval, exact counts. */
static void print_line(struct top *t)
{
	const struct analysis *a = &t->a;
	const struct proc_summary **v = busiest(a);
	uint64_t memory = a->live_bytes + a->mapped_bytes;

	printf("elapsed_s=%.3f events=%llu events_per_s=%.0f heap_bytes=%llu mapped_bytes=%llu "
	       "memory_bytes=%llu rss_bytes=%llu processes=%u running=%u",
	       elapsed_s(t), (unsigned long long)total_events(a), t->rate,
	       (unsigned long long)a->live_bytes, (unsigned long long)a->mapped_bytes,
	       (unsigned long long)memory, (unsigned long long)a->tree_rss_bytes, a->nprocs,
	       running(a));
	if (v)
		printf(" busiest_pid=%u busiest_heap_bytes=%llu busiest_mapped_bytes=%llu"
		       " busiest_rss_bytes=%llu",
		       v[0]->pid, (unsigned long long)v[0]->live_bytes,
		       (unsigned long long)v[0]->mapped.bytes, (unsigned long long)v[0]->rss_bytes);
	if (t->stopped)
		printf(" stopped=1");
	if (t->complete)
		printf(" complete=1 dropped=%llu peak_heap_bytes=%llu peak_rss_bytes=%llu "
		       "leaked_bytes=%llu peak_mapped_bytes=%llu peak_memory_bytes=%llu "
		       "mapped_count=%llu leaked_mapped_bytes=%llu",
		       (unsigned long long)dropped(t), (unsigned long long)a->peak_live_bytes,
		       (unsigned long long)a->peak_rss_bytes, (unsigned long long)a->leaked_bytes,
		       (unsigned long long)a->peak_mapped_bytes,
		       (unsigned long long)a->peak_memory_bytes,
		       (unsigned long long)a->mapped_count,
		       (unsigned long long)a->leaked_mapped_bytes);
	putchar('\n');
	fflush(stdout);
	free(v);
}

/* Updates the rate: records per second since the last view. */
static void tick(struct top *t)
{
	double now = now_s();
	uint64_t n = total_events(&t->a);

	if (n != t->prev_events)
		t->data_s = now;
	if (!t->prev_events || t->complete) /* the first view, the last: since the start */
		t->rate = elapsed_s(t) > 0 ? n / elapsed_s(t) : 0;
	else
		t->rate = now > t->prev_s ? (n - t->prev_events) / (now - t->prev_s) : 0;
	t->prev_events = n;
	t->prev_s = now;
}

/* Shows the view (terminal) or a line (plain). */
static void show(struct top *t)
{
	tick(t);
	if (t->tty)
		draw_view(t, true);
	else
		print_line(t);
}

/* The terminal while top runs: keys unbuffered, no echo, the alternate screen. */
struct term {
	bool keys;	      /* stdin's mode was changed (it is a terminal) */
	struct termios saved; /* its mode before */
};

static void term_enter(struct term *tm)
{
	struct termios raw;

	tm->keys = isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &tm->saved);
	if (tm->keys) {
		raw = tm->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	printf("\033[?1049h\033[?25l");
	fflush(stdout);
}

static void term_leave(const struct term *tm)
{
	printf("\033[?25h\033[?1049l");
	fflush(stdout);
	if (tm->keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &tm->saved);
}

/* q, Ctrl-C, SIGTERM and SIGHUP end top (cleanly: the terminal is restored). */
static void catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/*
 * Whether the recording stopped without finishing: no trailer, and no
 * writer holds the file (memtrack was killed, or this is a copy of a cut
 * file).  The lock is looked at first and the file read once more, so a
 * writer that finished in between is seen finished.  Returns drain()'s
 * result, with t->stopped set when it stopped.
 */
static int check_stopped(struct top *t)
{
	int rc;

	if (mt_reader__writer_holds(t->r))
		return 0;
	rc = drain(t);
	t->stopped = rc == 0;
	return rc;
}

/*
 * Views until the artifact is complete, its writer is gone, or the user
 * quits; returns drain()'s last result (0 also when it stopped).
 */
static int follow(struct top *t)
{
	int rc;

	t->prev_s = t->data_s = now_s();
	while (!(rc = drain(t)) && !(rc = check_stopped(t)) && !t->stopped) {
		show(t);
		if (wait_for_quit(t, t->interval_s))
			return 0;
	}
	return rc;
}

/* Opens, follows and shows; returns the exit status. */
static int top_run(struct top *t)
{
	struct term tm = { .keys = false };
	int rc = open_artifact(t);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (t->hdr->flags & MT_HDR_STACKS) {
		t->sym = symbolizer__new(NULL);
		t->frames = calloc(SITE_MAX_FRAMES, sizeof(*t->frames));
		if (!t->sym || !t->frames) {
			die_msg("out of memory");
			return 1;
		}
	}
	if (t->tty)
		term_enter(&tm);
	rc = follow(t);
	if (t->tty) {
		term_leave(&tm);
		if (rc == 1)
			tick(t);     /* the final rate */
		draw_view(t, false); /* the last view stays on the screen */
	} else if (rc == 1 || t->stopped) {
		show(t);
	}
	if (t->stopped)
		die_msg("%s: the recording stopped without finishing (no trailer, and no memtrack writes it any more: it was killed, or this is a copy); memtrack report reads what it holds",
			t->path);
	if (rc < 0)
		die_msg("%s: %s; top stopped there", t->path,
			rc == -ENOMEM ? "out of memory" : mt_reader__error(t->r));
	if (t->sym)
		symbolizer__save(t->sym);
	return rc < 0 ? 1 : close_stdout("view");
}

int cmd_top(int argc, char **argv)
{
	struct top t = { .interval_s = 1.0 };
	int ret;

	if (help_wanted(argc, argv))
		return help_show("top");
	proc_filter_init(&t.filter);
	ret = parse_args(argc, argv, &t);
	if (ret) {
		proc_filter_release(&t.filter);
		return ret;
	}
	t.tty = isatty(STDOUT_FILENO);
	analysis_init(&t.a);
	t.a.filtered = proc_filter_active(&t.filter);
	stack_table_init(&t.st);
	catch_stop_signals();
	if (t.cmd) {
		t.path = t.out ? t.out : track_default_output(t.cmd[0]);
		ret = top_track_start(&t.track, t.cmd, t.path);
		if (!ret)
			ret = top_run(&t);
		/* the command's status, unless top itself failed (and said why) */
		if (t.track.pid && !(ret && t.track.reaped)) {
			int st = top_track_finish(&t.track, !t.complete);

			ret = ret ? ret : st;
		}
	} else {
		ret = top_run(&t);
	}
	symbolizer__free(t.sym);
	free(t.frames);
	stack_table_release(&t.st);
	analysis_release(&t.a);
	mt_reader__free(t.r);
	proc_filter_release(&t.filter);
	return ret;
}
