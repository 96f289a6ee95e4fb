/* SPDX-License-Identifier: MIT */
/*
 * proc_groups.h - the process table of a report: processes ranked by a
 * metric (peak RSS by default), with identical short-lived children folded
 * into one row ("bash x38"): the processes other than the first (the root)
 * that exited and ran the same command.  A row's numbers are its members'
 * sums (allocations, bytes, leaks, temporary) or largest values (peaks).
 *
 * Ownership: the array returned is the caller's (free()); its rows point
 * into the analysis given.
 */
#ifndef MEMTRACK_PROC_GROUPS_H
#define MEMTRACK_PROC_GROUPS_H

#include <stddef.h>
#include <stdint.h>
#include "analyze/analysis.h"

/* What the process table is sorted by (`report --sort NAME`). */
enum proc_sort {
	PROC_SORT_RSS,	       /* "rss": peak RSS (the default when RSS was recorded) */
	PROC_SORT_PEAK,	       /* "peak": peak heap (the default otherwise) */
	PROC_SORT_ALLOCATIONS, /* "allocations" */
	PROC_SORT_ALLOCATED,   /* "allocated": bytes requested */
	PROC_SORT_LEAKED,      /* "leaked": bytes */
	PROC_SORT_MEMORY,      /* "memory": peak heap + mapped */
	PROC_SORT_TEMPORARY,   /* "temporary": temporary allocations */
	PROC_SORT_PID,	       /* "pid": first-seen order, nothing folded */
	PROC_SORT_N,
};

const char *proc_sort_name(enum proc_sort s);

/* 0 and *@s set, or -EINVAL for a name that is none of them. */
int proc_sort_parse(const char *name, enum proc_sort *s);

struct proc_group {
	const struct proc_summary *first; /* the member seen first (its pid, ppid, command) */
	const struct proc_summary *last;  /* the member seen last */
	unsigned count;			  /* members: 1 for a process on its own */
	/* sums over the members */
	uint64_t allocs, allocated_bytes, leaked_bytes, temporary, live_end_bytes;
	/* the largest of the members' */
	uint64_t peak_heap_bytes, peak_rss_bytes, peak_mapped_bytes, peak_memory_bytes;
};

/* The value of @g that @s sorts by. */
uint64_t proc_group_value(const struct proc_group *g, enum proc_sort s);

/*
 * The rows of @a's process table sorted by @s (largest first; ties in
 * first-seen order): a malloc'd array (the caller frees it), *@n rows.
 * NULL with *@n 0 when @a has no process, or on -ENOMEM (errno says which).
 */
struct proc_group *proc_groups(const struct analysis *a, enum proc_sort s, size_t *n);

#endif /* MEMTRACK_PROC_GROUPS_H */
