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
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_top(int argc, char **argv);

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

#endif /* MEMTRACK_CLI_H */
