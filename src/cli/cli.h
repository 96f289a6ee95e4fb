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
#include <stdint.h>

int cmd_track(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* Prints "memtrack: <fmt>\n" to stderr. */
void die_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses "64", "64K", "16M", "1G"; returns 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *out);

#endif /* MEMTRACK_CLI_H */
