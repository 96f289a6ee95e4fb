// SPDX-License-Identifier: MIT
/* batch.c - record batches; see batch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include "pipeline/batch.h"
#include "event.h"

struct batch *batch__new(size_t cap)
{
	struct batch *b = malloc(sizeof(*b) + cap);

	if (!b)
		return NULL;
	b->cap = cap;
	batch__reset(b);
	return b;
}

void batch__reset(struct batch *b)
{
	b->used = 0;
	b->nrec = 0;
	b->born_ns = 0;
}

void batch__free(struct batch *b)
{
	free(b);
}
