/* SPDX-License-Identifier: MIT */
/*
 * functions.h - call sites merged by function, as heaptrack_print, pprof
 * -top and memray's tables show them: an allocation belongs to the first
 * frame of its stack outside the allocator (docs/METRICS.md "Functions"),
 * and a function's numbers are the sums of those of every stack (site)
 * that so belongs to it.  Each function also has its callers (the frame
 * right above it in those stacks), with the same sums, so a reader sees who
 * made a function allocate.
 *
 * The sites partition among the functions: the functions' peak bytes sum to
 * the tree's peak heap, their allocations to the allocation count, and so
 * on; a function's callers partition it the same way.
 *
 * What report --top (text and JSON), the HTML report and diff --top use:
 *   fn_table_build()        once, after analysis_finish();
 *   fn_ranked()             the functions by a metric (callsites.h's);
 *   fn_callers_ranked()     one function's callers by a metric.
 *
 * Ownership: the table owns its functions, callers and names; everything
 * returned borrows from it (and from the stack table and symbolizer given
 * to fn_table_build) until fn_table_release().  THREAD NOTES: one thread.
 */
#ifndef MEMTRACK_FUNCTIONS_H
#define MEMTRACK_FUNCTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/callsites.h"
#include "analyze/intern.h"
#include "util/hash_index.h"

/* One caller of a function: the frame above the function's in its stacks. */
struct fn_caller {
	const char *name;	     /* function, "OBJECT+0xADDR", or FN_NO_CALLER */
	const struct mt_object *obj; /* NULL: no known file */
	struct site cost;	     /* sums over the stacks through it (cost.stack: the first) */
	uint64_t fn;		     /* index of the function it calls, in fns */
};

struct fn_entry {
	const char *name;	     /* function, "OBJECT+0xADDR", or FN_NO_STACK */
	const char *file;	     /* its source file where known, else NULL */
	const struct mt_object *obj; /* NULL: no known file */
	/*
	 * Sums of its sites' struct site numbers (site_value() reads them).
	 * cost.stack is the stack id of its heaviest site by peak bytes (then
	 * allocations): the one stack to show when only one is.
	 */
	struct site cost;
	const struct site *heaviest; /* that site (borrowed from the analysis) */
	uint64_t nsites;	     /* stacks merged into it */
	struct fn_caller *callers;   /* ncallers of them (into the table's array) */
	uint64_t ncallers;
};

struct fn_table {
	struct fn_entry *fns; /* owned, nfns of them, in first-seen order */
	uint64_t nfns, fns_cap;
	struct fn_caller *callers; /* owned, grouped by function once built */
	uint64_t ncallers, callers_cap;
	struct hash_index fn_index;	/* owned: fns by (name, obj) */
	struct hash_index caller_index; /* owned: callers by (fn, name, obj) */
	struct intern names;		/* owned: every name */
};

/* The name of the function of a site recorded without a stack (or whose stack record is lost). */
#define FN_NO_STACK "(no stack recorded)"
/* The caller of a function whose frame ends its stack. */
#define FN_NO_CALLER "(stack ends here)"

/*
 * Whether frame @f is part of the allocator (so skipped to find the
 * function an allocation belongs to): malloc and friends, operator
 * new/delete, glibc's internals, the mmap family's libc wrappers, Python's
 * PyMem_ and PyObject_Malloc family, and any frame in jemalloc, tcmalloc or
 * mimalloc (METRICS.md "Functions" lists them).
 */
bool frame_is_allocator(const struct site_frame *f);

/*
 * Merges every site of @a (finished) by function: each site's stack is
 * expanded through @sym and @st.  Returns 0 or -ENOMEM; @t is then to be
 * released either way.  @t is initialised here.
 */
int fn_table_build(struct fn_table *t, const struct analysis *a, const struct stack_table *st,
		   struct symbolizer *sym);

/*
 * The functions with a non-zero value of @m, the largest first (ties: the
 * name, then the object path), at most @max (0: all).  A malloc'd array of
 * pointers into t->fns (the caller frees it), *@n its length; NULL with *@n
 * 0 when there is none or on -ENOMEM (errno says which).
 */
const struct fn_entry **fn_ranked(const struct fn_table *t, enum site_metric m, size_t max,
				  size_t *n);

/* The same for the callers of @e: a malloc'd array into e->callers. */
const struct fn_caller **fn_callers_ranked(const struct fn_entry *e, enum site_metric m, size_t max,
					   size_t *n);

/* The function named @name (any object), or NULL. */
const struct fn_entry *fn_find(const struct fn_table *t, const char *name);

void fn_table_release(struct fn_table *t);

#endif /* MEMTRACK_FUNCTIONS_H */
