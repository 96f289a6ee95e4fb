// SPDX-License-Identifier: MIT
/* sampler.c - --sample-bytes in the library; see sampler.h and src/sample.h. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <linux/types.h>
#include "sample.h"
#include "fast/fast_ring.h"
#include "fast/own_map.h"
#include "fast/sampler.h"

#define SET_BUCKET_BITS 14u /* 16K buckets of 8: 1 MiB, mapped at the first sample */
#define SET_BUCKETS (1u << SET_BUCKET_BITS)
#define SET_WAYS 8u
#define SET_SLOT_BYTES ((uint64_t)SET_BUCKETS * SET_WAYS * sizeof(uintptr_t))
/* the slots, then one fill count a bucket (16 KiB: a free looks there first) */
#define SET_BYTES (SET_SLOT_BYTES + SET_BUCKETS)

uint64_t sampler_period;

static struct mt_fast_counts *stripes; /* the ring header's; NULL before sampler_start */
static uintptr_t *live_set;	       /* SET_BUCKETS * SET_WAYS slots, 0: free */
static unsigned next_stripe;

static __thread struct {
	__s64 left;	 /* bytes to this thread's next sample point */
	uint64_t rnd;	 /* xorshift64* state, 0: not drawn yet */
	unsigned stripe; /* its counters' stripe */
	bool own;	 /* the stripe is this thread's alone: no locked adds */
} T TLS_IE;

void sampler_start(struct mt_fast_hdr *hdr)
{
	sampler_period = hdr->sample_bytes > MT_SAMPLE_MAX ? MT_SAMPLE_MAX : hdr->sample_bytes;
	stripes = hdr->counts;
}

void sampler_drop(void)
{
	uintptr_t *set = live_set;

	sampler_period = 0;
	stripes = NULL;
	live_set = NULL;
	next_stripe = 0;
	T.rnd = 0; /* the fork child's own draws */
	if (set)
		munmap(set, SET_BYTES);
}

static uint32_t next_rnd(void)
{
	uint64_t x = T.rnd;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	T.rnd = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

/* The thread's first draw: a seed of its own (its TLS address and the clock), a stripe. */
static void thread_start(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO's: no syscall, no allocation */
	T.rnd = ((uintptr_t)&T * 0x9e3779b97f4a7c15ull) ^ (uint64_t)ts.tv_nsec ^
		((uint64_t)ts.tv_sec << 32);
	if (!T.rnd)
		T.rnd = 1;
	/*
	 * The first threads own a stripe each and add without a locked
	 * instruction (memtrack reads whole aligned words); the later ones
	 * share the last stripe, atomically.
	 */
	T.stripe = __atomic_fetch_add(&next_stripe, 1, __ATOMIC_RELAXED);
	T.own = T.stripe < MT_FAST_COUNT_STRIPES - 1;
	if (!T.own)
		T.stripe = MT_FAST_COUNT_STRIPES - 1;
	T.left = mt_sample_interval(next_rnd(), sampler_period);
}

bool sampler_take(uint64_t size)
{
	if (!sampler_period)
		return true;
	if (__builtin_expect(!T.rnd, 0))
		thread_start();
	return mt_sample_take(&T.left, size, next_rnd(), sampler_period);
}

static struct mt_fast_counts *stripe(void)
{
	if (__builtin_expect(!T.rnd, 0))
		thread_start();
	return &stripes[T.stripe];
}

/* The live set, mapped at its first use (inside an allocator call: our own mapping). */
static uintptr_t *set_get(void)
{
	uintptr_t *set = __atomic_load_n(&live_set, __ATOMIC_ACQUIRE), *none = NULL;
	void *m;

	if (set)
		return set;
	m = mmap(own_map_hint(SET_BYTES), SET_BYTES, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (__atomic_compare_exchange_n(&live_set, &none, (uintptr_t *)m, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return m;
	munmap(m, SET_BYTES); /* another thread's came first */
	return none;
}

/* The index of @p's bucket @which (0 or 1). */
static unsigned bucket_of(uintptr_t p, int which)
{
	uint64_t h = (uint64_t)(p >> 4) * (which ? 0xc2b2ae3d27d4eb4full : 0x9e3779b97f4a7c15ull);

	return (unsigned)(h >> (64 - SET_BUCKET_BITS));
}

static uint8_t *fill_of(uintptr_t *set)
{
	return (uint8_t *)set + SET_SLOT_BYTES;
}

/*
 * A bucket's fill count is raised before a slot is claimed and lowered
 * after it is released, so it is never 0 while the bucket holds a block:
 * set_take of an unsampled block (nearly every free) reads two bytes of a
 * 16 KiB array instead of two lines of the 1 MiB table.
 */
static bool set_add(uintptr_t p)
{
	uintptr_t *set = set_get();

	for (int w = 0; set && w < 2; w++) {
		unsigned k = bucket_of(p, w);
		uintptr_t *b = set + (uint64_t)k * SET_WAYS;

		if (__atomic_load_n(&fill_of(set)[k], __ATOMIC_RELAXED) >= SET_WAYS)
			continue; /* full (and the byte cannot wrap) */
		__atomic_fetch_add(&fill_of(set)[k], 1, __ATOMIC_RELAXED);
		for (unsigned i = 0; i < SET_WAYS; i++) {
			uintptr_t empty = 0;

			if (__atomic_compare_exchange_n(&b[i], &empty, p, false, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
				return true;
		}
		__atomic_fetch_sub(&fill_of(set)[k], 1, __ATOMIC_RELAXED);
	}
	return false;
}

static bool set_take(uintptr_t p)
{
	uintptr_t *set = __atomic_load_n(&live_set, __ATOMIC_ACQUIRE);

	for (int w = 0; set && w < 2; w++) {
		unsigned k = bucket_of(p, w);
		uintptr_t *b = set + (uint64_t)k * SET_WAYS;

		if (!__atomic_load_n(&fill_of(set)[k], __ATOMIC_RELAXED))
			continue;
		for (unsigned i = 0; i < SET_WAYS; i++) {
			uintptr_t mine = p;

			if (__atomic_load_n(&b[i], __ATOMIC_RELAXED) == p &&
			    __atomic_compare_exchange_n(&b[i], &mine, 0, false, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED)) {
				__atomic_fetch_sub(&fill_of(set)[k], 1, __ATOMIC_RELAXED);
				return true;
			}
		}
	}
	return false;
}

/* Adds @v to the counter @c of the thread's stripe. */
static inline void count(__u64 *c, uint64_t v)
{
	if (T.own)
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

bool sampler_alloc(uintptr_t p, uint64_t size, bool sampled)
{
	struct mt_fast_counts *c = stripe();

	count(&c->allocs, 1);
	count(&c->alloc_bytes, size);
	if (!sampled)
		return false;
	if (!set_add(p)) {
		count(&c->unmatched, 1);
		return false;
	}
	count(&c->sampled, 1);
	return true;
}

bool sampler_free(uintptr_t p)
{
	count(&stripe()->frees, 1);
	return set_take(p);
}
