// SPDX-License-Identifier: MIT
/* sample_counts.c - the SAMPLING and COUNTS records of --sample-bytes; see sample_counts.h. */
#include <errno.h>
#include <stdint.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include "bpf_abi.h"
#include "event.h"
#include "pipeline/pipeline.h"
#include "record/sample_counts.h"

/*
 * Feeds one COUNTS record per process in the map (@ctx: its fd) at the
 * drain, the only call with @until UINT64_MAX.
 */
static int counts_feed(void *ctx, struct pipeline *p, uint64_t until)
{
	int counts_fd = (int)(intptr_t)ctx;
	struct mt_rec rec = { .h = { .type = MT_COUNTS, .nfields = COUNTS_NFIELDS } };
	struct mt_heap_counts c;
	__u32 key, next, *prev = NULL;
	int fed = 0, err;

	if (until != UINT64_MAX)
		return 0;
	rec.h.ts = mono_ns();
	while (!bpf_map_get_next_key(counts_fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(counts_fd, &key, &c))
			continue; /* gone meanwhile */
		rec.h.pid = rec.h.tid = key;
		rec.f[COUNTS_ALLOCS] = c.allocs;
		rec.f[COUNTS_ALLOC_BYTES] = c.alloc_bytes;
		rec.f[COUNTS_FREES] = c.frees;
		rec.f[COUNTS_SAMPLED] = c.sampled;
		rec.f[COUNTS_UNMATCHED] = c.unmatched;
		err = pipeline_feed(p, &rec, sizeof(rec.h) + COUNTS_NFIELDS * sizeof(__u64));
		if (err)
			return err;
		fed++;
	}
	return fed;
}

int sample_counts_start(struct pipeline *p, int fd, uint64_t period)
{
	struct mt_rec rec = { .h = { .type = MT_SAMPLING, .nfields = SAMPLING_NFIELDS } };
	int err;

	rec.h.ts = mono_ns();
	rec.f[SAMPLING_PERIOD] = period;
	err = pipeline_inject(p, &rec, sizeof(rec.h) + SAMPLING_NFIELDS * sizeof(__u64));
	if (err)
		return err;
	return pipeline__add_source(
		p, -1,
		&(struct pipeline_source){ .feed = counts_feed, .ctx = (void *)(intptr_t)fd });
}
