// SPDX-License-Identifier: MIT
/* hash_index.c - the open-addressing hash index; see hash_index.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "util/hash_index.h"

int hash_index_reserve(struct hash_index *x, uint64_t min_slots, hash_index_hash_fn *hash_of,
		       const void *ctx)
{
	struct hash_index grown = { .nslots = x->nslots ? x->nslots * 2 : min_slots };

	if ((x->n + 1) * 2 <= x->nslots)
		return 0;
	grown.slots = calloc(grown.nslots, sizeof(*grown.slots));
	if (!grown.slots)
		return -ENOMEM;
	for (uint64_t i = 0; i < x->nslots; i++)
		if (x->slots[i])
			hash_index_add(&grown, hash_of(ctx, x->slots[i] - 1), x->slots[i] - 1);
	free(x->slots);
	*x = grown;
	return 0;
}

void hash_index_release(struct hash_index *x)
{
	free(x->slots);
	memset(x, 0, sizeof(*x));
}
