/* SPDX-License-Identifier: MIT */
/*
 * batch.h - a fixed-size buffer of raw ring-buffer records, the unit that
 * travels from the poller to the writer and becomes one artifact frame.
 */
#ifndef MEMTRACK_BATCH_H
#define MEMTRACK_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/types.h>
#include "event.h"

struct batch {
	size_t used;	     /* bytes of records in buf */
	size_t cap;	     /* size of buf */
	uint32_t nrec;	     /* records in buf */
	uint64_t born_ns;    /* CLOCK_MONOTONIC time of the first record */
	uint64_t seq;	     /* order in which the poller handed it on */
	unsigned char buf[]; /* records, each as the ring buffer delivered it */
};

/* Returns an empty batch of @cap bytes, or NULL with errno set. */
struct batch *batch__new(size_t cap);

/*
 * Appends one record; returns false (and appends nothing) when it does not
 * fit.  Inline: the poller calls it for every record.
 */
static inline bool batch__append(struct batch *b, const void *rec, size_t size, uint64_t now_ns)
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

void batch__reset(struct batch *b);

void batch__free(struct batch *b);

/*
 * Size in bytes of the record at @rec (header + fields [+ exec or running
 * path, mark name, object build-id and path, or stack frames]).
 */
static inline size_t rec_size(const void *rec)
{
	const struct mt_rec_hdr *h = rec;

	if (h->type == MT_EXEC)
		return sizeof(struct mt_rec_exec);
	if (h->type == MT_MARK)
		return sizeof(struct mt_rec_mark);
	if (h->type == MT_RUNNING)
		return sizeof(struct mt_rec_running);
	if (h->type == MT_OBJECT)
		return sizeof(struct mt_rec_object);
	if (h->type == MT_STACK) {
		__u32 n;

		/* a byte copy: @rec may be typed as a smaller record */
		memcpy(&n, (const char *)rec + __builtin_offsetof(struct mt_rec_stack, nframes),
		       sizeof(n));
		if (n > MT_STACK_MAX)
			n = MT_STACK_MAX;
		return __builtin_offsetof(struct mt_rec_stack, frames) +
		       (size_t)n * sizeof(struct mt_rec_frame);
	}
	if (h->type == MT_PYCODE) {
		__u64 f[PYCODE_NFIELDS], n;

		memcpy(f, (const char *)rec + sizeof(*h), sizeof(f));
		n = mt_pycode_blob_len(f);
		return __builtin_offsetof(struct mt_rec_pycode, blob) +
		       (size_t)(n > MT_PYCODE_BLOB_MAX ? MT_PYCODE_BLOB_MAX : n);
	}
	return sizeof(*h) + (size_t)h->nfields * sizeof(__u64);
}

#endif /* MEMTRACK_BATCH_H */
