// SPDX-License-Identifier: MIT
/* batch.c - record batches; see batch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include "batch.h"
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

bool batch__append(struct batch *b, const void *rec, size_t size, uint64_t now_ns)
{
	if (b->used + size > b->cap)
		return false;
	if (!b->nrec)
		b->born_ns = now_ns;
	memcpy(b->buf + b->used, rec, size);
	b->used += size;
	b->nrec++;
	return true;
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

size_t rec_size(const void *rec)
{
	const struct mt_rec_hdr *h = rec;

	if (h->type == MT_EXEC)
		return sizeof(struct mt_rec_exec);
	if (h->type == MT_MARK)
		return sizeof(struct mt_rec_mark);
	return sizeof(*h) + (size_t)h->nfields * sizeof(__u64);
}
