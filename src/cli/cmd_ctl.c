// SPDX-License-Identifier: MIT
/*
 * cmd_ctl.c - `memtrack ctl PATH enable|disable|ping|mark NAME`: one command
 * to the control socket of a running `memtrack track --control PATH`,
 * through libmemtrack-ctl (include/memtrack-ctl.h).  Silent on success.
 */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/help.h"
#include "memtrack-ctl.h"

#define CTL_USAGE "usage: memtrack ctl PATH enable|disable|ping|mark NAME; see memtrack help ctl"

/* Joins argv[from..] with single spaces into @line; false when too long. */
static bool join_words(char *line, size_t len, int argc, char **argv, int from)
{
	size_t used = 0;

	line[0] = '\0';
	for (int i = from; i < argc; i++) {
		int n = snprintf(line + used, len - used, "%s%s", i > from ? " " : "", argv[i]);

		if (n < 0 || (size_t)n >= len - used)
			return false;
		used += n;
	}
	return true;
}

/* argv[2..] is `enable`, `disable`, `ping` or `mark NAME...`. */
static bool is_command(int argc, char **argv)
{
	const char *cmd = argv[2];

	if (!strcmp(cmd, "mark"))
		return argc >= 4;
	return argc == 3 &&
	       (!strcmp(cmd, "enable") || !strcmp(cmd, "disable") || !strcmp(cmd, "ping"));
}

int cmd_ctl(int argc, char **argv)
{
	struct memtrack_ctl c;
	char line[512];
	int err;

	if (argc >= 2 && is_help_arg(argv[1]))
		return help_show("ctl");
	if (argc < 3 || argv[1][0] == '-') {
		die_msg(CTL_USAGE);
		return 2;
	}
	if (!is_command(argc, argv)) {
		die_msg("unknown or incomplete command '%s'; %s", argv[2], CTL_USAGE);
		return 2;
	}
	if (!join_words(line, sizeof(line), argc, argv, 2)) {
		die_msg("mark name too long; give at most 255 bytes");
		return 2;
	}
	err = memtrack_ctl_open(&c, argv[1]);
	if (!err)
		err = memtrack_ctl_command(&c, line);
	if (err)
		die_msg("%s", memtrack_ctl_error(&c));
	memtrack_ctl_close(&c);
	return err ? 1 : 0;
}
