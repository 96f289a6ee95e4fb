/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the daemon's loaded BPF sides (record/bpf_slot.h), ready for
 * the next session.
 *
 * Loading and verifying the BPF side is most of a short run's fixed cost
 * (~60-170 ms here); the daemon pays it off the sessions' path.  A slot is
 * one skeleton of one session at a time: the sessions share nothing in
 * the kernel.  pool_take() hands out an idle slot of the key asked for,
 * or loads one then and there (a key no slot has, or every slot busy);
 * pool_give() resets a slot when its session has ended and keeps it idle
 * (at most POOL_IDLE_MAX, the others are unloaded); a take waits for a
 * slot being reset (a millisecond) rather than load another.  A thread keeps one
 * idle slot of each default key (track's and attach's defaults) ready.
 *
 * THREAD NOTES: any thread may take and give (one mutex guards the idle
 * list); loads are serialized by a second mutex (libbpf's load-time
 * globals: the print callback, the heap tuning of loader.c); the refill
 * thread blocks every signal.
 */
#ifndef MEMTRACK_DAEMON_POOL_H
#define MEMTRACK_DAEMON_POOL_H

#include <stddef.h>
#include "record/bpf_slot.h"

#define POOL_IDLE_MAX 4 /* idle slots kept, of every key together */

struct pool;
struct kernel_features;

/*
 * Returns a pool loading slots on the kernel @kf describes (borrowed), with
 * idle slots of @defaults[0..@ndefaults) kept ready, or NULL with errno set.
 */
struct pool *pool__new(const struct kernel_features *kf, const struct bpf_slot_key *defaults,
		       unsigned ndefaults);

/* A slot of @key, the caller's until pool_give(); NULL with a reason in @err. */
struct bpf_slot *pool_take(struct pool *p, const struct bpf_slot_key *key, char *err,
			   size_t errlen);

/*
 * Says that @s comes back soon (its session is ending): takes wait for it
 * and the refill thread loads nothing meanwhile, rather than load a slot
 * too many.  NULL is fine.
 */
void pool_giving(struct pool *p, struct bpf_slot *s);

/* Takes @s back (its session has ended: nothing tracked, nothing parked). */
void pool_give(struct pool *p, struct bpf_slot *s);

/* What the pool has done, for `memtrack daemon -v` and the tests. */
struct pool_stats {
	unsigned long long loads;  /* slots loaded */
	unsigned long long reuses; /* sessions served by a slot reset */
	unsigned long long misses; /* takes that loaded on the session's path */
	unsigned idle;		   /* idle slots now */
	unsigned busy;		   /* slots in sessions now */
};
void pool_stats(struct pool *p, struct pool_stats *st);

/* Stops the refill thread and unloads every idle slot (NULL is fine); none may be busy. */
void pool__free(struct pool *p);

#endif /* MEMTRACK_DAEMON_POOL_H */
