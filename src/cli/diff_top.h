/* SPDX-License-Identifier: MIT */
/*
 * diff_top.h - `memtrack diff --top N`: the functions (or, --by stack, the
 * whole stacks) whose numbers changed most between the two runs, metric by
 * metric, and the gates on a site's growth (`--metric function:M` and
 * `--metric stack:M` with --fail-above); site_diff.h pairs the rows.  Also
 * the number formats the tree rows of cmd_diff.c share with it.
 */
#ifndef MEMTRACK_DIFF_TOP_H
#define MEMTRACK_DIFF_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include "analyze/callsites.h"
#include "analyze/diff.h"
#include "analyze/load.h"
#include "analyze/symbolize.h"

enum diff_by {
	DIFF_BY_FUNCTION, /* "function:" metrics; diff --top's default */
	DIFF_BY_STACK,	  /* "stack:" metrics; --by stack */
	DIFF_NBY,
};

struct diff_top_opts {
	size_t top;    /* --top N: rows per metric, 0: no table */
	bool by_stack; /* --by stack */
	bool json;
	bool gate;			     /* --fail-above given */
	double fail_above;		     /* percent */
	bool gated[DIFF_NBY][SITE_NMETRICS]; /* --metric function:M / stack:M */
};

/* The two runs, their stacks and one symbolizer for both (all borrowed). */
struct diff_top_runs {
	const struct loaded *run[2];	 /* base, new */
	const struct stack_table *st[2]; /* their stacks */
	struct symbolizer *sym;
};

/* Whether @o asks for anything of the sites (a table or a gate). */
bool diff_top_wanted(const struct diff_top_opts *o);

/*
 * Parses the NAME of `--metric function:NAME` / `--metric stack:NAME`
 * (site metric names: peak, allocations, ...) into @o.  Returns 1 when
 * @arg is such a metric, 0 when it has neither prefix, -EINVAL when the
 * metric after it is unknown.
 */
int diff_top_metric(struct diff_top_opts *o, const char *arg);

/*
 * Prints the --top table (text, or JSON ,"top":...) and the site gates'
 * verdicts (text lines, or JSON ,"site_regressions":[...]) to stdout;
 * *@regressed: a gated site grew beyond the threshold.  0 or -ENOMEM.
 */
int diff_top_print(const struct diff_top_runs *in, const struct diff_top_opts *o, bool *regressed);

/* @v as JSON: {"base":..,"new":..,"change":..,"change_pct":..} or null. */
void diff_value_print_json(const struct diff_value *v);

/* The text cells of @v: base, new and change (in KiB/MiB when @bytes), and percent. */
struct diff_cells {
	char base[32], new[32], change[32], pct[32];
};
void diff_value_cells(const struct diff_value *v, bool bytes, struct diff_cells *c);

#endif /* MEMTRACK_DIFF_TOP_H */
