// SPDX-License-Identifier: MIT
/* top_cmd.c - top -- CMD: the track child top follows; see top_cmd.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/top_cmd.h"

/* In the child: the process group, the fds, then memtrack track itself. */
static void exec_track(char **cmd, const char *artifact, int log)
{
	int argc = 0, null = open("/dev/null", O_RDONLY);
	char **argv;

	while (cmd[argc])
		argc++;
	argv = calloc(argc + 7, sizeof(*argv));
	if (!argv || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(log, STDOUT_FILENO) < 0 ||
	    dup2(log, STDERR_FILENO) < 0)
		_exit(127);
	setpgid(0, 0); /* Ctrl-C at the terminal is top's to handle */
	argv[0] = "memtrack";
	argv[1] = "track";
	argv[2] = "-q";
	argv[3] = "-o";
	argv[4] = (char *)artifact;
	argv[5] = "--";
	memcpy(argv + 6, cmd, (argc + 1) * sizeof(*argv));
	execv("/proc/self/exe", argv);
	fprintf(stderr, "memtrack: cannot run memtrack track: %s\n", strerror(errno));
	_exit(127);
}

int top_track_start(struct top_track *tt, char **cmd, const char *artifact)
{
	int log;

	memset(tt, 0, sizeof(*tt));
	tt->artifact = artifact;
	if (snprintf(tt->log, sizeof(tt->log), "%s.log", artifact) >= (int)sizeof(tt->log)) {
		die_msg("invalid output path '%s'; give a shorter -o", artifact);
		return 1;
	}
	log = output_open(tt->log, "-o");
	if (log < 0)
		return 1; /* said why */
	fflush(NULL);
	tt->pid = fork();
	if (tt->pid < 0) {
		die_msg("cannot start memtrack track: %s", strerror(errno));
		close(log);
		return 1;
	}
	if (!tt->pid)
		exec_track(cmd, artifact, log);
	close(log);
	setpgid(tt->pid, tt->pid); /* both sides: no race with the child's own */
	return 0;
}

bool top_track_exited(struct top_track *tt)
{
	if (!tt->pid || tt->reaped)
		return tt->reaped;
	if (waitpid(tt->pid, &tt->status, WNOHANG) == tt->pid)
		tt->reaped = true;
	return tt->reaped;
}

int top_track_finish(struct top_track *tt, bool stop)
{
	int st;

	if (!tt->reaped && stop)
		kill(tt->pid, SIGINT);
	while (!tt->reaped) {
		if (waitpid(tt->pid, &tt->status, 0) == tt->pid)
			tt->reaped = true;
		else if (errno != EINTR)
			break;
	}
	st = tt->status;
	if (!tt->reaped || !WIFEXITED(st) || (WEXITSTATUS(st) && access(tt->artifact, F_OK))) {
		die_msg("memtrack track failed; its messages are in %s", tt->log);
		return 1;
	}
	die_msg("wrote %s (the command's output: %s; memtrack report %s for the whole report)",
		tt->artifact, tt->log, tt->artifact);
	return WEXITSTATUS(st);
}
