/* SPDX-License-Identifier: MIT */
/*
 * top_cmd.h - `memtrack top [options] -- CMD [ARGS...]`: top starts
 * `memtrack track -q -o FILE -- CMD` itself and follows FILE, so one
 * terminal runs and watches.  The command's (and track's) output goes to
 * FILE.log, not over the view; track runs in a process group of its own,
 * so Ctrl-C reaches top, which then stops track as Ctrl-C would (SIGINT:
 * track forwards it to the command and finishes the artifact).
 */
#ifndef MEMTRACK_TOP_CMD_H
#define MEMTRACK_TOP_CMD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct top_track {
	pid_t pid;	      /* the track child; 0: none (top FILE) */
	char log[PATH_MAX];   /* where its output goes */
	const char *artifact; /* the -o it writes (borrowed) */
	int status;	      /* its wait status, once reaped */
	bool reaped;
};

/*
 * Starts memtrack track on @cmd (NULL-terminated, borrowed) writing
 * @artifact, its stdin /dev/null and its stdout and stderr @artifact.log.
 * Returns 0, or 1 after one line.
 */
int top_track_start(struct top_track *tt, char **cmd, const char *artifact);

/* Whether the track child has exited (reaped then: tt->status). */
bool top_track_exited(struct top_track *tt);

/*
 * Ends the run: @stop (the user quit first) sends track SIGINT; waits for
 * it, says where the artifact and the output are, and returns top's exit
 * status: track's (the command's), or 1 when track failed.
 */
int top_track_finish(struct top_track *tt, bool stop);

#endif /* MEMTRACK_TOP_CMD_H */
