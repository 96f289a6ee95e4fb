/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - --sample-bytes in libmemtrack-fast.so: the per-thread byte
 * sampler (the draw of sample.h, as alloc.bpf.c makes it), the process's
 * exact totals (the ring header's stripes, fast_ring.h), and the set of
 * live sampled blocks, whose frees alone are recorded.
 *
 * The set is a fixed table of 8-slot buckets (one cache line each); a
 * block has two candidate buckets and a slot is claimed and released with
 * a compare-and-swap, so nothing locks: a signal handler's free on a
 * thread inside malloc is safe.  A block's insert (after the allocator
 * returned it) and its removal (at its free, before the allocator has it
 * back) never race: the program cannot free a block before it has it.  A
 * sampled block with both buckets full is not recorded (counted as
 * `unmatched`): its free could not be told.
 *
 * Nothing here allocates but the table itself (own mappings, at the first
 * sample).  THREAD NOTES: any thread; sampler_start/sampler_drop run
 * single-threaded (handover.c, as ring_start/ring_drop).
 */
#ifndef MEMTRACK_FAST_SAMPLER_H
#define MEMTRACK_FAST_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include "fast/fast_lib.h"

struct mt_fast_hdr;

/* The period (0: every call is recorded, none of this runs). */
extern uint64_t sampler_period HIDDEN;

/* Takes @hdr's period (memtrack wrote it before its answer) and its stripes. */
void sampler_start(struct mt_fast_hdr *hdr) HIDDEN;

/* Forgets the ring's stripes and the live set (a fork child starts afresh). */
void sampler_drop(void) HIDDEN;

/* The calling thread's draw for an allocation of @size bytes: record it? */
bool sampler_take(uint64_t size) HIDDEN;

/*
 * An allocation of @size bytes returned @p: counted; when @sampled, @p
 * joins the live set.  Returns whether to record it.
 */
bool sampler_alloc(uintptr_t p, uint64_t size, bool sampled) HIDDEN;

/* @p (not NULL) is freed: counted; returns whether it was a sampled block (recorded). */
bool sampler_free(uintptr_t p) HIDDEN;

#endif /* MEMTRACK_FAST_SAMPLER_H */
