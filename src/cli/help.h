/* SPDX-License-Identifier: MIT */
/*
 * help.h - the help text of every command, in one table (help.c): shown by
 * `memtrack help [COMMAND]`, `memtrack COMMAND --help` and `memtrack
 * --help`, always on stdout with exit status 0.  Usage errors say "see
 * memtrack help COMMAND" instead of repeating it.
 */
#ifndef MEMTRACK_HELP_H
#define MEMTRACK_HELP_H

#include <stdbool.h>
#include <stdio.h>

/* "--help" or "-h". */
bool is_help_arg(const char *arg);

/*
 * Whether argv[1..argc-1] asks for help: a "--help" or "-h" before any
 * "--".  For commands whose arguments are files and option values only
 * (dump, report, diff, export, flamegraph, top); not for track and ctl,
 * whose arguments include another program's.
 */
bool help_wanted(int argc, char **argv);

/* Whether @name is a command that has help (the commands main.c runs). */
bool help_has(const char *name);

/*
 * The command @name is most likely a typo of ("track" for "trak", "tarck"):
 * the nearest by edit distance (insertions, deletions, substitutions and
 * swaps of neighbours), at most 2 edits away and fewer than @name's length;
 * NULL when none is that near.
 */
const char *help_closest(const char *name);

/* The help of @name (NULL: the list of commands) on @out; -ENOENT if unknown. */
int help_print(FILE *out, const char *name);

/*
 * The help of @name (NULL: the list of commands) on stdout.  Returns the
 * exit status: 0, 1 (after one line) when stdout could not be written, 2
 * (after one line) when @name is no command.
 */
int help_show(const char *name);

#endif /* MEMTRACK_HELP_H */
