/* SPDX-License-Identifier: MIT */
/*
 * mapped.h - the pages of one process's own anonymous private mappings
 * (docs/METRICS.md "Mapped memory"), followed to the page through mmap,
 * munmap, mremap, mprotect and brk: a sorted set of disjoint ranges, each
 * accessible (counted) or not (a PROT_NONE reservation, counted once
 * mprotect makes it accessible).
 *
 * Cost: O(ranges) per change at worst (a sorted array), O(log ranges) to
 * find the place; processes keep a few hundred ranges.  Owns its array.
 */
#ifndef MEMTRACK_MAPPED_H
#define MEMTRACK_MAPPED_H

#include <stdbool.h>
#include <stdint.h>

struct map_range {
	uint64_t start, end; /* [start, end), page aligned */
	uint64_t stack;	     /* the mmap's stack id, 0: none */
	bool accessible;     /* prot other than PROT_NONE: counted */
};

/* Told of every change of accessible bytes, by the stack of the range. */
typedef void mapped_account(void *ctx, uint64_t stack, uint64_t bytes, bool add);

struct mapped_set {
	struct map_range *r; /* owned; sorted by start, disjoint */
	uint64_t n, cap;
	uint64_t bytes;		 /* accessible bytes: the process's mapped memory */
	mapped_account *account; /* NULL: none */
	void *ctx;		 /* borrowed, for account */
};

/* Callers zero the set to initialise it (and may set account, ctx). */

/* Adds [start, end) (replacing what lay there, as MAP_FIXED does).  0 or -ENOMEM. */
int mapped_add(struct mapped_set *s, uint64_t start, uint64_t end, bool accessible, uint64_t stack);

/* Removes what lies in [start, end) (munmap, or a mapping not the program's over it). 0 or -ENOMEM. */
int mapped_cut(struct mapped_set *s, uint64_t start, uint64_t end);

/* Makes [start, end)'s ranges accessible or not (mprotect).  0 or -ENOMEM. */
int mapped_protect(struct mapped_set *s, uint64_t start, uint64_t end, bool accessible);

/*
 * mremap of [old, old + old_len) to [new, new + new_len): the ranges move
 * (cut at new_len); growth takes the state of the old mapping's last page,
 * when that page is in the set.  @keep_old: MREMAP_DONTUNMAP (the old
 * range stays mapped, emptied).  0 or -ENOMEM.
 */
int mapped_move(struct mapped_set *s, uint64_t old, uint64_t old_len, uint64_t new,
		uint64_t new_len, bool keep_old);

/* Empties the set (exit, exec); returns the accessible bytes it held. */
uint64_t mapped_clear(struct mapped_set *s);

void mapped_release(struct mapped_set *s);

#endif /* MEMTRACK_MAPPED_H */
