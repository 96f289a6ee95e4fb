/* SPDX-License-Identifier: MIT */
/*
 * timeline.h - memory over time, for `report --html` and `--svg`.
 *
 * Fed by the analysis observer, a timeline keeps each series (tree heap,
 * RSS anon/file/shmem and their sum, physical, heap + mapped memory; with per_process the heap and
 * RSS of the first TL_MAX_PROCS processes) as TL_BUCKETS time buckets of
 * (min, max, last value).  When the recording outgrows the buckets, their
 * width doubles and neighbours merge: min of mins, max of maxes.  Memory is
 * therefore fixed, and no value a series ever held is lost: a peak lasting
 * one event is the max of its bucket, then of its pixel column.
 */
#ifndef MEMTRACK_TIMELINE_H
#define MEMTRACK_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "analyze/analysis.h"

#define TL_BUCKETS 4096
#define TL_MAX_PROCS 100  /* per-process series kept for the first ones */
#define TL_MAX_MARKS 2000 /* fork/exec/exit marks drawn */

enum tl_series_id {
	TL_HEAP,
	TL_RSS,
	TL_ANON,
	TL_FILE,
	TL_SHMEM,
	TL_PHYSICAL,
	TL_MEMORY, /* heap + mapped memory (tree): drawn over the heap, the band between is mapped */
	TL_NSERIES,
};

struct timeline;

/* A fork, exec or exit, drawn as a mark on the time axis. */
enum tl_mark_kind { TL_FORK, TL_EXEC, TL_EXIT };

struct tl_mark {
	uint64_t ts; /* ns */
	uint32_t pid;
	uint32_t other; /* fork: child; exit: signal */
	int64_t code;	/* exit code */
	enum tl_mark_kind kind;
	char path[64]; /* exec: the path's tail */
};


/* One pixel column of a series (what the picture draws). */
struct tl_column {
	bool valid;	 /* the series existed during the column */
	uint64_t lo, hi; /* bytes: least and most it held */
	uint64_t last;	 /* bytes at the column's end */
};

/*
 * A timeline whose time 0 is @start_ns (the header's), or NULL with errno
 * set.  @per_process: also keep per-process series.  Free with
 * timeline__free() (NULL is fine).
 */
struct timeline *timeline__new(uint64_t start_ns, bool per_process);
void timeline__free(struct timeline *tl);

/* Makes @a feed @tl: sets a->observer and keeps @a (borrowed) to read its state. */
void timeline_attach(struct timeline *tl, struct analysis *a);

void timeline_observe(void *ctx, const struct mt_event *ev, const struct proc_summary *p);

/* Extends every series to @end_ns (end of the recording); call once, before rendering. */
void timeline_finish(struct timeline *tl, uint64_t end_ns);

/*
 * Downsamples series @id (of process index @proc, or the tree when @proc
 * is -1) into @ncols pixel columns spanning 0..timeline_span_ns(): each
 * column's lo/hi are the min/max over the buckets that overlap its time
 * range (a bucket straddling two columns counts in both).  Returns 0, or -ENOENT
 * when the process has no series.
 */
int timeline_columns(const struct timeline *tl, int proc, enum tl_series_id id, unsigned ncols,
		     struct tl_column *out);

/* Time 0 of the timeline (CLOCK_MONOTONIC ns). */
uint64_t timeline_start_ns(const struct timeline *tl);

/* The marks kept (the first TL_MAX_MARKS); @total: how many there were. */
unsigned timeline_marks(const struct timeline *tl, const struct tl_mark **marks, uint64_t *total);

/* The time the columns span, ns (>= the recording's duration). */
uint64_t timeline_span_ns(const struct timeline *tl);

struct timeline_meta {
	const char *command;	  /* the recorded command line */
	const struct analysis *a; /* finished analysis (peaks, processes) */
	bool physical;		  /* physical was recorded */
	bool per_process;	  /* draw per-process lines */
};

/*
 * Writes the picture as a standalone SVG document.  Returns 0 or -ENOMEM;
 * write errors are left in ferror(@out).
 */
int timeline_write_svg(const struct timeline *tl, const struct timeline_meta *m, FILE *out);

/*
 * Writes the timeline's part of an HTML page (report_html.c's): the SVG
 * inline (id "timeline"), the hover tip (a div, id "tip", for <body>) and
 * the script that fills it; page.html#t=SECONDS opens with the values at
 * that time shown.  Returns 0 or -ENOMEM; write errors are left in
 * ferror(@out).
 */
int timeline_write_html_section(const struct timeline *tl, const struct timeline_meta *m,
				FILE *out);

#endif /* MEMTRACK_TIMELINE_H */
