/* SPDX-License-Identifier: MIT */
/*
 * control.h - the control socket of `memtrack track --control PATH`.
 *
 * A Unix stream socket that takes one client at a time; each command is one
 * line and gets one line back, "ok" or "error <reason>", only once it has
 * taken effect (docs/CONTROL.md is the protocol):
 *   enable      heap recording on; an `enable` record
 *   disable     heap recording off; a `disable` record; once "ok" is sent,
 *               no allocator call that returns later is recorded
 *   ping        nothing; "ok"
 *   mark NAME   a `mark` record named NAME (1 to MT_PATH_MAX - 1 bytes)
 * A second client gets "error busy ..." and is closed; the session goes on.
 * A client that sends no complete line within 3 s of connecting, or of the
 * first byte of a line once answered, is disconnected (the slot is freed).
 *
 * THREAD NOTES: main calls control__new() before the poller starts and
 * control__free() after pipeline__stop(); control_handle() runs on the
 * poller thread only (pipeline__watch_fd), so it may inject records.
 */
#ifndef MEMTRACK_CONTROL_H
#define MEMTRACK_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

struct pipeline;
struct control;
struct heap_switch;

struct control_opts {
	const char *path;		 /* where the socket is made (must not exist) */
	struct heap_switch *heap_switch; /* borrowed (heap_switch.h), NULL for none */
	struct pipeline *pipe;		 /* where records go (borrowed), or set later */
	/* a client went away mid-command, sent garbage...: one line, no "\n" */
	void (*notice)(void *ctx, const char *msg);
	void *notice_ctx;
};

/*
 * Creates, binds (mode 0600) and listens on o->path.  Under sudo the
 * directory is opened and the socket bound by the invoking user
 * (as_user.h): the socket is theirs, and a path they could not have made
 * is refused.  Returns NULL with a one-line reason naming the fix in @err;
 * nothing is left on disk then.  Before any thread exists or not, either
 * is fine (the bind runs in a child, memtrack's umask is untouched).
 * The caller frees the result with control__free().
 */
struct control *control__new(const struct control_opts *o, char *err, size_t errlen);

/* Sets where records go (borrowed); before the first control_handle(). */
void control__set_pipeline(struct control *c, struct pipeline *pipe);

/*
 * The heap-recording switch `enable` and `disable` flip (heap_switch.h:
 * the BPF side's flag and the libraries' page; borrowed), once it exists;
 * main, before the poller serves the socket.
 */
void control__set_switch(struct control *c, struct heap_switch *sw);

/* The fd to wait on (an epoll set of the socket and its client). */
int control__fd(const struct control *c);

/* Poller thread: accepts, reads and answers what is pending.  @c is a struct control. */
void control_handle(void *c);

/*
 * Writes the record of a state change made outside the socket (the
 * --start-disabled `disable` at start).  Poller thread, or before it starts.
 */
int control_record(struct control *c, __u16 type, __u32 pid);

/*
 * Closes the socket and its client and removes the file, as the invoking
 * user, if the name still is the socket it bound (NULL is fine).
 */
void control__free(struct control *c);

#endif /* MEMTRACK_CONTROL_H */
