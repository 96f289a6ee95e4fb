/* SPDX-License-Identifier: MIT */
/*
 * load.h - reads a whole artifact through the analysis: what diff, export
 * and the timeline start from.
 */
#ifndef MEMTRACK_LOAD_H
#define MEMTRACK_LOAD_H

#include "analyze/analysis.h"
#include "analyze/filter.h"
#include "format/artifact.h"
#include "analyze/stacks.h"

struct loaded {
	struct analysis a;	   /* finished: leaks counted */
	struct mt_header hdr;	   /* copy of the file's header */
	struct mt_trailer trailer; /* valid when has_trailer */
	bool has_trailer;
	bool truncated;	 /* the file ends before its trailer */
	bool physical;	 /* physical was recorded (maybe no change seen) */
	char error[256]; /* what went wrong, "" if nothing */
};

/* What a caller sees while the file is read; any member may be NULL. */
struct load_hooks {
	void (*header)(void *ctx, const struct mt_header *h); /* before the first event */
	analysis_observer *observer;			      /* after each event */
	void *ctx;
	struct proc_filter *filter; /* --pid/--comm: only their records are read (borrowed) */
};

/*
 * Reads @path to its end, feeding every event to l->a, calling @hooks (NULL:
 * none) on the way.  A
 * truncated file is not an error (l->truncated says so).  Returns 0, or
 * -errno with l->error saying what (unreadable, corrupt, out of memory).
 * The caller releases l->a with analysis_release() in every case.
 */
int load_artifact(const char *path, struct loaded *l, const struct load_hooks *hooks);

/*
 * load_artifact() that also fills @st (initialised by the caller, released
 * by the caller in every case) from the object, mapping and stack records;
 * @filter (NULL: none, borrowed) as in load_hooks.
 */
int load_artifact_stacks(const char *path, struct loaded *l, struct stack_table *st,
			 struct proc_filter *filter);

/* End of the recording in ns after header start_ns. */
uint64_t loaded_duration_ns(const struct loaded *l);

#endif /* MEMTRACK_LOAD_H */
