/* SPDX-License-Identifier: MIT */
/*
 * export.h - streams an artifact's memory time series to other tools' formats
 * while the analysis reads it: Perfetto / chrome://tracing (Trace Event
 * Format JSON) and CSV.  Output memory does not depend on the file's length.
 */
#ifndef MEMTRACK_EXPORT_H
#define MEMTRACK_EXPORT_H

#include <stdio.h>
#include "analyze/analysis.h"

enum export_format {
	EXPORT_PERFETTO,
	EXPORT_CSV,
};

struct exporter {
	FILE *out; /* borrowed; errors are seen by ferror() */
	enum export_format format;
	const struct analysis *a; /* the analysis feeding us (borrowed) */
	uint64_t start_ns;	  /* time 0: the header's start_ns */
	bool physical;		  /* CSV: physical_bytes column has values */
	uint64_t rows;		  /* events or rows written */
};

/* Writes the preamble; then set a->observer = export_observe, ctx = @x. */
void export_begin(struct exporter *x);

/* analysis_observer: writes what event @ev changed. */
void export_observe(void *ctx, const struct mt_event *ev, const struct proc_summary *p);

/* Writes what only the end knows (Perfetto: process names) and the closing. */
void export_end(struct exporter *x);

#endif /* MEMTRACK_EXPORT_H */
