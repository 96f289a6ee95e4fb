// SPDX-License-Identifier: MIT
/* main.c - argv -> subcommand. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/help.h"
#include "kernel/kernel_features.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		help_print(stderr, NULL);
		return 2;
	}
	if (!strcmp(argv[1], "help"))
		return cmd_help(argc - 1, argv + 1);
	if (!strcmp(argv[1], "track"))
		return cmd_track(argc - 1, argv + 1);
	if (!strcmp(argv[1], "attach"))
		return cmd_attach(argc - 1, argv + 1);
	if (!strcmp(argv[1], "daemon"))
		return cmd_daemon(argc - 1, argv + 1);
	if (!strcmp(argv[1], "top"))
		return cmd_top(argc - 1, argv + 1);
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(argv[1], "diff"))
		return cmd_diff(argc - 1, argv + 1);
	if (!strcmp(argv[1], "export"))
		return cmd_export(argc - 1, argv + 1);
	if (!strcmp(argv[1], "flamegraph"))
		return cmd_flamegraph(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ctl"))
		return cmd_ctl(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--version")) {
		/* one line, the version first: scripts read its first word or its last line */
		printf("memtrack %s (%s)\n", MT_VERSION, MT_REQUIREMENTS);
		return 0;
	}
	if (is_help_arg(argv[1]))
		return help_show(NULL);
	if (help_closest(argv[1]))
		die_msg("unknown command '%s'; did you mean %s? (see memtrack help for the list)",
			argv[1], help_closest(argv[1]));
	else
		die_msg("unknown command '%s'; see memtrack help for the list", argv[1]);
	return 2;
}
