// SPDX-License-Identifier: MIT
/*
 * help.c - one entry per command: its one-line summary (for the list of
 * commands) and its help (usage lines first, then what it does and its
 * options), each line at most 80 columns.  docs/memtrack.1.scd says the
 * same at length; tests/integration check that every option named here is
 * in the man page (test_help.py) and in the bash completion
 * (test_completion.py).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/help.h"

struct cmd_help {
	const char *name;    /* the command, argv[1] */
	const char *summary; /* one line, no period */
	const char *text;    /* "usage: memtrack NAME ...\n" lines, then the rest */
};

/* --pid and --comm, as every reading command takes them (filter.h) */
#define FILTER_HELP                                                                      \
	"      --pid PID         only process PID's records (repeatable; with --comm:\n" \
	"                        either)\n"                                              \
	"      --comm NAME       only the records of processes running NAME, as the\n"   \
	"                        report lists it (repeatable)\n"

static const struct cmd_help commands[] = {
	{ "track", "run a command and record the memory of its process tree",
	  "usage: memtrack track [options] -- CMD [ARGS...]\n"
	  "       memtrack track [options] \"SHELL COMMAND\"   (run through /bin/sh -c)\n"
	  "Runs CMD and records, with eBPF, its whole process tree: heap calls, the\n"
	  "mmap family, fork/exec/exit and RSS, into an artifact (.mtrk) that report,\n"
	  "dump, top and the other commands read.  Exits with CMD's status.\n"
	  "  -o, --output FILE     artifact to write (default memtrack.<cmd>.<pid>.mtrk)\n"
	  "      --no-allocators   do not attach the heap probes (cheaper)\n"
	  "      --physical        also record the tree's physical memory (shared pages\n"
	  "                        counted once)\n"
	  "      --allow-drops     exit with the command's status even if events were lost\n"
	  "      --ring-size SIZE  BPF ring buffer size, power of two (default 2M)\n"
	  "      --batch-size SIZE bytes of records per artifact frame (default 256K)\n"
	  "      --flush-ms MS     write a partial frame after MS ms (default 500)\n"
	  "      --wakeup-bytes N  wake the reader at N unread bytes (default ring/16)\n"
	  "      --control PATH    control socket (enable, disable, ping, mark NAME; see\n"
	  "                        memtrack ctl); the command finds PATH in\n"
	  "                        $MEMTRACK_CONTROL\n"
	  "      --start-disabled  heap recording off until `enable` (needs --control)\n"
	  "      --stacks          record the call stack of every allocation and mmap\n"
	  "                        (the default, but with --no-allocators)\n"
	  "      --no-stacks       no call stacks (the last of the two wins)\n"
	  "      --unwind-rows N   with stacks: at most N unwind table rows in the kernel\n"
	  "                        (default 1M; the tables take what the tree maps)\n"
	  "      --unwind-cache DIR\n"
	  "                        with stacks, keep unwind tables across runs in DIR\n"
	  "                        (default /var/cache/memtrack; only root may write it)\n"
	  "      --no-unwind-cache build every unwind table, keep none\n"
	  "      --fast            record heap calls inside the processes (a preloaded\n"
	  "                        library) where possible, uprobes elsewhere; the\n"
	  "                        default (with stacks the library unwinds)\n"
	  "      --no-fast         record every heap call with uprobes\n"
	  "      --no-python-frames CPython's stacks without its Python frames (by\n"
	  "                        default the in-process path shows function, file, line)\n"
	  "      --daemon[=PATH]   record through the memtrack daemon (memtrack daemon) at\n"
	  "                        PATH (default /run/memtrack/daemon.sock): no root\n"
	  "                        needed, nothing to load; used without the option\n"
	  "                        when that socket exists\n"
	  "      --no-daemon       record in-process (root), even with a daemon running\n"
	  "      --sample-bytes N  record one allocation per N bytes on average (Poisson,\n"
	  "                        with its stack and the free of the block), count every\n"
	  "                        call exactly; heap figures become estimates\n"
	  "      --profile-every DURATION\n"
	  "                        write a pprof heap profile every DURATION (60s, 500ms,\n"
	  "                        5m) and at the end, for Pyroscope/Parca\n"
	  "      --profile-dir DIR into DIR (it must exist; with --profile-every)\n"
	  "  -v, --verbose         libbpf/verifier messages and pipeline statistics\n"
	  "  -q, --quiet           no summary line\n"
	  "  -h, --help            this help\n" },
	{ "attach", "record a running process and its descendants, from now on",
	  "usage: memtrack attach [options] PID\n"
	  "Records, with eBPF, the running process PID, its threads and descendants,\n"
	  "and the children they make from now on: heap calls (uprobes: nothing is\n"
	  "injected), the mmap family, fork/exec/exit and RSS (a first record each at\n"
	  "the attach).  Nothing before the attach is seen: frees of older blocks are\n"
	  "counted as unknown.  Stops on Ctrl-C/SIGINT/SIGTERM, after --duration, or\n"
	  "when the tree has exited; the process runs on as before, with no probe\n"
	  "left, also if memtrack is killed.  Exits 0, 1 if events were lost.\n"
	  "  -o, --output FILE     artifact to write (default memtrack.<name>.<pid>.mtrk)\n"
	  "      --duration SECS   stop after SECS seconds (default: until a signal)\n"
	  "      --no-allocators   do not attach the heap probes (cheaper)\n"
	  "      --sample-bytes N  record one allocation per N bytes on average, count\n"
	  "                        every call exactly (as track's)\n"
	  "      --profile-every DURATION\n"
	  "                        a pprof heap profile every DURATION (as track's)\n"
	  "      --profile-dir DIR into DIR (with --profile-every)\n"
	  "      --physical        also record the tree's physical memory (shared pages\n"
	  "                        counted once)\n"
	  "      --ring-size SIZE  BPF ring buffer size, power of two (default 2M)\n"
	  "      --control PATH    control socket (enable, disable, ping, mark NAME; see\n"
	  "                        memtrack ctl)\n"
	  "      --stacks          record the call stack of every allocation and mmap\n"
	  "                        (tables for every object already mapped; off by\n"
	  "                        default: attach has no in-process path, every\n"
	  "                        stack is unwound in the kernel)\n"
	  "      --no-stacks       no call stacks (the default; the last of the two wins)\n"
	  "      --unwind-cache DIR\n"
	  "                        with stacks, keep unwind tables across runs in DIR\n"
	  "                        (default /var/cache/memtrack; only root may write it)\n"
	  "      --no-unwind-cache build every unwind table, keep none\n"
	  "      --no-python-frames no Python frames (attach takes none yet: kernel stacks)\n"
	  "      --daemon[=PATH]   record through the memtrack daemon at PATH (default\n"
	  "                        /run/memtrack/daemon.sock): your own processes only;\n"
	  "                        used without the option when that socket exists\n"
	  "      --no-daemon       record in-process (root), even with a daemon running\n"
	  "  -v, --verbose         libbpf/verifier messages and pipeline statistics\n"
	  "  -q, --quiet           no summary line\n"
	  "  -h, --help            this help\n" },
	{ "daemon", "serve track and attach to users without root, loaded once",
	  "usage: memtrack daemon [--socket PATH] [-v]\n"
	  "Runs as root and serves `memtrack track` and `memtrack attach` of any user\n"
	  "on a Unix socket: the BPF side is loaded before a session asks, so a short\n"
	  "command pays almost nothing, and a user records their own processes only\n"
	  "(authenticated by SO_PEERCRED; the artifact is written to the file the\n"
	  "user opened).  Stops on SIGTERM or SIGINT, every session finished.\n"
	  "      --socket PATH     the socket (default /run/memtrack/daemon.sock, made\n"
	  "                        0666 in a 0755 directory), or systemd's socket\n"
	  "  -v, --verbose         one line a session on stderr\n"
	  "  -h, --help            this help\n" },
	{ "top", "follow an artifact while track writes it: heap, RSS, processes",
	  "usage: memtrack top [--interval SECONDS] [--pid PID] [--comm NAME] FILE\n"
	  "       memtrack top [--interval SECONDS] [--pid PID] [--comm NAME] [-o FILE]\n"
	  "                    -- CMD [ARGS...]\n"
	  "Follows the artifact FILE while memtrack track writes it and redraws a view\n"
	  "of the run every interval: elapsed time, events/s; heap, mapped memory and\n"
	  "RSS of the tree, heap and RSS of the busiest processes; with stacks,\n"
	  "the call sites holding the most heap.  It ends when the artifact is\n"
	  "complete, or on q or Ctrl-C.\n"
	  "When stdout is not a terminal it prints one line per interval instead\n"
	  "(key=value, exact byte counts).  The file is at most track's --flush-ms\n"
	  "(default 500 ms) behind; drops are known at the end.  A missing FILE is\n"
	  "waited for: on a terminal until q, otherwise 10 s (then exit 1).\n"
	  "With -- CMD, top runs memtrack track -q -o FILE -- CMD itself and follows\n"
	  "it: one terminal.  CMD's output goes to FILE.log; q stops CMD (as Ctrl-C\n"
	  "stops track); top exits with CMD's status.\n"
	  "      --interval SECONDS  time between two views (default 1)\n"
	  "  -o, --output FILE     with -- CMD: the artifact (default\n"
	  "                        memtrack.<cmd>.<pid>.mtrk)\n" FILTER_HELP
	  "  -h, --help            this help\n" },
	{ "dump", "print every recorded event as one JSON object per line",
	  "usage: memtrack dump FILE [--pid PID] [--comm NAME]\n"
	  "Prints the records of the artifact FILE in file order, one JSON object per\n"
	  "line: type, ts (ns, CLOCK_MONOTONIC), pid, tid and the fields of the type.\n"
	  "A damaged or truncated file prints what precedes the damage, then says so.\n"
	  "With a filter, the records of other processes are left out (a fork is the\n"
	  "child's; objects, mappings, stacks and marks are always printed).\n" FILTER_HELP
	  "  -h, --help            this help\n" },
	{ "report", "summarize a run: heap, leaks, peak RSS, processes, call sites",
	  "usage: memtrack report FILE [--json] [--top N] [--by function|stack] [--sizes]\n"
	  "                       [--sort KEY] [--pid PID] [--comm NAME]\n"
	  "       memtrack report FILE --between MARK_A MARK_B [--json]\n"
	  "       memtrack report FILE --html OUT.html [--svg OUT.svg] [--per-process]\n"
	  "Summarizes the run recorded in FILE: allocations, peak heap, leaks, peak RSS\n"
	  "(and physical memory), events, drops and every process; with stacks\n"
	  "also the unwinder of each process, the unwind tables' kernel memory and the\n"
	  "3 functions with the most peak heap.\n"
	  "      --json            the summary as one JSON object\n"
	  "      --top N           with stacks: the N functions (an allocation's first\n"
	  "                        frame outside the allocator) with the most peak\n"
	  "                        heap, allocations, allocated, leaked and temporary,\n"
	  "                        and memory (heap + mapped at the memory peak), each\n"
	  "                        with its heaviest callers\n"
	  "      --by stack        --top ranks whole stacks instead, each with its\n"
	  "                        frames (--by function: the default)\n"
	  "      --sizes           the allocation sizes by powers of two: count, bytes\n"
	  "      --sort KEY        the process table by rss (the default when RSS was\n"
	  "                        recorded), peak, allocations, allocated, leaked,\n"
	  "                        memory, temporary or pid\n" FILTER_HELP
	  "      --between A B     only the section between the marks A and B\n"
	  "      --html OUT.html   also write the whole report as one page: summary,\n"
	  "                        timeline, functions, sites, flame graph, leaks...\n"
	  "      --svg OUT.svg     also write the timeline as a standalone SVG\n"
	  "      --per-process     timeline: one RSS and one heap line per process\n"
	  "  -h, --help            this help\n" },
	{ "diff", "compare two runs metric by metric; gate CI on growth",
	  "usage: memtrack diff BASE NEW [--json] [--fail-above PCT] [--metric NAME]...\n"
	  "                     [--top N] [--by function|stack] [--pid PID] [--comm NAME]\n"
	  "Compares two runs metric by metric, for the tree and for each process\n"
	  "(paired by command: the k-th cc of BASE with the k-th cc of NEW); bytes\n"
	  "in KiB/MiB (--json: in bytes).  --pid and --comm filter both runs.\n"
	  "      --json            the comparison as one JSON object\n"
	  "      --fail-above PCT  exit 1 when a chosen metric grew by more than\n"
	  "                        PCT percent of its BASE value (exactly PCT passes)\n"
	  "      --metric NAME     gate on NAME only (repeatable; default all tree\n"
	  "                        metrics): peak_heap_bytes, total_allocated_bytes,\n"
	  "                        alloc_count, leaked_bytes, peak_rss_bytes,\n"
	  "                        peak_physical_bytes, peak_mapped_bytes,\n"
	  "                        peak_memory_bytes, mapped_count, leaked_mapped_bytes;\n"
	  "                        or each site's growth: function:M or stack:M, M one\n"
	  "                        of peak, allocations, allocated, leaked, memory,\n"
	  "                        temporary, live_at_end (a site only in NEW grew from 0)\n"
	  "      --top N           the N functions whose numbers changed most, metric\n"
	  "                        by metric (needs call stacks in both runs)\n"
	  "      --by stack        --top ranks whole stacks instead (--by function: the\n"
	  "                        default)\n" FILTER_HELP "  -h, --help            this help\n"
	  "Exit status: 0, 1 on a regression or an unreadable file, 2 on usage errors.\n" },
	{ "export", "write a run for Perfetto, a spreadsheet or pprof",
	  "usage: memtrack export --format=perfetto|csv|pprof FILE -o OUT [--pid PID]\n"
	  "                       [--comm NAME]\n"
	  "Writes the run recorded in FILE in another tool's format.\n"
	  "      --format=perfetto Trace Event Format JSON (ui.perfetto.dev,\n"
	  "                        chrome://tracing): heap and RSS counters per process\n"
	  "      --format=csv      one row per heap, RSS, physical, fork, exec and exit\n"
	  "                        record, for spreadsheets and pandas\n"
	  "      --format=pprof    the call sites (stacks) as a gzipped\n"
	  "                        profile.proto for pprof and speedscope\n"
	  "  -o, --output OUT      the file to write (perfetto and csv: - is stdout)\n" FILTER_HELP
	  "  -h, --help            this help\n" },
	{ "flamegraph", "draw the call sites of a run as an SVG flame graph",
	  "usage: memtrack flamegraph FILE -o OUT.svg [--metric METRIC] [--flame]\n"
	  "                           [--pid PID] [--comm NAME]\n"
	  "       memtrack flamegraph FILE --folded [-o OUT] [--metric METRIC]\n"
	  "Draws the call sites of a run recorded with stacks as an interactive SVG\n"
	  "flame graph (click to zoom, Ctrl-F to search), the root at the top.\n"
	  "  -o, --output OUT      the file to write (-: stdout)\n"
	  "      --metric METRIC   peak (the default: bytes live at the tree's heap\n"
	  "                        peak), allocations, allocated, leaked or memory\n"
	  "                        (heap + mapped bytes at the tree's memory peak)\n"
	  "      --flame           the root at the bottom (classic flame graph)\n"
	  "      --folded          folded stacks (\"main;f;g 1234\") for other tools,\n"
	  "                        on stdout without -o\n" FILTER_HELP
	  "  -h, --help            this help\n" },
	{ "ctl", "send enable, disable, ping or mark to a running track --control",
	  "usage: memtrack ctl PATH enable|disable|ping|mark NAME\n"
	  "Sends one command to the control socket PATH of a running\n"
	  "`memtrack track --control PATH` and returns once it is in effect.\n"
	  "  enable                heap recording on\n"
	  "  disable               heap recording off (processes, mappings and RSS\n"
	  "                        are still recorded)\n"
	  "  ping                  check that the session answers\n"
	  "  mark NAME             a named mark in the recording (report --between)\n"
	  "  -h, --help            this help\n"
	  "Silent on success; exit 1 with a message when the session does not answer.\n" },
	{ "help", "show the help of a command, or this list",
	  "usage: memtrack help [COMMAND]\n"
	  "Shows the usage and options of COMMAND (the same as memtrack COMMAND\n"
	  "--help), or the list of commands.\n" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

bool is_help_arg(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

bool help_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (is_help_arg(argv[i]))
			return true;
	return false;
}

static const struct cmd_help *help_find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

bool help_has(const char *name)
{
	return help_find(name) != NULL;
}

#define TYPO_MAX 2  /* edits a typo may be away from a command */
#define TYPO_LEN 32 /* longer words are no typo of a command */

/* Optimal string alignment distance of @a and @b (both shorter than TYPO_LEN). */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned d[TYPO_LEN + 1][TYPO_LEN + 1];

	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			unsigned del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
			unsigned best = sub < del ? sub : del;

			best = ins < best ? ins : best;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

const char *help_closest(const char *name)
{
	const char *best = NULL;
	unsigned best_d = TYPO_MAX + 1;

	if (strlen(name) >= TYPO_LEN)
		return NULL;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		unsigned d = edit_distance(name, commands[i].name);

		if (d < best_d && d < strlen(name)) {
			best = commands[i].name;
			best_d = d;
		}
	}
	return best;
}

/* The list of commands, for `memtrack help` and `memtrack --help`. */
static void print_overview(FILE *out)
{
	fputs("usage: memtrack COMMAND [ARGS...]\n"
	      "Records the memory behaviour of a process tree with eBPF (track), and reads\n"
	      "the recording, an artifact (.mtrk), in several ways.\n"
	      "\n"
	      "commands:\n",
	      out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fputs("\n"
	      "memtrack help COMMAND (or memtrack COMMAND --help) shows its options;\n"
	      "man memtrack is the manual; memtrack --version prints the version.\n",
	      out);
}

int help_print(FILE *out, const char *name)
{
	const struct cmd_help *h = name ? help_find(name) : NULL;

	if (!name) {
		print_overview(out);
		return 0;
	}
	if (!h)
		return -ENOENT;
	fputs(h->text, out);
	return 0;
}

/* "track, dump, ... or help" into @buf, for the message about an unknown name. */
static const char *command_list(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NCOMMANDS && used < len; i++) {
		const char *sep = i + 1 == NCOMMANDS ? " or " : ", ";

		used += snprintf(buf + used, len - used, "%s%s", i ? sep : "", commands[i].name);
	}
	return buf;
}

int help_show(const char *name)
{
	char list[256];

	if (name && !help_has(name) && help_closest(name)) {
		die_msg("no command '%s'; did you mean %s? (see memtrack help)", name,
			help_closest(name));
		return 2;
	}
	if (name && !help_has(name)) {
		die_msg("no command '%s'; the commands are %s (see memtrack help)", name,
			command_list(list, sizeof(list)));
		return 2;
	}
	help_print(stdout, name);
	return close_stdout("help");
}

/* `memtrack help [COMMAND]`. */
int cmd_help(int argc, char **argv)
{
	if (argc > 2) {
		die_msg("help takes one command, not %d words; usage: memtrack help [COMMAND]",
			argc - 1);
		return 2;
	}
	if (argc == 2 && is_help_arg(argv[1]))
		return help_show("help");
	return help_show(argc == 2 ? argv[1] : NULL);
}
