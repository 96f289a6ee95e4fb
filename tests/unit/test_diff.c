// SPDX-License-Identifier: MIT
/*
 * test_diff.c - diff's threshold verdict and its pairing of processes by
 * command (src/analyze/diff.c), on synthetic analyses.
 */
#include <stdlib.h>
#include "harness.h"
#include "analyze/diff.h"
#include "synth.h"

static bool exceeds(uint64_t base, uint64_t new, double pct)
{
	struct diff_value v;

	diff_value_set(&v, base, new);
	return diff_exceeds(&v, pct);
}

static void test_threshold(void)
{
	struct diff_value v = { .known = false };

	CHECK(!exceeds(100, 105, 5)); /* exactly 5%: not beyond */
	CHECK(exceeds(100, 106, 5));
	CHECK(exceeds(1000, 1051, 5)); /* 5.1% */
	CHECK(!exceeds(1000, 1050, 5));
	CHECK(!exceeds(100, 90, 0));  /* a shrink never fails */
	CHECK(!exceeds(100, 100, 0)); /* no change never fails */
	CHECK(exceeds(100, 101, 0));  /* any growth beyond 0% */
	CHECK(exceeds(0, 1, 1000));   /* from nothing: beyond every threshold */
	CHECK(!exceeds(0, 0, 0));
	CHECK(!exceeds(200, 201, 0.5)); /* 0.5% exactly */
	CHECK(exceeds(200, 202, 0.5));
	/* large byte counts: 2^62 growing by one byte is 2.2e-17 %, above 0 only */
	CHECK(exceeds(1ull << 62, (1ull << 62) + 1, 0));
	CHECK(!exceeds(1ull << 62, (1ull << 62) + 1, 1e-10));
	CHECK(!diff_exceeds(&v, 0)); /* not recorded in both: never */

	diff_value_set(&v, 200, 150);
	CHECK_EQ(v.change, -50);
	CHECK(v.pct_valid && v.pct == -25.0);
	diff_value_set(&v, 0, 10);
	CHECK(!v.pct_valid);
	diff_value_set(&v, 0, 0);
	CHECK(v.pct_valid && v.pct == 0.0);
}

static void test_metric_names(void)
{
	CHECK_EQ(diff_metric_lookup("peak_heap_bytes"), DIFF_PEAK_HEAP);
	CHECK_EQ(diff_metric_lookup("peak_physical_bytes"), DIFF_PEAK_PHYSICAL);
	CHECK_EQ(diff_metric_lookup("peak_heap"), -1);
	for (int m = 0; m < DIFF_NMETRICS; m++)
		CHECK_EQ(diff_metric_lookup(diff_metric_name(m)), m);
}

/* A tree of processes: @n commands, forked from pid @root in this order. */
static void build(struct analysis *a, uint32_t root, const char *const *cmds, int n)
{
	analysis_init(a);
	for (int i = 0; i < n; i++) {
		uint32_t pid = root + (uint32_t)i;

		if (i)
			S_FORK(a, root, 1, pid);
		S_EXEC(a, pid, 2, cmds[i]);
	}
	analysis_finish(a);
}

/*
 * BASE: sh make cc cc ld; NEW: sh cc make cc as.  Pairs by command, k-th
 * with k-th: sh-sh, make-make, the two cc in order, ld alone, as alone.
 */
static void test_match(void)
{
	static const char *const b[] = { "/bin/sh", "/usr/bin/make", "/usr/bin/cc", "/usr/bin/cc",
					 "/usr/bin/ld" };
	static const char *const n[] = { "/bin/sh", "/usr/bin/cc", "/usr/bin/make", "/usr/bin/cc",
					 "/usr/bin/as" };
	struct analysis ab, an;
	int match[5];
	bool matched[5];

	build(&ab, 100, b, 5);
	build(&an, 500, n, 5);
	CHECK_EQ(diff_match_procs(&ab, &an, match, matched), 0);
	CHECK_EQ(match[0], 0);	/* sh */
	CHECK_EQ(match[1], 2);	/* make */
	CHECK_EQ(match[2], 1);	/* first cc -> first cc */
	CHECK_EQ(match[3], 3);	/* second cc -> second cc */
	CHECK_EQ(match[4], -1); /* ld: only in BASE */
	CHECK(matched[0] && matched[1] && matched[2] && matched[3]);
	CHECK(!matched[4]); /* as: only in NEW */
	analysis_release(&ab);
	analysis_release(&an);
}

/* Tree metrics; physical and RSS only when recorded. */
static void test_tree_metrics(void)
{
	struct analysis a;
	uint64_t v = 0;

	analysis_init(&a);
	S_MALLOC(&a, 1, 1, 0x10, 40);
	S_REALLOC(&a, 1, 2, 0x20, 60, 0x10);
	analysis_finish(&a);
	CHECK(diff_tree_metric(&a, false, DIFF_PEAK_HEAP, &v) && v == 60);
	CHECK(diff_tree_metric(&a, false, DIFF_ALLOCATED, &v) && v == 100);
	CHECK(diff_tree_metric(&a, false, DIFF_ALLOC_COUNT, &v) && v == 2);
	CHECK(diff_tree_metric(&a, false, DIFF_LEAKED, &v) && v == 60);
	CHECK(!diff_tree_metric(&a, false, DIFF_PEAK_RSS, &v));
	CHECK(!diff_tree_metric(&a, false, DIFF_PEAK_PHYSICAL, &v));
	CHECK(diff_tree_metric(&a, true, DIFF_PEAK_PHYSICAL, &v) && v == 0);
	analysis_release(&a);
}

int main(void)
{
	RUN(test_threshold);
	RUN(test_metric_names);
	RUN(test_match);
	RUN(test_tree_metrics);
	HARNESS_EXIT();
}
