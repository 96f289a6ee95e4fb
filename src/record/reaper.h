/* SPDX-License-Identifier: MIT */
/*
 * reaper.h - pays the kernel's grace periods outside memtrack.
 *
 * The last close of a uprobe-multi link, and of the BPF objects, waits for
 * RCU grace periods: ~10-50 ms here, per close or per overlapping group.
 * memtrack never needs to wait for them: a link of an exited process is
 * inert, and at the end the artifact is complete and the command's status
 * known.  So a small helper process, the reaper (a fork of memtrack), holds
 * a reference to every fd memtrack lets go of and makes the last close
 * itself; memtrack's own close is then a reference drop.
 *
 * Protocol (one SOCK_SEQPACKET socketpair): fds travel with SCM_RIGHTS; a
 * message "c" means that memtrack has closed its copies of everything sent
 * so far, so the reaper may close them now; the end of the socket (memtrack
 * has exited) means the same for everything.  A message "d" carries two
 * directory fds and two names (reaper_remove_at_end): what the reaper
 * removes at its end, so that a SIGKILLed memtrack leaves no socket behind.
 * A message "p" carries the BPF maps `parked` and `session`
 * (reaper_resume_at_end): at its end the reaper resumes what is parked, where
 * the kernel cannot do it at memtrack's exit.  Whoever closes last pays, so
 * the reaper never closes an fd before memtrack has let go of it.
 *
 * THREAD NOTES: reaper__new() forks, so it is called before memtrack starts
 * any thread; reaper_hand() is safe from any thread (one mutex, no
 * blocking); reaper_hand_all() and reaper__free() are main's, at the end.
 */
#ifndef MEMTRACK_REAPER_H
#define MEMTRACK_REAPER_H

#include <sys/types.h>
#include "compiler.h"

struct reaper;

/*
 * Forks the reaper.  Returns its handle, owned by the caller
 * (reaper__free), or NULL with errno set: memtrack then makes its last
 * closes itself and waits for their grace periods.
 */
struct reaper *reaper__new(void);

/* The reaper's pid (its socket's peer), or 0 (NULL, or unknown). */
pid_t reaper_pid(const struct reaper *r);

/*
 * Hands @fds[0..@n) to the reaper and closes them here.  Returns how many
 * it handed (and closed), from the first; the caller closes the rest
 * itself (the reaper is gone, or its socket is full).  @r may be NULL
 * (returns 0).
 */
MT_MUST_CHECK unsigned reaper_hand(struct reaper *r, const int *fds, unsigned n);

/*
 * At the end: hands the reaper a reference to every fd above stderr, which
 * it closes once memtrack has exited.  memtrack's own closes that follow
 * (links, the BPF objects) are then reference drops.  @r may be NULL.
 * Returns the number of fds handed.
 */
unsigned reaper_hand_all(struct reaper *r);

/*
 * Makes the reaper remove, once memtrack has exited (killed or not), the
 * socket @sock in the directory @dir_fd, then that directory, the entry
 * @name of @parent_fd (see reaper_remove_dir).  The reaper takes copies of
 * both fds (borrowed here).  @r may be NULL.  Returns 0 or -errno.
 */
int reaper_remove_at_end(struct reaper *r, int parent_fd, int dir_fd, const char *name,
			 const char *sock);

/*
 * Makes the reaper, once memtrack has exited (killed or not), stop the BPF
 * side's parking and resume every process left in the `parked` map
 * (@parked_fd; @session_fd: the `session` map), where the kernel's BPF
 * side cannot (no bpf_send_signal_task: kernel/kernel_features.h).  The
 * reaper takes copies of both fds (borrowed here).  Returns 0 or -errno
 * (-ENOTCONN: no reaper).
 */
MT_MUST_CHECK int reaper_resume_at_end(struct reaper *r, int parked_fd, int session_fd);

/*
 * Removes the socket @sock of @dir_fd, then the directory @name of
 * @parent_fd if it still is @dir_fd's.  Follows nothing (unlinkat) and
 * removes nothing else: not a @sock that is no socket, not a directory of
 * that name that is another one.  Allocates nothing (the reaper calls
 * it).  Returns 0 or -errno (-ENOENT: removed already).
 */
int reaper_remove_dir(int parent_fd, int dir_fd, const char *name, const char *sock);

/*
 * Closes memtrack's end of the socket, which tells the reaper that
 * memtrack holds nothing any more: called after memtrack's last close.
 * Accepts NULL.
 */
void reaper__free(struct reaper *r);

#endif
