/* SPDX-License-Identifier: MIT */
/*
 * report_top.h - `memtrack report --top N`: the N functions (functions.h)
 * and call sites (whole stacks) with the most peak-heap bytes, allocations,
 * allocated, leaked and temporary allocations, functions with their
 * heaviest callers, sites with their symbolized stacks, and the truncated
 * stacks by object.
 */
#ifndef MEMTRACK_REPORT_TOP_H
#define MEMTRACK_REPORT_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include "analyze/analysis.h"
#include "analyze/callsites.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"

struct top_opts {
	size_t n;      /* entries per ranking */
	bool json;     /* JSON: both the sites and the functions */
	bool by_stack; /* text: --by stack ranks whole stacks, else functions (functions.h) */
};

/*
 * Prints the rankings to stdout: text (functions, or with by_stack the
 * whole-stack sites and leak ages, then the truncated stacks), or (json)
 * the value of the report's "top" key (sites) followed by
 * ,"truncated_stacks":{...},"functions":{...}.  Returns 0 or -ENOMEM.
 */
int report_top_print(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		     const struct top_opts *o);

/*
 * The plain text report's brief: the o->n functions (or sites, by_stack)
 * with the most peak-heap bytes (a run that recorded stacks).  Returns 0
 * or -ENOMEM.
 */
int report_top_print_peak(const struct analysis *a, const struct stack_table *st,
			  struct symbolizer *sym, const struct top_opts *o);

/* What ranking @m shows, in words: "allocated bytes" (report --top and diff --top headings). */
const char *site_metric_title(enum site_metric m);

/*
 * The symbolizer of report --top, flamegraph and export --format=pprof: the
 * defaults, and one warning on stderr per binary it refuses to open (a
 * FIFO, a device... where the recording had a binary; the first 10, then
 * one line for the rest).  NULL with errno set.
 */
struct symbolizer *cli_symbolizer_new(void);

#endif /* MEMTRACK_REPORT_TOP_H */
