// SPDX-License-Identifier: MIT
/*
 * test_stacks.c - the stack table (stacks.c) and the per-call-site
 * statistics of the analysis (sites.c) on hand-made event sequences; every
 * expected value is worked out in the comments.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include "harness.h"
#include "analyze/stacks.h"
#include "synth.h"

static struct mt_event *stack_event(uint64_t id, bool truncated, uint32_t n)
{
	struct mt_event *ev = calloc(1, sizeof(*ev));

	ev->h.type = MT_STACK;
	ev->h.pid = 7;
	ev->h.nfields = 1;
	ev->f[STACK_ID] = id;
	ev->truncated = truncated;
	ev->nframes = n;
	for (uint32_t i = 0; i < n && i < MT_STACK_MAX; i++) {
		ev->frames[i].object = 1 + i % 2;
		ev->frames[i].addr = 0x1000 * id + i;
	}
	return ev;
}

static void object_event(struct mt_event *ev, uint32_t id, const char *path, uint8_t bid_len)
{
	memset(ev, 0, sizeof(*ev));
	ev->h.type = MT_OBJECT;
	ev->h.nfields = 1;
	ev->f[OBJECT_ID] = id;
	snprintf(ev->str, sizeof(ev->str), "%s", path);
	ev->build_id_len = bid_len;
	for (uint8_t i = 0; i < bid_len; i++)
		ev->build_id[i] = 0xa0 + i;
}

static void test_table_basic(void)
{
	struct stack_table t;
	struct mt_event *ev = stack_event(5, true, 3), obj;
	const struct mt_stack *st;
	const struct mt_object *o;

	stack_table_init(&t);
	object_event(&obj, 1, "/usr/bin/x", 20);
	CHECK_EQ(stack_table_add_event(&t, &obj), 0);
	object_event(&obj, 2, "/lib/libc.so.6", 0);
	CHECK_EQ(stack_table_add_event(&t, &obj), 0);
	object_event(&obj, 2, "/other", 0); /* a second definition keeps the first */
	CHECK_EQ(stack_table_add_event(&t, &obj), 0);
	CHECK_EQ(stack_table_add_event(&t, ev), 0);
	st = stack_table_get(&t, 5);
	CHECK(st != NULL);
	if (st) {
		CHECK_U64(st->id, 5);
		CHECK_EQ(st->nframes, 3);
		CHECK(st->truncated);
		CHECK_EQ(st->frames[0].object, 1);
		CHECK_U64(st->frames[2].addr, 0x5002);
	}
	CHECK(stack_table_get(&t, 6) == NULL);
	CHECK(stack_table_get(&t, 0) == NULL);
	o = stack_table_object(&t, 1);
	CHECK(o != NULL);
	if (o) {
		CHECK_STR(o->path, "/usr/bin/x");
		CHECK_EQ(o->build_id_len, 20);
		CHECK_EQ(o->build_id[19], 0xa0 + 19);
	}
	o = stack_table_object(&t, 2);
	CHECK(o && !strcmp(o->path, "/lib/libc.so.6") && o->build_id_len == 0);
	CHECK(stack_table_object(&t, 3) == NULL);
	CHECK(stack_table_object(&t, 0) == NULL);
	CHECK_U64(t.truncated, 1);
	stack_table_release(&t);
	free(ev);
}

/* Invalid records are refused with -EINVAL and leave the table as it was. */
static void test_table_invalid(void)
{
	struct stack_table t;
	struct mt_event *ev = stack_event(0, false, 2);

	stack_table_init(&t);
	CHECK_EQ(stack_table_add_event(&t, ev), -EINVAL); /* id 0 */
	ev->f[STACK_ID] = 9;
	ev->nframes = 0;
	CHECK_EQ(stack_table_add_event(&t, ev), -EINVAL); /* no frames */
	ev->nframes = MT_STACK_MAX + 1;
	CHECK_EQ(stack_table_add_event(&t, ev), -EINVAL); /* too many */
	CHECK_U64(t.nstacks, 0);
	ev->h.type = MT_MALLOC; /* other types are not the table's */
	CHECK_EQ(stack_table_add_event(&t, ev), 0);
	CHECK_U64(t.nstacks, 0);
	stack_table_release(&t);
	free(ev);
}

/* 10,000 stacks (the index grows many times); each one found by its id, a duplicate ignored. */
static void test_table_many(void)
{
	struct stack_table t;
	int bad = 0;

	stack_table_init(&t);
	for (uint64_t id = 1; id <= 10000; id++) {
		struct mt_event *ev = stack_event(id * 7919, false, 1 + id % MT_STACK_MAX);

		bad += stack_table_add_event(&t, ev) != 0;
		free(ev);
	}
	{
		struct mt_event *ev = stack_event(7919, false, 1);

		bad += stack_table_add_event(&t, ev) != 0;
		free(ev);
	}
	CHECK_EQ(bad, 0);
	CHECK_U64(t.nstacks, 10000);
	for (uint64_t id = 1; id <= 10000; id++) {
		const struct mt_stack *st = stack_table_get(&t, id * 7919);

		bad += !st || st->nframes != 1 + id % MT_STACK_MAX ||
		       st->frames[0].addr != 0x1000 * id * 7919;
	}
	CHECK_EQ(bad, 0);
	CHECK(stack_table_get(&t, 7918) == NULL);
	stack_table_release(&t);
}

static void alloc_at(struct analysis *a, uint16_t type, uint32_t pid, uint64_t ts, uint64_t addr,
		     uint64_t size, uint64_t old, uint64_t stack)
{
	struct mt_event *ev = calloc(1, sizeof(*ev));

	ev->h.type = type;
	ev->h.pid = ev->h.tid = pid;
	ev->h.ts = ts;
	ev->h.nfields = 3;
	ev->f[0] = addr;
	ev->f[1] = size;
	ev->f[2] = old;
	ev->stack = stack;
	analysis_add(a, ev);
	free(ev);
}

static const struct site *site_of(struct analysis *a, uint64_t stack)
{
	for (uint64_t i = 0; i < a->sites.nsites; i++)
		if (a->sites.sites[i].stack == stack)
			return &a->sites.sites[i];
	return NULL;
}

/*
 * site 1: malloc A 100                live 100 (peak)
 * site 2: malloc B 50                 live 150 (peak)
 *         free A                      live 50
 * site 2: malloc C 200                live 250 (peak: site 1 holds 0, site 2 250)
 *         free C                      live 50
 * site 1: malloc D 10                 live 60
 * end: B (site 2, 50) and D (site 1, 10) leak.
 */
/*
 * Object ids as a crafted file may give them: 200,000 of them, sparse and
 * descending from UINT32_MAX (the recorder hands out 1, 2, 3...).  Each is
 * found, a repeated id keeps its first path, an id never given is absent,
 * within 10 s (0.1 s here; a linear search per object made it 2e10
 * comparisons, 80 s).
 */
static void test_table_sparse_object_ids(void)
{
	struct stack_table t;
	struct mt_event *ev = calloc(1, sizeof(*ev));
	const uint32_t n = 200000;
	uint32_t found = 0;
	struct timespec t0, t1;
	char path[32];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	stack_table_init(&t);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/obj/%u", i);
		object_event(ev, UINT32_MAX - 7 * i, path, 0);
		CHECK_EQ(stack_table_add_event(&t, ev), 0);
	}
	object_event(ev, UINT32_MAX - 7, "/second/definition", 0);
	CHECK_EQ(stack_table_add_event(&t, ev), 0);
	CHECK_EQ(t.nobjects, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct mt_object *o = stack_table_object(&t, UINT32_MAX - 7 * i);

		snprintf(path, sizeof(path), "/obj/%u", i);
		found += o && o->id == UINT32_MAX - 7 * i && !strcmp(o->path, path);
	}
	CHECK_EQ(found, n);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 10);
	CHECK(stack_table_object(&t, UINT32_MAX - 1) == NULL);
	CHECK(stack_table_object(&t, 1) == NULL);
	CHECK(stack_table_object(&t, 0) == NULL);
	stack_table_release(&t);
	free(ev);
}

static void test_sites_peak(void)
{
	struct analysis a;
	const struct site *s1, *s2;

	analysis_init(&a);
	alloc_at(&a, MT_MALLOC, 10, 1, 0xA0, 100, 0, 1);
	alloc_at(&a, MT_MALLOC, 10, 2, 0xB0, 50, 0, 2);
	S_FREE(&a, 10, 3, 0xA0);
	alloc_at(&a, MT_MALLOC, 10, 4, 0xC0, 200, 0, 2);
	S_FREE(&a, 10, 5, 0xC0);
	alloc_at(&a, MT_MALLOC, 10, 6, 0xD0, 10, 0, 1);
	analysis_finish(&a);
	CHECK_U64(a.peak_live_bytes, 250);
	s1 = site_of(&a, 1);
	s2 = site_of(&a, 2);
	CHECK(s1 && s2);
	if (!s1 || !s2)
		goto out;
	CHECK_U64(s1->allocs, 2);
	CHECK_U64(s1->allocated_bytes, 110);
	CHECK_U64(s1->peak_bytes, 0);
	CHECK_U64(s1->leaked_count, 1);
	CHECK_U64(s1->leaked_bytes, 10);
	CHECK_U64(s2->allocs, 2);
	CHECK_U64(s2->allocated_bytes, 250);
	CHECK_U64(s2->peak_bytes, 250);
	CHECK_U64(s2->leaked_count, 1);
	CHECK_U64(s2->leaked_bytes, 50);
	CHECK_U64(s1->live_bytes + s2->live_bytes, 0);
out:
	analysis_release(&a);
}

/*
 * Sites untouched after the last peak are settled at the end: site 3
 * malloc 1000, site 4 malloc 5 (peak 1005), nothing freed, process exits.
 * Then site 5 (another process) allocates 7 after the exit: live 7, no new
 * peak.  Peaks: 1000 + 5 + 0 = 1005.
 */
static void test_sites_settle(void)
{
	struct analysis a;

	analysis_init(&a);
	alloc_at(&a, MT_MALLOC, 10, 1, 0x100, 1000, 0, 3);
	alloc_at(&a, MT_MALLOC, 10, 2, 0x200, 5, 0, 4);
	S_EXIT(&a, 10, 3, 0);
	alloc_at(&a, MT_MALLOC, 11, 4, 0x300, 7, 0, 5);
	analysis_finish(&a);
	CHECK_U64(a.peak_live_bytes, 1005);
	CHECK_U64(site_of(&a, 3)->peak_bytes, 1000);
	CHECK_U64(site_of(&a, 4)->peak_bytes, 5);
	CHECK_U64(site_of(&a, 5)->peak_bytes, 0);
	CHECK_U64(site_of(&a, 3)->leaked_bytes, 1000);
	CHECK_U64(site_of(&a, 5)->leaked_bytes, 7);
	analysis_release(&a);
}

/*
 * realloc moves a block to the realloc's site: site 1 malloc 100 @A,
 * site 2 realloc A -> B 300 (live 300, peak: site 1 0, site 2 300); a
 * malloc without stack (site 0) of 20 @A; free B.  Leak: 20 at site 0.
 * An allocation over a block never freed (a lost free) takes the old
 * block off its site: site 6 malloc 40 @E, site 7 malloc 30 @E.
 */
static void test_sites_realloc(void)
{
	struct analysis a;
	uint64_t sum = 0;

	analysis_init(&a);
	alloc_at(&a, MT_MALLOC, 10, 1, 0xA0, 100, 0, 1);
	alloc_at(&a, MT_REALLOC, 10, 2, 0xB0, 300, 0xA0, 2);
	alloc_at(&a, MT_MALLOC, 10, 3, 0xA0, 20, 0, 0);
	S_FREE(&a, 10, 4, 0xB0);
	alloc_at(&a, MT_MALLOC, 10, 5, 0xE0, 40, 0, 6);
	alloc_at(&a, MT_MALLOC, 10, 6, 0xE0, 30, 0, 7);
	analysis_finish(&a);
	CHECK_U64(a.peak_live_bytes, 320);
	CHECK_U64(site_of(&a, 1)->peak_bytes, 0);
	CHECK_U64(site_of(&a, 2)->peak_bytes, 300);
	CHECK_U64(site_of(&a, 0)->peak_bytes, 20);
	CHECK_U64(site_of(&a, 0)->leaked_bytes, 20);
	CHECK_U64(site_of(&a, 6)->leaked_bytes, 0);
	CHECK_U64(site_of(&a, 7)->leaked_bytes, 30);
	CHECK_U64(site_of(&a, 2)->allocs, 1);
	for (uint64_t i = 0; i < a.sites.nsites; i++)
		sum += a.sites.sites[i].peak_bytes;
	CHECK_U64(sum, a.peak_live_bytes);
	analysis_release(&a);
}

/* A pseudo-random stream over 300 sites: the sites' peaks always sum to the tree's peak. */
static void test_sites_sum(void)
{
	struct analysis a;
	uint64_t x = 88172645463325252ull, sum = 0, leaked = 0;

	analysis_init(&a);
	for (uint64_t i = 1; i <= 200000; i++) {
		uint64_t addr;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		addr = 0x1000 + (x % 4096) * 16;
		if (x & 0x100000)
			S_FREE(&a, 10 + (x >> 40) % 3, i, addr);
		else
			alloc_at(&a, MT_MALLOC, 10 + (x >> 40) % 3, i, addr, 1 + (x >> 20) % 5000,
				 0, (x >> 30) % 300);
	}
	analysis_finish(&a);
	for (uint64_t i = 0; i < a.sites.nsites; i++) {
		sum += a.sites.sites[i].peak_bytes;
		leaked += a.sites.sites[i].leaked_bytes;
	}
	CHECK_U64(sum, a.peak_live_bytes);
	CHECK_U64(leaked, a.leaked_bytes);
	analysis_release(&a);
}

int main(void)
{
	RUN(test_table_basic);
	RUN(test_table_invalid);
	RUN(test_table_many);
	RUN(test_table_sparse_object_ids);
	RUN(test_sites_peak);
	RUN(test_sites_settle);
	RUN(test_sites_realloc);
	RUN(test_sites_sum);
	HARNESS_EXIT();
}
