/* SPDX-License-Identifier: MIT */
/*
 * serve.h - one client of `memtrack daemon`: its request checked, its
 * session run on a pooled BPF side, its artifact written to the fd it
 * passed (daemon/proto.h has the messages).
 *
 * Authority: the peer's uid, gid and pid come from SO_PEERCRED, never from
 * a message, and the rule is the one `sudo memtrack attach` applies
 * (inspect/authority.h, authority_for_client()).  A track root must be the
 * peer's own child (its parent is the peer), recordable by the peer and,
 * for a peer other than root, under PR_SET_NO_NEW_PRIVS (no exec in its
 * tree gains privileges); an attach target must be recordable by the peer,
 * its tree holds only the peer's processes, and its slot is loaded for
 * that user (owner_only: a process that stops being theirs leaves the
 * recording at that exec or prctl); root may record anything.
 *
 * THREAD NOTES: serve_client() runs on a thread of its own per
 * connection (daemon.c), with every signal blocked; the session it runs
 * starts its own threads (session.h).
 */
#ifndef MEMTRACK_DAEMON_SERVE_H
#define MEMTRACK_DAEMON_SERVE_H

#include <stdbool.h>
#include <sys/socket.h>

struct pool;
struct kernel_features;
struct unwind_cache;

/* What a user other than root may ask for: the kernel memory of one session. */
#define SERVE_USER_RING_MAX (64ull << 20)
#define SERVE_USER_ROWS_MAX (4u << 20)

/* What every connection shares (the daemon's, borrowed). */
struct serve_env {
	struct pool *pool;
	const struct kernel_features *kf;
	struct unwind_cache *cache; /* the unwind tables kept across runs, NULL: none */
	int stop_fd;		    /* readable once the daemon stops: every session ends */
	bool verbose;		    /* the daemon's -v: a line a session on its stderr */
};

/* Serves the connection @sock (owned: closed here) of @peer until its session ends. */
void serve_client(const struct serve_env *env, int sock, const struct ucred *peer);

#endif /* MEMTRACK_DAEMON_SERVE_H */
