/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the subcommands and the small helpers they share.
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

int cmd_track(int argc, char **argv);
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

/* @bytes as "512 B", "1.5 KiB", ... in @buf (@len bytes); returns @buf. */
const char *human_bytes(uint64_t bytes, char *buf, size_t len);

/*
 * @s as a terminal may show it: every control character (C0, DEL, and C1 in
 * UTF-8) written as \xNN, into @buf (@len bytes; cut short when it does not
 * fit, 4 bytes per byte of @s always do); returns @buf.  For the text output
 * of strings from an artifact (commands, paths, marks, symbol names), which
 * anyone may have filled with escape sequences.
 */
const char *printable(const char *s, char *buf, size_t len);

/* The @len for printable() that holds any string of @n bytes. */
#define PRINTABLE_LEN(n) (4 * (n) + 1)

/* fputs() of printable(@s), however long @s is. */
void fputs_printable(const char *s, FILE *f);

/*
 * Parses "64", "64K", "16M", "1G" (also "16Mi", "16MiB", "64B"); returns 0,
 * -EINVAL for anything else, or -ERANGE when the value does not fit 64 bits.
 * @out is left alone on failure.
 */
MT_MUST_CHECK int parse_size(const char *s, uint64_t *out);

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
