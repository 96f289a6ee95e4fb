/* SPDX-License-Identifier: MIT */
/*
 * retire.h - the one way memtrack lets go of an fd whose last close is slow.
 *
 * Closing the last reference to a uprobe link (or a BPF object) waits for
 * RCU grace periods: tens of ms each, on the closing thread.  memtrack never
 * waits for them where it can help it: retire_fds() takes the fds and
 * returns.  Behind it, in order:
 *  1. the reaper (reaper.h), a process that makes the last close itself,
 *     so memtrack's close is a reference drop;
 *  2. what the reaper cannot take (it is gone, or its socket is full): a
 *     queue and closer threads of this module, started on first need;
 *  3. what neither can take (no memory, no thread): closed here, in
 *     parallel, waiting.
 * The queue is bounded: a fork storm making links faster than they close
 * waits in retire_fds() (the storm's parked processes with it), so a
 * killed memtrack leaves the kernel few links to close.
 *
 * retire_fds_now() is the exception, for a link that must be gone before
 * the call returns (a link bound to a process that lives on); retire_end()
 * is the end of a recording, where every fd memtrack holds goes to the
 * reaper at once.
 *
 * THREAD NOTES: retire_fds() and retire_fds_now() are safe from any
 * thread (the poller's probes_forget(), main's probes__free()); the
 * closers block every signal (signals are main's); retire__new(),
 * retire_end() and retire__free() are main's.
 */
#ifndef MEMTRACK_RETIRE_H
#define MEMTRACK_RETIRE_H

struct reaper;
struct retire;

/*
 * Returns the retirer, or NULL with errno set.  @reaper is borrowed (NULL:
 * memtrack's own closer threads pay the grace periods).
 */
struct retire *retire__new(struct reaper *reaper);

/*
 * @fds[0..@n) are no longer the caller's: each is handed on or closed, and
 * the call returns without waiting for a grace period (unless the queue is
 * full, see above).  The array itself stays the caller's.  @r may be NULL:
 * then they are closed here, waiting.
 */
void retire_fds(struct retire *r, const int *fds, unsigned n);

/* Closes @fds[0..@n) and returns once they are closed (in parallel). */
void retire_fds_now(const int *fds, unsigned n);

/*
 * At the end of a recording: every fd memtrack holds above stderr goes to
 * the reaper, which closes it once memtrack has exited; memtrack's own
 * closes that follow (the BPF objects) are reference drops.  Returns how
 * many were handed (0 without a reaper).
 */
unsigned retire_end(struct retire *r);

/*
 * Stops the closer threads (each ends its close under way) and closes what
 * is still queued, in parallel.  Accepts NULL.
 */
void retire__free(struct retire *r);

#endif /* MEMTRACK_RETIRE_H */
