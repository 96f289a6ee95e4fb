/* SPDX-License-Identifier: MIT */
/*
 * diff.h - compares the analyses of two artifacts metric by metric, for
 * `memtrack diff`: absolute and relative change, the threshold verdict, and
 * which process of one run is which process of the other.
 */
#ifndef MEMTRACK_DIFF_H
#define MEMTRACK_DIFF_H

#include <stdbool.h>
#include <stdint.h>
#include "analyze/analysis.h"

enum diff_metric_id {
	DIFF_PEAK_HEAP,
	DIFF_ALLOCATED,
	DIFF_ALLOC_COUNT,
	DIFF_LEAKED,
	DIFF_PEAK_RSS,
	DIFF_PEAK_PHYSICAL,
	DIFF_PEAK_MAPPED,
	DIFF_PEAK_MEMORY,
	DIFF_MAPPED_COUNT,
	DIFF_LEAKED_MAPPED,
	DIFF_NMETRICS,
};

/* The name (a report --json key) of metric @id. */
const char *diff_metric_name(enum diff_metric_id id);

/* The metric named @name, or -1. */
int diff_metric_lookup(const char *name);

struct diff_value {
	bool known;	    /* recorded in both runs */
	uint64_t base, new; /* the metric in each run */
	int64_t change;	    /* new - base, saturated to INT64_MIN..INT64_MAX */
	bool pct_valid;	    /* false when base is 0 and new is not (infinite growth) */
	double pct;	    /* 100 * change / base; 0 when both are 0 */
};

/* Fills @v from the two numbers. */
void diff_value_set(struct diff_value *v, uint64_t base, uint64_t new);

/*
 * True when @v grew by more than @pct percent of its base: new > base and
 * (new - base) * 100 > pct * base.  Growth from 0 exceeds every threshold;
 * an unknown value or a shrink never does; a change of exactly pct does not.
 */
bool diff_exceeds(const struct diff_value *v, double pct);

/* Metric @id of the whole tree.  @physical: the run recorded physical. */
bool diff_tree_metric(const struct analysis *a, bool physical, enum diff_metric_id id,
		      uint64_t *out);

/* Metric @id of one process (peak_physical_bytes is tree-wide: false). */
bool diff_proc_metric(const struct analysis *a, const struct proc_summary *p,
		      enum diff_metric_id id, uint64_t *out);

/*
 * Pairs processes of @base and @new by command: the k-th process (in
 * first-seen order) running a command in @base is the k-th one running it in
 * @new.  Fills @match (base->nprocs entries) with the index in new->procs or
 * -1, and @matched_new (new->nprocs entries, may be NULL) with whether it
 * has a partner.  Returns 0 or -ENOMEM.
 */
int diff_match_procs(const struct analysis *base, const struct analysis *new, int *match,
		     bool *matched_new);

#endif /* MEMTRACK_DIFF_H */
