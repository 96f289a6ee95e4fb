/* SPDX-License-Identifier: MIT */
/*
 * analysis.h - offline aggregation of an artifact's event stream: counts,
 * heap totals and peaks, leaks, per-process RSS.  Used by report (and later
 * diff/export).  Memory grows with live allocations and processes, never
 * with the file's length.
 */
#ifndef MEMTRACK_ANALYSIS_H
#define MEMTRACK_ANALYSIS_H

#include <stdbool.h>
#include <stdint.h>
#include "artifact.h"
#include "compiler.h"

struct proc_summary {
	uint32_t pid;
	uint32_t ppid;			/* 0 for the root or unknown */
	char command[64];		/* basename of the last exec'd path */
	uint64_t allocs;		/* heap allocations */
	uint64_t allocated_bytes;	/* bytes requested by them */
	uint64_t live_bytes;		/* heap bytes allocated and not freed */
	uint64_t peak_heap_bytes;	/* the most live_bytes ever was */
	uint64_t leaked_count;		/* never freed before exit/exec/end */
	uint64_t leaked_bytes;
	uint64_t rss_bytes;		/* anon + file + shmem now */
	uint64_t peak_rss_bytes;	/* the most it ever was */
	bool exited;
	int64_t exit_code;		/* -1 when killed */
	uint32_t exit_signal;
};

struct analysis {
	uint64_t events[MT_TYPE_MAX];	/* records per type */
	uint64_t unknown_events;	/* records of types this reader lacks */
	uint64_t first_ts, last_ts;	/* ns, 0 when no event */
	uint64_t alloc_count;		/* malloc + calloc + realloc + aligned */
	uint64_t total_allocated_bytes;	/* bytes those requested */
	uint64_t free_count;
	uint64_t live_bytes;		/* heap bytes allocated and not freed */
	uint64_t peak_live_bytes;
	uint64_t leaked_count, leaked_bytes;
	uint64_t tree_rss_bytes;	/* sum of live processes' RSS */
	uint64_t peak_rss_bytes;	/* peak of that sum */
	uint64_t physical_bytes, peak_physical_bytes;
	bool has_rss, has_physical;

	struct proc_summary *procs;	/* owned, nprocs of them, in first-seen order */
	unsigned nprocs;

	/* live allocations: open addressing on (pid, addr) */
	struct live_slot *slots;
	uint64_t nslots, nused;
};

void analysis_init(struct analysis *a);

/* Folds one event in.  Returns 0 or -ENOMEM. */
MT_MUST_CHECK int analysis_add(struct analysis *a, const struct mt_event *ev);

/* Closes the books at the end of the stream: what is live is leaked. */
void analysis_finish(struct analysis *a);

/* Frees what analysis_init/_add allocated. */
void analysis_release(struct analysis *a);

#endif /* MEMTRACK_ANALYSIS_H */
