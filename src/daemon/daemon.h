/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - `memtrack daemon`: a resident recorder that serves sessions
 * to clients on a Unix socket (proto.h), each on a BPF side loaded before
 * it was asked for (pool.h), each checked (serve.h).
 *
 * The socket: the path given (default MTD_DEFAULT_SOCKET, its directory
 * made 0755), mode 0666 (every request is authenticated by SO_PEERCRED),
 * or the one systemd passes (LISTEN_FDS, memtrack.socket).  A stale socket
 * (nobody listening) is replaced; a live one is refused.  SIGTERM or
 * SIGINT stops it: no new connection, every session ended and its artifact
 * finished, every slot unloaded (links and programs gone), the socket
 * removed, exit 0; it may be started again at once.
 *
 * Limits (a client cannot exhaust the daemon for the others):
 * DAEMON_MAX_CONNS connections at once, DAEMON_MAX_PER_UID of one uid;
 * beyond them a connection is refused with a line and closed.
 *
 * THREAD NOTES: daemon_run() is main's: it blocks SIGINT, SIGTERM and
 * SIGHUP for every thread (read through a signalfd) and ignores SIGPIPE;
 * each connection is served on a thread of its own (serve.h).
 */
#ifndef MEMTRACK_DAEMON_DAEMON_H
#define MEMTRACK_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#define DAEMON_MAX_CONNS 64
#define DAEMON_MAX_PER_UID 16

struct kernel_features;

struct daemon_opts {
	const char *socket; /* the socket's path (NULL: MTD_DEFAULT_SOCKET) */
	bool verbose;	    /* a line a session on stderr */
};

/*
 * Runs the daemon until SIGTERM or SIGINT on the kernel @kf describes
 * (borrowed).  Returns 0 after a clean stop, or -errno with one line in
 * @err (nothing left behind).
 */
int daemon_run(const struct daemon_opts *o, const struct kernel_features *kf, char *err,
	       size_t errlen);

#endif /* MEMTRACK_DAEMON_DAEMON_H */
