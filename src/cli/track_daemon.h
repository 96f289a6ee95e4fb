/* SPDX-License-Identifier: MIT */
/*
 * track_daemon.h - whether `track` and `attach` record through the daemon
 * (daemon/client.h), and the part of such a run the two share: the
 * artifact opened by the user, the session run by the daemon.
 *
 * The choice: --no-daemon records in-process (root); --daemon[=PATH] goes
 * through the daemon at PATH (default /run/memtrack/daemon.sock) or fails;
 * neither uses the default socket when it exists and otherwise records
 * in-process as today.  An option the daemon cannot serve (--physical,
 * --control, --fast ...) makes the default in-process, and --daemon an
 * error naming it.
 *
 * THREAD NOTES: main only.
 */
#ifndef MEMTRACK_TRACK_DAEMON_H
#define MEMTRACK_TRACK_DAEMON_H

#include <stdbool.h>
#include "daemon/client.h"

struct daemon_choice {
	int mode;	  /* 1: --daemon, -1: --no-daemon, 0: neither */
	const char *path; /* --daemon=PATH, else NULL: the default socket */
};

/* --daemon[=PATH] into @dc.  Returns 0 or 2 (an empty PATH, reported). */
int track_daemon_opt(const char *path, struct daemon_choice *dc);

/* The first option of @so that the daemon cannot serve (track's and attach's), or NULL. */
const char *daemon_unsupported(const struct session_opts *so);

/*
 * The daemon's socket, connected, for a run whose first option the
 * daemon cannot serve is @unsupported (NULL: none).  Returns the fd, -1
 * for the in-process path, or -2 after one line (exit 1).
 */
int daemon_pick(const struct daemon_choice *dc, const char *unsupported, bool verbose);

/*
 * Records through the daemon on @sock (owned): the artifact @output made
 * as today (track_output.h), the session run by the daemon (attach when
 * so->attach_pid).  @started (attach, may be NULL) is called once
 * recording runs.  Returns 0 with @res to report, *@output naming where
 * the artifact is, or an exit status after one line.
 */
int daemon_record(struct session_opts *so, const char **output, int sock,
		  void (*started)(void *ctx, unsigned procs), void *ctx, struct client_result *res);

#endif /* MEMTRACK_TRACK_DAEMON_H */
