// SPDX-License-Identifier: MIT
/*
 * cmd_daemon.c - `memtrack daemon [--socket PATH] [-v]`: the resident
 * recorder (daemon/daemon.h) that `memtrack track` and `memtrack attach`
 * use as clients, so users record their own programs without root and a
 * short command pays no load.
 *
 * THREAD NOTES: main runs this file; daemon_run() starts the threads.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/help.h"
#include "cli/track_output.h"
#include "daemon/daemon.h"
#include "kernel/kernel_features.h"
#include "record/session.h"

static const struct option daemon_options[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

int cmd_daemon(int argc, char **argv)
{
	struct daemon_opts o = { 0 };
	struct kernel_features kf;
	struct session_opts so = { .allocators = true };
	char err[512] = "";
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "vh", daemon_options, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg) {
				die_msg("empty --socket path; give the socket's path, e.g. --socket /run/memtrack/daemon.sock");
				return 2;
			}
			o.socket = optarg;
			break;
		case 'v': o.verbose = true; break;
		case 'h': return help_show("daemon");
		default:
			die_msg("unknown option '%s'; see memtrack help daemon", argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc) {
		die_msg("unexpected argument '%s'; usage: memtrack daemon [--socket PATH] [-v]",
			argv[optind]);
		return 2;
	}
	if (check_recording_host(&kf, &so))
		return 1;
	ret = daemon_run(&o, &kf, err, sizeof(err));
	if (ret) {
		die_msg("%s", err);
		return 1;
	}
	return 0;
}
