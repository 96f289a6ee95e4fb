/* SPDX-License-Identifier: MIT */
/*
 * report_html.h - `report --html`: the whole report as one self-contained
 * page (no network, no external script, font or style).  Sections, top to
 * bottom: the summary (peaks, allocations, leaks, the top call site), the
 * timeline with hover readouts and marks (timeline_render.c), the call
 * sites (sortable, each stack expandable), the flame graph (icicle or
 * flame, search, zoom, metric switch), the leaks with their age, the
 * processes (sortable), and the run's details.  What the page shows is
 * written as one JSON object (<script id="mt-data">) that the page's own
 * script lays out; every string in it is escaped for HTML
 * (json_print_string_html), since names come from the tracked programs.
 *
 * Ownership: everything in struct report_html_in is borrowed.
 */
#ifndef MEMTRACK_REPORT_HTML_H
#define MEMTRACK_REPORT_HTML_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "analyze/analysis.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"
#include "analyze/timeline.h"

struct report_html_in {
	const char *command;		  /* the recorded command line */
	const struct analysis *a;	  /* finished */
	const struct timeline *tl;	  /* finished (timeline_finish) */
	const struct timeline_meta *meta; /* how the timeline is drawn */
	const struct stack_table *st;	  /* NULL: the run has no stacks */
	struct symbolizer *sym;		  /* with @st */
	uint64_t start_ns;		  /* the header's: time 0 */
	uint64_t duration_ns;
	uint64_t dropped;   /* events lost */
	bool attached;	    /* memtrack attach */
	bool has_exit;	    /* exit_code/exit_signal are known (trailer) */
	int exit_code;	    /* the command's */
	int exit_signal;    /* 0: none */
	bool truncated;	    /* the file ends before its trailer */
	const char *kernel; /* the release it was recorded on ("" unknown) */
};

/* Writes the page to @out.  Returns 0 or -ENOMEM; write errors are left in ferror(@out). */
int report_html_write(const struct report_html_in *in, FILE *out);

#endif /* MEMTRACK_REPORT_HTML_H */
