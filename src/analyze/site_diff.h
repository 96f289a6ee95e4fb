/* SPDX-License-Identifier: MIT */
/*
 * site_diff.h - the call sites of two runs side by side, for `memtrack diff
 * --top N` and its function:/stack: gates (heaptrack_print -d, pprof
 * -diff_base): every function (functions.h) or whole stack of either run
 * is one row holding its numbers in both, zeros where a run has none.
 *
 * Rows pair by what survives a rebuild and ASLR, not by stack id (a hash of
 * addresses): a function by its name and its object's basename; a stack by
 * its symbolized frames (function, object basename and line each).  Two
 * stacks of one run with the same frames (addresses differing in lines
 * the symbolizer could not tell apart) are summed into one row.
 *
 * Use: site_diff_init(), site_diff_add_functions() or
 * site_diff_add_stacks() once per side, site_diff_ranked(),
 * site_diff_release().
 *
 * Ownership: the table owns its rows and every name in them (interned);
 * what site_diff_ranked() returns points into it.  THREAD NOTES: one thread.
 */
#ifndef MEMTRACK_SITE_DIFF_H
#define MEMTRACK_SITE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/callsites.h"
#include "analyze/diff.h"
#include "analyze/functions.h"
#include "analyze/intern.h"
#include "util/hash_index.h"

enum site_diff_side {
	SITE_DIFF_BASE,
	SITE_DIFF_NEW,
};

struct site_diff_row {
	const char *key;    /* what pairs the runs' rows (interned) */
	const char *name;   /* the function, or the stack's innermost frames "f < g < h" */
	const char *object; /* the object's basename (a stack: its innermost frame's); NULL: none */
	uint64_t stack[2];  /* per side: a stack of the row (its heaviest), 0: none */
	struct site cost[2]; /* per side: the sums; zeros where that run has none */
	bool in[2];	     /* per side: the run has the row */
};

struct site_diff {
	struct site_diff_row *rows; /* owned, nrows of them, in first-seen order */
	uint64_t nrows, cap;
	struct hash_index index; /* owned: rows by key */
	struct intern names;	 /* owned: keys, names and objects */
};

/* 0 or -ENOMEM (@d is then to be released all the same). */
int site_diff_init(struct site_diff *d);

/* Adds the functions of @t (built) as side @side's.  0 or -ENOMEM. */
int site_diff_add_functions(struct site_diff *d, enum site_diff_side side,
			    const struct fn_table *t);

/*
 * Adds the whole-stack sites of @a (finished; stacks in @st, symbolized
 * through @sym) as side @side's.  0 or -ENOMEM.
 */
int site_diff_add_stacks(struct site_diff *d, enum site_diff_side side, const struct analysis *a,
			 const struct stack_table *st, struct symbolizer *sym);

/* Metric @m of row @r, base against new (diff.h's numbers). */
void site_diff_value(const struct site_diff_row *r, enum site_metric m, struct diff_value *v);

/*
 * The rows whose metric @m changed, the largest change either way first
 * (ties: the name, then the object), at most @max (0: all).  A malloc'd
 * array of pointers into d->rows (the caller frees it), *@n its length;
 * NULL with *@n 0 when none changed or on -ENOMEM (errno says which).
 */
const struct site_diff_row **site_diff_ranked(const struct site_diff *d, enum site_metric m,
					      size_t max, size_t *n);

void site_diff_release(struct site_diff *d);

#endif /* MEMTRACK_SITE_DIFF_H */
