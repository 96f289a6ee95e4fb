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
 * Empties the tracked set, so BPF neither records nor parks any process
 * from now on, and sends SIGCONT to each process it removes (one parked
 * after the poller stopped would otherwise stay stopped).  Returns how many
 * it removed.
 */
int loader_untrack_all(struct memtrack_bpf *skel);

/* Returns true while some process of the tree is alive. */
bool loader_tree_alive(struct memtrack_bpf *skel);

/* Sums the per-CPU drop counters into @drops[MT_DROP_SLOTS]. */
int loader_read_drops(struct memtrack_bpf *skel, uint64_t drops[MT_DROP_SLOTS]);

/* Detaches and unloads everything (NULL is fine). */
void loader_close(struct memtrack_bpf *skel);

#endif /* MEMTRACK_LOADER_H */
