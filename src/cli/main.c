// SPDX-License-Identifier: MIT
/* main.c - argv -> subcommand. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: memtrack track [options] [-o FILE] -- CMD [ARGS...]\n"
		"       memtrack track [options] [-o FILE] \"SHELL COMMAND\"\n"
		"       memtrack dump FILE\n"
		"       memtrack report FILE [--json] [--html OUT.html] [--svg OUT.svg] [--per-process]\n"
		"                            [--between MARK_A MARK_B] [--top N]\n"
		"       memtrack flamegraph FILE -o OUT.svg [--metric peak|allocations|allocated|leaked] [--folded]\n"
		"       memtrack diff BASE NEW [--json] [--fail-above PCT] [--metric NAME]...\n"
		"       memtrack export --format=perfetto|csv|pprof FILE -o OUT\n"
		"       memtrack ctl PATH enable|disable|ping|mark NAME\n"
		"       memtrack --version\n"
		"Run `memtrack track --help` for the options of track.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "track"))
		return cmd_track(argc - 1, argv + 1);
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
		printf("memtrack %s\n", MT_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	die_msg("unknown command '%s'; use track, dump, report, flamegraph, diff, export or ctl (see memtrack --help)",
		argv[1]);
	return 2;
}
