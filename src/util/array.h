/* SPDX-License-Identifier: MIT */
/*
 * array.h - growing an array its caller owns by doubling: the tables of the
 * analysis (functions, callers, diff rows) that only grow.
 */
#ifndef MEMTRACK_ARRAY_H
#define MEMTRACK_ARRAY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* realloc, qsort_r (_GNU_SOURCE) */

/*
 * Grows @*v (of @*cap elements of @size) to hold @n + 1: 0, or -ENOMEM with
 * @*v and @*cap unchanged.  The array may move; a NULL @*v is allocated
 * whatever @*cap says.
 */
static inline int array_room_for_one(void **v, uint64_t *cap, uint64_t n, size_t size)
{
	void *grown;
	uint64_t c;

	if (n < *cap && *v)
		return 0;
	c = *cap ? *cap * 2 : 64;
	grown = realloc(*v, c * size);
	if (!grown)
		return -ENOMEM;
	*v = grown;
	*cap = c;
	return 0;
}

/*
 * The tail of every "ranked" lookup: sorts the @k pointers of @v (malloc'd,
 * consumed) by @cmp with @ctx and keeps the first @max (0: all).  Returns
 * @v with *@n its length, or NULL with *@n 0 and errno 0 when @k is 0 (@v
 * is then freed).
 */
static inline void *array_rank(const void **v, size_t k, size_t max, size_t *n,
			       int (*cmp)(const void *, const void *, void *), void *ctx)
{
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	qsort_r(v, k, sizeof(*v), cmp, ctx);
	if (max && k > max)
		k = max;
	*n = k;
	if (!k) {
		free(v);
		errno = 0;
		return NULL;
	}
	return v;
}

#endif /* MEMTRACK_ARRAY_H */
