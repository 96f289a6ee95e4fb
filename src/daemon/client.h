/* SPDX-License-Identifier: MIT */
/*
 * client.h - `memtrack track` and `memtrack attach` as clients of the
 * daemon (proto.h has the messages): the client opens the artifact (its
 * user's file) and passes the fd, forks the command itself, as its user
 * with its environment, parked before the exec until the daemon has
 * tracked it, waits for it as its parent, and tells the daemon.
 *
 * Guarantees, as without the daemon: nothing the command allocates is
 * missed (it execs only after GO, and its exec parks it until its probes
 * are in); a client that dies leaves nothing stopped (the daemon ends its
 * session: parking off, every parked process resumed); a daemon that dies
 * is reported (the artifact holds what was recorded, without a trailer),
 * and the command runs on and is waited for.
 *
 * THREAD NOTES: main only; client_track() and client_attach() install
 * handlers of SIGINT, SIGTERM, SIGHUP and SIGCHLD for their duration.
 */
#ifndef MEMTRACK_DAEMON_CLIENT_H
#define MEMTRACK_DAEMON_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include "format/artifact.h"
#include "record/session.h"

/* Connects to the daemon's socket @path.  Returns the fd or -errno (-ENOENT: no socket). */
int client_connect(const char *path);

/* What the daemon reported at the end, for the CLI's summary and exit status. */
struct client_result {
	struct session_stats st;
	struct mt_trailer t;
	int finish_err; /* the daemon's error finishing the artifact, 0 if none */
	bool lost;	/* the daemon died: the artifact has no trailer */
	int exec_err;	/* the command could not exec: -errno, nothing recorded */
};

/*
 * Records @so->argv through the daemon on @sock (owned: closed here) into
 * @out_fd (borrowed; the daemon gets a copy).  @placed is called once the
 * command runs (the CLI renames its artifact into place).  Returns 0 with
 * @res filled, or -1 after a one-line message through so->notice (nothing
 * ran; the caller discards the artifact).
 */
int client_track(int sock, const struct session_opts *so, int out_fd, void (*placed)(void *ctx),
		 void *ctx, struct client_result *res);

/*
 * Records the running so->attach_pid through the daemon on @sock (owned)
 * into @out_fd.  @started is called once recording runs (with the number
 * of processes found).  Returns 0 with @res filled, or -1 after a message.
 */
int client_attach(int sock, const struct session_opts *so, int out_fd,
		  void (*started)(void *ctx, unsigned procs), void *ctx, struct client_result *res);

#endif /* MEMTRACK_DAEMON_CLIENT_H */
