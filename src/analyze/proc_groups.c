// SPDX-License-Identifier: MIT
/* proc_groups.c - the ranked, folded process table; see proc_groups.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/proc_groups.h"

static const char *const names[PROC_SORT_N] = {
	"rss", "peak", "allocations", "allocated", "leaked", "memory", "temporary", "pid",
};

const char *proc_sort_name(enum proc_sort s)
{
	return s < PROC_SORT_N ? names[s] : "?";
}

int proc_sort_parse(const char *name, enum proc_sort *s)
{
	for (int i = 0; i < PROC_SORT_N; i++)
		if (!strcmp(name, names[i])) {
			*s = i;
			return 0;
		}
	return -EINVAL;
}

uint64_t proc_group_value(const struct proc_group *g, enum proc_sort s)
{
	switch (s) {
	case PROC_SORT_RSS: return g->peak_rss_bytes;
	case PROC_SORT_PEAK: return g->peak_heap_bytes;
	case PROC_SORT_ALLOCATIONS: return g->allocs;
	case PROC_SORT_ALLOCATED: return g->allocated_bytes;
	case PROC_SORT_LEAKED: return g->leaked_bytes;
	case PROC_SORT_MEMORY: return g->peak_memory_bytes;
	case PROC_SORT_TEMPORARY: return g->temporary;
	default: return 0;
	}
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static void group_add(struct proc_group *g, const struct proc_summary *p)
{
	if (!g->count++)
		g->first = p;
	g->last = p;
	g->allocs = sat_add(g->allocs, p->allocs);
	g->allocated_bytes = sat_add(g->allocated_bytes, p->allocated_bytes);
	g->leaked_bytes = sat_add(g->leaked_bytes, p->leaked_bytes);
	g->temporary = sat_add(g->temporary, p->temporary);
	g->live_end_bytes = sat_add(g->live_end_bytes, p->live_end_bytes);
	g->peak_heap_bytes = max_u64(g->peak_heap_bytes, p->peak_heap_bytes);
	g->peak_rss_bytes = max_u64(g->peak_rss_bytes, p->peak_rss_bytes);
	g->peak_mapped_bytes = max_u64(g->peak_mapped_bytes, p->peak_mapped_bytes);
	g->peak_memory_bytes = max_u64(g->peak_memory_bytes, p->peak_memory_bytes);
}

/* Whether process @i of @a may fold with others: not the root, exited, not left. */
static bool foldable(const struct analysis *a, unsigned i)
{
	return i > 0 && a->procs[i].exited &&
	       !a->procs[i].left; /* a left one keeps its row: it says why */
}

/* qsort_r order: the larger value first, then first-seen order. */
static int by_value(const void *pa, const void *pb, void *ctx)
{
	const struct proc_group *a = pa, *b = pb;
	enum proc_sort s = *(const enum proc_sort *)ctx;
	uint64_t va = proc_group_value(a, s), vb = proc_group_value(b, s);

	if (va != vb)
		return va > vb ? -1 : 1;
	return a->first < b->first ? -1 : a->first > b->first;
}

/* qsort_r order of process indexes: by command, then first seen. */
static int by_command(const void *pa, const void *pb, void *ctx)
{
	const struct analysis *a = ctx;
	unsigned x = *(const unsigned *)pa, y = *(const unsigned *)pb;
	int c = strcmp(a->procs[x].command, a->procs[y].command);

	return c ? c : (x > y) - (x < y);
}

struct proc_group *proc_groups(const struct analysis *a, enum proc_sort s, size_t *n)
{
	struct proc_group *g = calloc(a->nprocs ? a->nprocs : 1, sizeof(*g));
	unsigned *idx = calloc(a->nprocs ? a->nprocs : 1, sizeof(*idx));
	size_t k = 0, m = 0;

	*n = 0;
	if (!g || !idx) {
		free(g);
		free(idx);
		return NULL;
	}
	/* the foldable processes sorted by command: each run of one command is a row */
	for (unsigned i = 0; i < a->nprocs; i++) {
		if (s != PROC_SORT_PID && foldable(a, i))
			idx[m++] = i;
		else
			group_add(&g[k++], &a->procs[i]);
	}
	qsort_r(idx, m, sizeof(*idx), by_command, (void *)a);
	for (size_t i = 0; i < m; i++) {
		if (!i || strcmp(a->procs[idx[i]].command, a->procs[idx[i - 1]].command) != 0)
			k++; /* a command's first process: a new row */
		group_add(&g[k - 1], &a->procs[idx[i]]);
	}
	free(idx);
	if (s != PROC_SORT_PID)
		qsort_r(g, k, sizeof(*g), by_value, &s);
	if (!k) {
		free(g);
		errno = 0;
		return NULL;
	}
	*n = k;
	return g;
}
