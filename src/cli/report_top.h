/* SPDX-License-Identifier: MIT */
/*
 * report_top.h - `memtrack report --top N`: the N call sites with the most
 * peak-heap bytes, allocations, allocated bytes and leaked bytes, each with
 * its symbolized stack, and the truncated stacks by object.
 */
#ifndef MEMTRACK_REPORT_TOP_H
#define MEMTRACK_REPORT_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include "analyze/analysis.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"

/*
 * Prints the four rankings to stdout: text, or (@json) the value of the
 * report's "top" key followed by ,"truncated_stacks":{...}.  Returns 0 or
 * -ENOMEM.
 */
int report_top_print(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		     size_t n, bool json);

/*
 * The plain text report's brief: the @n call sites with the most peak-heap
 * bytes (a run that recorded stacks).  Returns 0 or -ENOMEM.
 */
int report_top_print_peak(const struct analysis *a, const struct stack_table *st,
			  struct symbolizer *sym, size_t n);

/*
 * The symbolizer of report --top, flamegraph and export --format=pprof: the
 * defaults, and one warning on stderr per binary it refuses to open (a
 * FIFO, a device... where the recording had a binary; the first 10, then
 * one line for the rest).  NULL with errno set.
 */
struct symbolizer *cli_symbolizer_new(void);

#endif /* MEMTRACK_REPORT_TOP_H */
