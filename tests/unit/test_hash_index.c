// SPDX-License-Identifier: MIT
/*
 * test_hash_index.c - the open-addressing hash index (util/hash_index.c):
 * every key entered is found at its position, an absent one is not, through
 * growth and long probe chains (a hash that puts every key in 8 homes), with
 * positions that are not 0 .. n - 1; a zeroed index is empty; release
 * leaves it empty and reusable.
 */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "util/hash_index.h"

#define NKEYS 20000

struct table {
	uint64_t keys[NKEYS + 100]; /* by position */
	unsigned bits;		    /* hash: the key's low @bits bits (0: all 64) */
};

static uint64_t hash_of_key(const struct table *t, uint64_t key)
{
	return t->bits ? key & ((1ull << t->bits) - 1) : key * 0x9e3779b97f4a7c15ull;
}

static bool same(const void *ctx, uint64_t pos, const void *key)
{
	const struct table *t = ctx;

	return t->keys[pos] == *(const uint64_t *)key;
}

static uint64_t hash_at(const void *ctx, uint64_t pos)
{
	const struct table *t = ctx;

	return hash_of_key(t, t->keys[pos]);
}

static uint64_t find(const struct hash_index *x, const struct table *t, uint64_t key)
{
	return hash_index_find(x, hash_of_key(t, key), same, t, &key);
}

/* Enters keys[first .. first + n) (positions first ...); returns the failures. */
static int fill(struct hash_index *x, struct table *t, uint64_t first, uint64_t n)
{
	int bad = 0;

	for (uint64_t p = first; p < first + n; p++) {
		t->keys[p] = (p * 7919) ^ (p << 40);
		bad += find(x, t, t->keys[p]) != 0;
		if (hash_index_reserve(x, 64, hash_at, t))
			return -1;
		hash_index_add(x, hash_of_key(t, t->keys[p]), p);
	}
	return bad;
}

static void check_all(const struct hash_index *x, const struct table *t, uint64_t first, uint64_t n)
{
	uint64_t wrong = 0;

	for (uint64_t p = first; p < first + n; p++)
		wrong += find(x, t, t->keys[p]) != p + 1;
	CHECK_U64(wrong, 0);
	CHECK_U64(find(x, t, 1ull << 63), 0); /* never entered */
	CHECK_U64(x->n, n);
	CHECK(x->nslots >= 2 * n && !(x->nslots & (x->nslots - 1)));
}

static void run(unsigned bits, uint64_t first, uint64_t n)
{
	struct table *t = calloc(1, sizeof(*t));
	struct hash_index x = { 0 };

	CHECK(t != NULL);
	if (!t)
		return;
	t->bits = bits;
	CHECK_U64(find(&x, t, 5), 0); /* a zeroed index is empty */
	CHECK_EQ(fill(&x, t, first, n), 0);
	check_all(&x, t, first, n);
	hash_index_release(&x);
	CHECK(x.slots == NULL && x.nslots == 0 && x.n == 0);
	CHECK_U64(find(&x, t, t->keys[first]), 0);
	hash_index_release(&x); /* twice: still fine */
	free(t);
}

static void test_spread_keys(void)
{
	run(0, 0, NKEYS);
}

/* 8 homes for 20,000 keys: every lookup walks a long chain, and wraps around */
static void test_colliding_keys(void)
{
	run(3, 0, 2000);
}

/* positions need not start at 0 (the flame graph's root is never entered) */
static void test_positions_from_one(void)
{
	run(0, 1, NKEYS);
	run(2, 37, 500);
}

/* the first reserve makes @min_slots slots; later ones double only when over half full */
static void test_growth(void)
{
	struct table *t = calloc(1, sizeof(*t));
	struct hash_index x = { 0 };

	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ(fill(&x, t, 0, 1), 0);
	CHECK_U64(x.nslots, 64);
	CHECK_EQ(fill(&x, t, 1, 31), 0);
	CHECK_U64(x.nslots, 64); /* 32 of 64: half full */
	CHECK_EQ(fill(&x, t, 32, 1), 0);
	CHECK_U64(x.nslots, 128);
	check_all(&x, t, 0, 33);
	hash_index_release(&x);
	free(t);
}

int main(void)
{
	RUN(test_spread_keys);
	RUN(test_colliding_keys);
	RUN(test_positions_from_one);
	RUN(test_growth);
	HARNESS_EXIT();
}
