// SPDX-License-Identifier: MIT
/* diff.c - metric comparison of two analyses; see diff.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/diff.h"

static const char *const names[DIFF_NMETRICS] = {
	[DIFF_PEAK_HEAP] = "peak_heap_bytes",	  [DIFF_ALLOCATED] = "total_allocated_bytes",
	[DIFF_ALLOC_COUNT] = "alloc_count",	  [DIFF_LEAKED] = "leaked_bytes",
	[DIFF_PEAK_RSS] = "peak_rss_bytes",	  [DIFF_PEAK_PHYSICAL] = "peak_physical_bytes",
	[DIFF_PEAK_MAPPED] = "peak_mapped_bytes", [DIFF_PEAK_MEMORY] = "peak_memory_bytes",
	[DIFF_MAPPED_COUNT] = "mapped_count",	  [DIFF_LEAKED_MAPPED] = "leaked_mapped_bytes",
};

const char *diff_metric_name(enum diff_metric_id id)
{
	return id < DIFF_NMETRICS ? names[id] : "?";
}

int diff_metric_lookup(const char *name)
{
	for (int i = 0; i < DIFF_NMETRICS; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

void diff_value_set(struct diff_value *v, uint64_t base, uint64_t new)
{
	v->known = true;
	v->base = base;
	v->new = new;
	/* new - base as a signed number, saturated: sizes of a crafted file reach 2^64 */
	if (new >= base)
		v->change = new - base > INT64_MAX ? INT64_MAX : (int64_t)(new - base);
	else
		v->change = base - new > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(base - new);
	v->pct_valid = base || !new;
	v->pct = base ? 100.0 * ((double)new - (double)base) / (double)base : 0;
}

bool diff_exceeds(const struct diff_value *v, double pct)
{
	if (!v->known || v->new <= v->base)
		return false;
	if (!v->base)
		return true;
	/* in long double: exact for byte counts below 2^64 times 100 */
	return (long double)(v->new - v->base) * 100 > (long double)pct * v->base;
}

bool diff_tree_metric(const struct analysis *a, bool physical, enum diff_metric_id id,
		      uint64_t *out)
{
	switch (id) {
	case DIFF_PEAK_HEAP: *out = a->peak_live_bytes; return true;
	case DIFF_ALLOCATED: *out = a->total_allocated_bytes; return true;
	case DIFF_ALLOC_COUNT: *out = a->alloc_count; return true;
	case DIFF_LEAKED: *out = a->leaked_bytes; return true;
	case DIFF_PEAK_RSS: *out = a->peak_rss_bytes; return a->has_rss;
	case DIFF_PEAK_PHYSICAL: *out = a->peak_physical_bytes; return physical;
	case DIFF_PEAK_MAPPED: *out = a->peak_mapped_bytes; return true;
	case DIFF_PEAK_MEMORY: *out = a->peak_memory_bytes; return true;
	case DIFF_MAPPED_COUNT: *out = a->mapped_count; return true;
	case DIFF_LEAKED_MAPPED: *out = a->leaked_mapped_bytes; return true;
	default: return false;
	}
}

bool diff_proc_metric(const struct analysis *a, const struct proc_summary *p,
		      enum diff_metric_id id, uint64_t *out)
{
	switch (id) {
	case DIFF_PEAK_HEAP: *out = p->peak_heap_bytes; return true;
	case DIFF_ALLOCATED: *out = p->allocated_bytes; return true;
	case DIFF_ALLOC_COUNT: *out = p->allocs; return true;
	case DIFF_LEAKED: *out = p->leaked_bytes; return true;
	case DIFF_PEAK_RSS: *out = p->peak_rss_bytes; return a->has_rss;
	case DIFF_PEAK_MAPPED: *out = p->peak_mapped_bytes; return true;
	case DIFF_PEAK_MEMORY: *out = p->peak_memory_bytes; return true;
	case DIFF_MAPPED_COUNT: *out = p->mapped_count; return true;
	case DIFF_LEAKED_MAPPED: *out = p->leaked_mapped_bytes; return true;
	default: return false;
	}
}

struct ranked {
	const char *command;
	unsigned idx; /* in procs: first-seen order */
};

static int cmp_ranked(const void *x, const void *y)
{
	const struct ranked *a = x, *b = y;
	int c = strcmp(a->command, b->command);

	return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static struct ranked *rank(const struct analysis *a)
{
	struct ranked *r = calloc(a->nprocs ? a->nprocs : 1, sizeof(*r));

	if (!r)
		return NULL;
	for (unsigned i = 0; i < a->nprocs; i++) {
		r[i].command = a->procs[i].command;
		r[i].idx = i;
	}
	qsort(r, a->nprocs, sizeof(*r), cmp_ranked);
	return r;
}

int diff_match_procs(const struct analysis *base, const struct analysis *new, int *match,
		     bool *matched_new)
{
	struct ranked *rb = rank(base), *rn = rank(new);
	unsigned i = 0, j = 0;

	if (!rb || !rn) {
		free(rb);
		free(rn);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < base->nprocs; k++)
		match[k] = -1;
	for (unsigned k = 0; matched_new && k < new->nprocs; k++)
		matched_new[k] = false;
	/* both sorted by (command, first-seen): equal commands pair up in order */
	while (i < base->nprocs && j < new->nprocs) {
		int c = strcmp(rb[i].command, rn[j].command);

		if (c < 0) {
			i++;
		} else if (c > 0) {
			j++;
		} else {
			match[rb[i].idx] = (int)rn[j].idx;
			if (matched_new)
				matched_new[rn[j].idx] = true;
			i++;
			j++;
		}
	}
	free(rb);
	free(rn);
	return 0;
}
