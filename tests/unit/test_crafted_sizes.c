// SPDX-License-Identifier: MIT
/*
 * test_crafted_sizes.c - sizes no allocator returns (2^63, 2^64 - 1) and
 * timestamps at the end of time, as a crafted artifact may hold them: the
 * analysis, the call sites, the timeline and diff take them without
 * undefined behaviour (this test runs under UBSan in `make asan-test`; a
 * signed overflow at 2^63 was issue 27's item 13), byte totals saturate at
 * 2^64 - 1 instead of wrapping, and a block leaves exactly what it added.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "analyze/diff.h"
#include "synth.h"
#include "analyze/timeline.h"

#define HALF (1ull << 63)

/* One heap record of @size at @addr carrying call site @stack. */
static void alloc_at(struct analysis *a, uint64_t ts, uint64_t addr, uint64_t size, uint64_t stack)
{
	struct mt_event ev = {
		.h = { .type = MT_MALLOC, .pid = 7, .tid = 7, .ts = ts, .nfields = 3 }
	};

	ev.f[0] = addr;
	ev.f[1] = size;
	ev.stack = stack;
	analysis_add(a, &ev);
}

/*
 * malloc 2^63 at A (site 1), freed; malloc 2^63 at A again, then 2^64 - 1
 * at B (site 2), leaked.  Allocated: 2^63 + 2^63 + (2^64 - 1) saturates at
 * 2^64 - 1.  Live: 2^63, 0, 2^63, then 2^63 + 2^64 - 1 = 2^63 - 1 (mod
 * 2^64): the peak is 2^63.  Site 1 leaves 0 live after its free (a signed
 * -2^63 delta overflowed there), then leaks 2^63.
 */
static void test_half_and_max(void)
{
	struct analysis a;
	const struct site *s1, *s2;

	analysis_init(&a);
	alloc_at(&a, 1, 0x1000, HALF, 1);
	CHECK_U64(a.live_bytes, HALF);
	S_FREE(&a, 7, 2, 0x1000);
	CHECK_U64(a.live_bytes, 0);
	alloc_at(&a, 3, 0x1000, HALF, 1);
	alloc_at(&a, 4, 0x2000, UINT64_MAX, 2);
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 3);
	CHECK_U64(a.total_allocated_bytes, UINT64_MAX);
	CHECK_U64(a.peak_live_bytes, HALF);
	CHECK_U64(a.leaked_count, 2);
	CHECK_U64(a.leaked_bytes, UINT64_MAX);
	CHECK_U64(a.live_bytes, 0);
	CHECK_U64(a.procs[0].allocated_bytes, UINT64_MAX);
	CHECK_U64(a.procs[0].leaked_bytes, UINT64_MAX);
	s1 = site_get(&a.sites, 1);
	s2 = site_get(&a.sites, 2);
	CHECK_U64(s1->allocated_bytes, UINT64_MAX); /* 2^63 twice */
	CHECK_U64(s1->live_bytes, 0);
	CHECK_U64(s1->leaked_bytes, HALF);
	CHECK_U64(s2->leaked_bytes, UINT64_MAX);
	analysis_release(&a);
}

/* realloc of a 2^63 block to 2^64 - 1, then free: every count returns to 0 live. */
static void test_realloc_huge(void)
{
	struct analysis a;

	analysis_init(&a);
	alloc_at(&a, 1, 0x1000, HALF, 0);
	S_REALLOC(&a, 7, 2, 0x1000, UINT64_MAX, 0x1000);
	CHECK_U64(a.live_bytes, UINT64_MAX);
	S_FREE(&a, 7, 3, 0x1000);
	analysis_finish(&a);
	CHECK_U64(a.live_bytes, 0);
	CHECK_U64(a.peak_live_bytes, UINT64_MAX);
	CHECK_U64(a.leaked_bytes, 0);
	analysis_release(&a);
}

/* RSS fields near 2^64 saturate in their sum; the timeline and its picture take them and 2^64 - 1 ns. */
static void test_rss_and_timeline(void)
{
	struct timeline *tl = timeline__new(0, true);
	struct analysis a;
	struct timeline_meta m = { .command = "crafted", .a = &a, .per_process = true };
	FILE *out = fopen("/dev/null", "w");

	CHECK(tl && out);
	if (!tl || !out)
		return;
	analysis_init(&a);
	timeline_attach(tl, &a);
	S_RSS(&a, 7, 1, UINT64_MAX, UINT64_MAX, 1);
	CHECK_U64(a.peak_rss_bytes, UINT64_MAX);
	alloc_at(&a, UINT64_MAX - 1, 0x1000, UINT64_MAX, 0);
	S_PHYS(&a, 7, UINT64_MAX, UINT64_MAX);
	analysis_finish(&a);
	timeline_finish(tl, UINT64_MAX);
	CHECK_EQ(timeline_write_svg(tl, &m, out), 0);
	CHECK_EQ(timeline_write_html_section(tl, &m, out), 0);
	fclose(out);
	timeline__free(tl);
	analysis_release(&a);
}

/* diff's change of 0 -> 2^64 - 1 and back saturates at INT64_MAX / INT64_MIN instead of flipping sign. */
static void test_diff_change(void)
{
	struct diff_value v;

	diff_value_set(&v, 0, UINT64_MAX);
	CHECK(v.change == INT64_MAX);
	CHECK(!v.pct_valid);
	CHECK(diff_exceeds(&v, 1e300));
	diff_value_set(&v, UINT64_MAX, 0);
	CHECK(v.change == INT64_MIN);
	CHECK(!diff_exceeds(&v, 0));
	diff_value_set(&v, HALF, HALF - 1);
	CHECK(v.change == -1);
	diff_value_set(&v, 1, HALF + 1);
	CHECK(v.change == INT64_MAX);
	CHECK(diff_exceeds(&v, 1e18));
}

int main(void)
{
	RUN(test_half_and_max);
	RUN(test_realloc_huge);
	RUN(test_rss_and_timeline);
	RUN(test_diff_change);
	HARNESS_EXIT();
}
