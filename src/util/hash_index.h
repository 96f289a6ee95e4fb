/* SPDX-License-Identifier: MIT */
/*
 * hash_index.h - an open-addressing hash index: finds an element of an
 * array its caller owns by the element's key, in constant time.
 *
 * The index holds positions only (position + 1 in a slot, 0: empty); the
 * caller's array holds the elements and their keys.  The caller gives the
 * hash of a key and a function saying whether the element at a position
 * has the key looked for.  Linear probing in a table at most half full
 * (so a probe ends at an empty slot soon), doubled when it would be more;
 * nothing is ever removed (the tables it serves only grow).  The order of
 * the elements is the caller's: nothing depends on where a position sits
 * in the index, so results never depend on the hash.
 *
 * Use: pos = hash_index_find(...) (position + 1, 0: absent); to add the
 * element at position p, hash_index_reserve() then hash_index_add().
 * The lookup is inline so that a caller's key test is inlined into it.
 *
 * Ownership: an index owns its slots; hash_index_release() frees them.  A
 * zeroed index is a valid empty one.  A fixed index may instead be given
 * slots of its caller's (a static array, zeroed, a power of two of them,
 * at least twice as many as it will hold): then it is neither reserved
 * nor released.  THREAD NOTES: none; an index is its
 * owner's, and lookups do not write.
 */
#ifndef MEMTRACK_HASH_INDEX_H
#define MEMTRACK_HASH_INDEX_H

#include <stdbool.h>
#include <stdint.h>
#include "compiler.h"

struct hash_index {
	uint64_t *slots; /* owned: position + 1, 0 = empty; NULL until the first reserve */
	uint64_t nslots; /* a power of two, or 0 */
	uint64_t n;	 /* positions entered */
};

/* Whether the element at @pos of the caller's array (@ctx) has the key @key. */
typedef bool hash_index_same_fn(const void *ctx, uint64_t pos, const void *key);

/* The hash of the key of the element at @pos (to place it again when the index grows). */
typedef uint64_t hash_index_hash_fn(const void *ctx, uint64_t pos);

/*
 * The slot for the key @key (hash @hash): the one holding its element's
 * position + 1, or the empty one where it would go.  @x has slots.
 */
static inline uint64_t *hash_index_slot(const struct hash_index *x, uint64_t hash,
					hash_index_same_fn *same, const void *ctx, const void *key)
{
	uint64_t mask = x->nslots - 1;

	for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
		uint64_t *s = &x->slots[i];

		if (!*s || same(ctx, *s - 1, key))
			return s;
	}
}

/* The position + 1 of the element with key @key (hash @hash), 0 when there is none. */
static inline uint64_t hash_index_find(const struct hash_index *x, uint64_t hash,
				       hash_index_same_fn *same, const void *ctx, const void *key)
{
	return x->nslots ? *hash_index_slot(x, hash, same, ctx, key) : 0;
}

/*
 * Makes room for one more position: when that would make @x more than half
 * full, doubles it (to @min_slots, a power of two, at first), placing every
 * position again by @hash_of.  Returns 0, or -ENOMEM with @x unchanged.
 */
MT_MUST_CHECK int hash_index_reserve(struct hash_index *x, uint64_t min_slots,
				     hash_index_hash_fn *hash_of, const void *ctx);

/*
 * Enters @pos, whose key (hash @hash) is not in @x yet (or, if it is, is
 * found at the position entered first); the caller made room with
 * hash_index_reserve().
 */
static inline void hash_index_add(struct hash_index *x, uint64_t hash, uint64_t pos)
{
	uint64_t mask = x->nslots - 1, i;

	for (i = hash & mask; x->slots[i]; i = (i + 1) & mask)
		;
	x->slots[i] = pos + 1;
	x->n++;
}

/* Frees @x's slots and leaves it empty (NULL-safe on a zeroed index). */
void hash_index_release(struct hash_index *x);

#endif /* MEMTRACK_HASH_INDEX_H */
