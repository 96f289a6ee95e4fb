/* SPDX-License-Identifier: MIT */
/*
 * sites.h - heap statistics per call site (a distinct stack id): how many
 * allocations and bytes each made, what it leaked, and what it held when the
 * whole tree's heap peaked.  analysis.c updates them as it folds heap
 * records in; docs/METRICS.md ("Call sites") defines each number.
 *
 * Peak at constant cost: the table counts the tree's new heap peaks
 * (epoch).  A site remembers the epoch of its last change; before its live
 * bytes change again in a later epoch, what it held is what it held at the
 * latest peak, so it is copied to peak_bytes then (and, for sites untouched
 * since, by site_table_settle() at the end).  Sites' peak_bytes so sum to
 * the tree's peak_live_bytes.
 *
 * The same again for memory (heap blocks plus mapped memory, METRICS.md
 * "Mapped memory"): mem_live counts a site's live heap bytes and the
 * accessible bytes of the mappings it made, mem_peak what it held at the
 * tree's memory peak (mem_epoch counts those peaks).
 *
 * Ownership: the table owns its arrays.  A struct site pointer is valid
 * until the next site_get() (the array may move).
 */
#ifndef MEMTRACK_SITES_H
#define MEMTRACK_SITES_H

#include <stdint.h>
#include "util/hash_index.h"

struct site {
	uint64_t stack;		  /* stack id; 0: allocations recorded without a stack */
	uint64_t allocs;	  /* allocations (malloc, calloc, realloc, aligned) */
	uint64_t allocated_bytes; /* bytes they requested */
	uint64_t live_bytes;	  /* bytes allocated here and not freed yet */
	uint64_t live_count;	  /* blocks allocated here and not freed yet */
	uint64_t peak_bytes;	  /* live_bytes at the tree's heap peak (settled at the end) */
	uint64_t peak_count;	  /* live_count then */
	uint64_t leaked_count;	  /* blocks never freed before exit/exec/end */
	uint64_t leaked_bytes;
	uint64_t temporary; /* blocks freed before their thread allocated again (METRICS.md) */
	/* blocks still held at the end of an attach by processes alive then, and their ages */
	uint64_t live_end_count, live_end_bytes;
	uint64_t live_end_age_max_ns, live_end_age_sum_ns;
	/* ages of the leaked blocks (time from allocation to exit, exec or end) */
	uint64_t leaked_age_max_ns, leaked_age_sum_ns;
	uint64_t epoch;	    /* the table's epoch at the last change of live_bytes */
	uint64_t mem_live;  /* live_bytes plus the mapped bytes of its mappings */
	uint64_t mem_peak;  /* mem_live at the tree's memory peak (settled at the end) */
	uint64_t mem_epoch; /* the table's mem_epoch at the last change of mem_live */
};

struct site_table {
	struct site *sites; /* owned, nsites of them, in first-seen order */
	uint64_t nsites, cap;
	struct hash_index index; /* owned: sites by stack */
	uint64_t last;		 /* sites index + 1 of the last lookup, 0 = none */
	uint64_t epoch;		 /* new tree-wide heap peaks so far */
	uint64_t mem_epoch;	 /* new tree-wide memory peaks so far */
};

void site_table_init(struct site_table *t);

/* Counts a leaked block of @site that was @age_ns old at the end. */
static inline void site_leak_age(struct site *site, uint64_t age_ns)
{
	if (age_ns > site->leaked_age_max_ns)
		site->leaked_age_max_ns = age_ns;
	site->leaked_age_sum_ns += age_ns; /* 2^64 ns: 584 years of leaks, summed */
}

/* The site of @stack, added when new; NULL on -ENOMEM.  May move t->sites. */
struct site *site_get(struct site_table *t, uint64_t stack);

/*
 * @a + @b, or UINT64_MAX when that does not fit: byte totals of a crafted
 * file (sizes near 2^64) stop at "16 EiB" instead of wrapping to small ones.
 */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t sum;

	return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

/*
 * Adds site @s's numbers into @sum (saturating; the ages' maxima kept), as
 * a function or a diff row sums its stacks; with @first, @s's stack names
 * @sum's.
 */
void site_cost_add(struct site *sum, const struct site *s, bool first);

/* Counts a block of @size bytes of @site still held at the end of an attach, @age_ns old then. */
static inline void site_live_end(struct site *site, uint64_t size, uint64_t age_ns)
{
	site->live_end_count++;
	site->live_end_bytes = sat_add(site->live_end_bytes, size);
	if (age_ns > site->live_end_age_max_ns)
		site->live_end_age_max_ns = age_ns;
	site->live_end_age_sum_ns += age_ns;
}

/* Before @s's live bytes change: what it held at the latest tree peak is its peak. */
static inline void site_live_touch(const struct site_table *t, struct site *s)
{
	if (s->epoch != t->epoch) {
		s->peak_bytes = s->live_bytes;
		s->peak_count = s->live_count;
		s->epoch = t->epoch;
	}
}

/* Before @s's memory changes: what it held at the latest memory peak is its peak. */
static inline void site_mem_touch(const struct site_table *t, struct site *s)
{
	if (s->mem_epoch != t->mem_epoch) {
		s->mem_peak = s->mem_live;
		s->mem_epoch = t->mem_epoch;
	}
}

/* @s's mappings gained / lost @bytes of mapped memory. */
static inline void site_mem_add(const struct site_table *t, struct site *s, uint64_t bytes)
{
	site_mem_touch(t, s);
	s->mem_live += bytes;
}

static inline void site_mem_sub(const struct site_table *t, struct site *s, uint64_t bytes)
{
	site_mem_touch(t, s);
	s->mem_live -= bytes;
}

/*
 * @s's live bytes grow by @bytes / shrink by @bytes (and its live blocks by
 * @count: 1, or a sampled block's weight), snapshotting its peak
 * first (and its memory: heap blocks are memory too).  Unsigned (modulo 2^64) on purpose: a block's size leaves exactly
 * what it added, whatever the size (a signed delta overflowed at 2^63).
 */
static inline void site_live_add(const struct site_table *t, struct site *s, uint64_t bytes,
				 uint64_t count)
{
	site_live_touch(t, s);
	s->live_bytes += bytes;
	s->live_count += count;
	site_mem_add(t, s, bytes);
}

static inline void site_live_sub(const struct site_table *t, struct site *s, uint64_t bytes,
				 uint64_t count)
{
	site_live_touch(t, s);
	s->live_bytes -= bytes;
	s->live_count -= count;
	site_mem_sub(t, s, bytes);
}

/* The tree reached a new heap peak: what every site holds now is its peak. */
static inline void site_table_new_peak(struct site_table *t)
{
	t->epoch++;
}

/* The tree reached a new memory peak (heap + mapped). */
static inline void site_table_new_memory_peak(struct site_table *t)
{
	t->mem_epoch++;
}

/* Brings every site's peak_bytes and mem_peak up to date (after the last event). */
void site_table_settle(struct site_table *t);

void site_table_release(struct site_table *t);

#endif /* MEMTRACK_SITES_H */
