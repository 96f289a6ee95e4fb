/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the subcommands and the small helpers they share (and, through
 * util/text.h, the text helpers they all use).
 *
 * Every command returns the process exit status: 0 ok, 1 failure, 2 usage
 * (track returns the command's own status).  Messages go to stderr as one
 * line, "memtrack: <what went wrong>; <what to do>".
 */
#ifndef MEMTRACK_CLI_H
#define MEMTRACK_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "compiler.h"
#include "util/text.h" /* human_bytes, printable, parse_size: the commands' */

int cmd_track(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_top(int argc, char **argv);

/*
 * Whether this build unwinds call stacks (--stacks).  Both unwinders (the
 * kernel's, src/bpf/unwind.bpf.h, and the in-process one, src/fast/unwind.c)
 * and the tables they walk (src/inspect/unwind_table.c) know x86-64's and
 * arm64's frames (issue 40: x29/x30/sp, the return address in x30 at a
 * call's entry, PAC-signed return addresses); a stack walked with another
 * machine's rules would be wrong, not absent, so elsewhere track records
 * none by default and refuses --stacks.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define MT_ARCH_STACKS 1
#else
#define MT_ARCH_STACKS 0
#endif
#define MT_NO_STACKS_MSG "--stacks: call stacks are unwound on x86-64 and arm64 only; drop --stacks"

/* Prints "memtrack: <fmt>\n" to stderr. */
void die_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Flushes and closes stdout.  Returns 0, or 1 after printing one line that
 * names @what ("events", "report") when any write to stdout failed (a full
 * disk, /dev/full, a closed pipe).
 */
int close_stdout(const char *what);

/*
 * If @base under @dirfd (the directory of the output @path) exists and is
 * not a regular file, says so in one line naming the option @opt ("-o",
 * "--html") and returns true.
 */
bool output_refused(int dirfd, const char *base, const char *path, const char *opt);

/*
 * Opens the output file @path of a reader (report --html, flamegraph -o,
 * export -o) for writing: created or truncated as the invoking user under
 * sudo (as_user.h), never through a symbolic link, a FIFO, a device or a
 * hard link.  Returns the fd, or -1 after one line naming @opt.
 */
int output_open(const char *path, const char *opt);

/* output_open() as a stream; NULL after one line. */
FILE *output_fopen(const char *path, const char *opt);

struct proc_filter;

/*
 * --pid PID / --comm NAME at argv[*@i] (report, flamegraph, export, diff,
 * dump, top): 1 taken into @f (*@i at its value), 0 not one of them, -1
 * after one line saying what is wrong.
 */
int cli_filter_arg(struct proc_filter *f, int argc, char **argv, int *i);

/*
 * After a file @path was read through @f: when --pid/--comm kept no record
 * of any process, says so in one line (a warning: the output is that of no
 * process, not an error).
 */
void cli_filter_warn_unmatched(const struct proc_filter *f, const char *path);

/*
 * --top N / --by function|stack at argv[*@i] (report, diff): 1 taken into
 * @n / @by_stack (*@i at its value), 0 not one of them, -1 after one line
 * saying what is wrong.
 */
int cli_top_arg(int argc, char **argv, int *i, size_t *n, bool *by_stack);

struct mt_header;

/*
 * A run recorded without stacks has nothing to draw or rank by call site:
 * says so in one line naming @path and how to record one (the option
 * depends on the command that recorded it, from @h).  Returns 1.
 */
int cli_no_stacks(const char *path, const struct mt_header *h);

#endif /* MEMTRACK_CLI_H */
