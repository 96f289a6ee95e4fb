/* SPDX-License-Identifier: MIT */
/*
 * adopt.h - `memtrack attach`: a process tree that is already running,
 * found in /proc, put in the tracked set and given its probes, without
 * stopping it.
 *
 * The tree is the root and every process whose parent chain (/proc/PID/stat
 * ppid) leads to it, minus memtrack's own processes and any other memtrack
 * (another session's tree is that session's), with what they started.
 * It is tracked first (loader_track_running()), so every fork, exec and
 * exit from then on goes through the BPF side like in `track` (a child
 * forked after that is parked and synced by the recorder); the walk is
 * repeated until it finds no process it has not tracked, so a child forked
 * between a walk and the tracking is not missed.  Then each process gets
 * its mapping tables (--stacks), its allocator probes and a first RSS
 * record, on the poller thread, while it runs.
 *
 * THREAD NOTES: adopt_find()/adopt_track() on main before the poller
 * starts; adopt_sync() on the poller thread (a watched fd's callback, so
 * it may inject records).  Ownership: struct adopt_tree's pids array is the
 * caller's (adopt_tree_free()).
 */
#ifndef MEMTRACK_ADOPT_H
#define MEMTRACK_ADOPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler.h"

struct authority;
struct memtrack_bpf;
struct phys_adopt;
struct pipeline;
struct probes;
struct stacks;

/* Why a pid cannot be attached (adopt_check_root), for the CLI to word. */
enum adopt_refusal {
	ADOPT_OK,
	ADOPT_NO_PROCESS, /* no such process */
	ADOPT_KERNEL,	  /* a kernel thread: no user space to probe */
	ADOPT_SELF,	  /* memtrack itself, or one of its own processes */
	ADOPT_MEMTRACK,	  /* another memtrack: its tree is that session's */
	ADOPT_ZOMBIE,	  /* exited, not yet reaped: nothing runs */
	ADOPT_NO_ACCESS,  /* its /proc/PID/maps cannot be read */
};

struct adopt_tree {
	pid_t *pids; /* the root first */
	size_t n, cap;
	pid_t *refused; /* found in the tree but not the user's to trace (authority.h) */
	size_t n_refused, cap_refused;
	pid_t changed; /* adopt_track's -EPERM: the process that stopped being the user's */
};

/*
 * Whether @pid can be attached by this memtrack (@self: memtrack's pid,
 * @reaper: its reaper's or 0).  On ADOPT_NO_ACCESS, *@err is the errno.
 */
enum adopt_refusal adopt_check_root(pid_t pid, pid_t self, pid_t reaper, int *err);

/*
 * Puts @root's live tree into @t (the root first; what @t already holds is
 * kept and not repeated), leaving out @self's and @reaper's trees and the
 * processes @auth does not let the user record (in t->refused, with their
 * descendants), and tracks each new process in @skel, checking it again
 * once tracked.  Repeats the walk until a walk finds nothing new.  Returns
 * the number of processes added, or -errno (-ESRCH: the root is gone;
 * -EPERM: t->changed stopped being the user's to trace between the walk
 * and its tracking, and nothing may be recorded).
 */
MT_MUST_CHECK int adopt_track(struct memtrack_bpf *skel, pid_t root, pid_t self, pid_t reaper,
			      const struct authority *auth, struct adopt_tree *t);

/* What adopt_sync() did, for the session's notices and figures. */
struct adopt_result {
	int err;	     /* 0, or the first failure other than a process gone (-errno) */
	pid_t err_pid;	     /* the process it concerned */
	unsigned procs;	     /* processes given their probes */
	unsigned gone;	     /* processes that exited before their turn */
	unsigned left;	     /* processes no longer the user's to trace by their turn */
	uint64_t t_first_ns; /* mono_ns() when the root's probes were in */
	uint64_t t_done_ns;  /* mono_ns() when the last process's were */
	int phys_err;	     /* --physical: 0, or why resident pages were left out (-errno) */
	pid_t phys_err_pid;  /* the process it concerned */
	uint64_t phys_bytes; /* --physical: the tree's physical memory after the marking */
	uint64_t t_phys_ns;  /* mono_ns() when it was marked */
};

/*
 * Poller thread: for each process of @t still the user's to trace (@auth:
 * checked after its reads, see sync_one), its mapping tables and MAPPING
 * records (@stacks, NULL without --stacks), its allocator probes
 * (@probes, NULL with --no-allocators) and a first RSS record read from
 * /proc/PID/status, injected into @pipe, each after a RUNNING record that
 * names the process.  Stops at the first failure that is not a process
 * gone (then the caller detaches everything).  Then, with @phys (--physical;
 * NULL without), the pages each process has resident are marked
 * (phys_adopt.h) and one PHYSICAL record of the total injected; a failure
 * there leaves the pages out (res->phys_err) and fails nothing.  Each
 * process's heap calls are recorded from when its probes are all in
 * (loader_heap_armed() on @skel).
 */
void adopt_sync(struct memtrack_bpf *skel, const struct adopt_tree *t, const struct authority *auth,
		struct probes *probes, struct stacks *stacks, struct phys_adopt *phys,
		struct pipeline *pipe, struct adopt_result *res);

void adopt_tree_free(struct adopt_tree *t);

#endif /* MEMTRACK_ADOPT_H */
