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
 * Parses "64", "64K", "16M", "1G" (also "16Mi", "16MiB", "64B"); returns 0,
 * -EINVAL for anything else, or -ERANGE when the value does not fit 64 bits.
 * @out is left alone on failure.
 */
MT_MUST_CHECK int parse_size(const char *s, uint64_t *out);

#endif /* MEMTRACK_CLI_H */
