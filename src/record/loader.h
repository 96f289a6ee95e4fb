/* SPDX-License-Identifier: MIT */
/*
 * loader.h - open, configure, load and attach the BPF side.
 */
#ifndef MEMTRACK_LOADER_H
#define MEMTRACK_LOADER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "event.h"

struct memtrack_bpf;

struct loader_opts {
	uint64_t ring_bytes;	/* ring buffer size, a power of two >= page size */
	uint64_t wakeup_bytes;	/* wake the poller at this much unread data */
	bool allocators;	/* load the allocator uprobes */
	bool physical;		/* count the tree's physical pages (may be turned off) */
	bool verbose;		/* let libbpf's debug output through */
};

/*
 * Opens, configures and loads the skeleton and attaches the tracepoints
 * (not the uprobes: those are per process, see probes.c).  When the
 * physical-page programs cannot be loaded or attached, says so on stderr,
 * clears o->physical and goes on without them.  Only BTF raw
 * tracepoints are used, so tracefs need not be mounted.  On failure returns
 * NULL and writes a one-line
 * reason naming the fix into @err.
 */
struct memtrack_bpf *loader_open(struct loader_opts *o, char *err, size_t errlen);

/* Adds @pid (the root of the tree) to the tracked set. */
int loader_track_root(struct memtrack_bpf *skel, pid_t pid);

/* Leaves the future children of @pid (another memtrack) out of the tree. */
int loader_untrack_children(struct memtrack_bpf *skel, pid_t pid);

/*
 * Resumes @pid, parked by the BPF side (SIGCONT), and forgets it.  The
 * signal goes first: should memtrack die in between, the BPF side still
 * sees the entry and resumes the process once more (harmless).
 */
void loader_resume(struct memtrack_bpf *skel, pid_t pid);

/*
 * Stops parking new processes and resumes every process still parked, so
 * nothing depends on memtrack any more.  Called as memtrack finishes; when
 * memtrack is killed, the BPF side does the same (proc.bpf.c handle_exit).
 * Returns the number of processes resumed.
 */
int loader_stop_parking(struct memtrack_bpf *skel);

/* Returns true while some process of the tree is alive. */
bool loader_tree_alive(struct memtrack_bpf *skel);

/* Sums the per-CPU drop counters into @drops[MT_DROP_SLOTS]. */
int loader_read_drops(struct memtrack_bpf *skel, uint64_t drops[MT_DROP_SLOTS]);

/* Detaches and unloads everything (NULL is fine). */
void loader_close(struct memtrack_bpf *skel);

#endif /* MEMTRACK_LOADER_H */
