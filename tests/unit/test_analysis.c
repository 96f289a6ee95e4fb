// SPDX-License-Identifier: MIT
/*
 * test_analysis.c - the numbers of docs/METRICS.md on synthetic event
 * streams; every expected value is worked out by hand in the comments.
 */
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "synth.h"

/* malloc 100, malloc 50, free the 100: peak 150, live 50, leaked 50 at the end. */
static void test_heap_basic(void)
{
	struct analysis a;

	analysis_init(&a);
	S_MALLOC(&a, 10, 1, 0x1000, 100);
	S_MALLOC(&a, 10, 2, 0x2000, 50);
	S_FREE(&a, 10, 3, 0x1000);
	CHECK_U64(a.live_bytes, 50);
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 2);
	CHECK_U64(a.total_allocated_bytes, 150);
	CHECK_U64(a.free_count, 1);
	CHECK_U64(a.unknown_free_count, 0);
	CHECK_U64(a.peak_live_bytes, 150);
	CHECK_U64(a.peak_live_ts, 2);
	CHECK_U64(a.leaked_count, 1);
	CHECK_U64(a.leaked_bytes, 50);
	CHECK_U64(a.live_bytes, 0);
	analysis_release(&a);
}

/*
 * realloc: malloc 100 @A; realloc A -> B 300; realloc B -> B 40 (in place);
 * free B.  Allocations: 3 (100 + 300 + 40 = 440 bytes); frees: 1.
 * Live: 100, 300, 40, 0: peak 300 (the old block is released as the new
 * one is counted, never both).
 */
static void test_realloc(void)
{
	struct analysis a;

	analysis_init(&a);
	S_MALLOC(&a, 10, 1, 0xA000, 100);
	S_REALLOC(&a, 10, 2, 0xB000, 300, 0xA000);
	S_REALLOC(&a, 10, 3, 0xB000, 40, 0xB000);
	CHECK_U64(a.live_bytes, 40);
	S_FREE(&a, 10, 4, 0xB000);
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 3);
	CHECK_U64(a.total_allocated_bytes, 440);
	CHECK_U64(a.free_count, 1);
	CHECK_U64(a.peak_live_bytes, 300);
	CHECK_U64(a.leaked_bytes, 0);
	CHECK_U64(a.unknown_free_count, 0);
	analysis_release(&a);
}

/*
 * Frees of unknown addresses (blocks from before tracking started) change
 * nothing but free_count and unknown_free_count: live 0 -> 70 -> 70 -> 0,
 * peak 70.  A realloc of an unknown block counts its new size only.
 */
static void test_unknown_free(void)
{
	struct analysis a;

	analysis_init(&a);
	S_FREE(&a, 10, 1, 0xdead0);
	S_MALLOC(&a, 10, 2, 0x1000, 70);
	S_FREE(&a, 10, 3, 0xbeef0);
	CHECK_U64(a.live_bytes, 70);
	S_FREE(&a, 10, 4, 0x1000);
	S_REALLOC(&a, 10, 5, 0x3000, 20, 0x9990);
	analysis_finish(&a);
	CHECK_U64(a.free_count, 3);
	CHECK_U64(a.unknown_free_count, 3);
	CHECK_U64(a.peak_live_bytes, 70);
	CHECK_U64(a.leaked_bytes, 20);
	analysis_release(&a);
}

/* malloc at an address that is still live: the free was missed; the old block is replaced. */
static void test_alloc_over_live(void)
{
	struct analysis a;

	analysis_init(&a);
	S_MALLOC(&a, 10, 1, 0x1000, 100);
	S_MALLOC(&a, 10, 2, 0x1000, 30);
	CHECK_U64(a.live_bytes, 30);
	analysis_finish(&a);
	CHECK_U64(a.peak_live_bytes, 100);
	CHECK_U64(a.leaked_count, 1);
	CHECK_U64(a.leaked_bytes, 30);
	analysis_release(&a);
}

/*
 * Blocks belong to the process that allocated them.  Parent 10 allocates
 * 0x1000 (64 B) and forks 11; the child frees 0x1000 (its inherited copy:
 * unknown to the child), allocates 0x2000 (8 B) and exits: leaked 8 (child).
 * The parent execs: its 0x1000 is leaked (64).  Then the new image mallocs
 * 0x1000 (16 B) and frees it.  Total leaked: 2 blocks, 72 bytes.
 */
static void test_leaks_per_process(void)
{
	struct analysis a;
	const struct proc_summary *p, *c;

	analysis_init(&a);
	S_EXEC(&a, 10, 1, "/bin/sh");
	S_MALLOC(&a, 10, 2, 0x1000, 64);
	S_FORK(&a, 10, 3, 11);
	S_FREE(&a, 11, 4, 0x1000);
	S_MALLOC(&a, 11, 5, 0x2000, 8);
	S_EXIT(&a, 11, 6, 0);
	CHECK_U64(a.leaked_bytes, 8);
	S_EXEC(&a, 10, 7, "/usr/bin/make");
	CHECK_U64(a.leaked_bytes, 72);
	S_MALLOC(&a, 10, 8, 0x1000, 16);
	S_FREE(&a, 10, 9, 0x1000);
	S_EXIT(&a, 10, 10, 2);
	analysis_finish(&a);
	CHECK_U64(a.leaked_count, 2);
	CHECK_U64(a.leaked_bytes, 72);
	CHECK_U64(a.unknown_free_count, 1);
	CHECK_U64(a.peak_live_bytes, 72);
	CHECK_EQ(a.nprocs, 2);
	p = analysis_proc(&a, 10);
	c = analysis_proc(&a, 11);
	CHECK(p && c);
	if (p && c) {
		CHECK_STR(p->command, "make");
		CHECK_STR(c->command, "sh");
		CHECK_EQ(c->ppid, 10);
		CHECK_U64(p->leaked_bytes, 64);
		CHECK_U64(c->leaked_bytes, 8);
		CHECK_U64(p->peak_heap_bytes, 64);
		CHECK_U64(c->peak_heap_bytes, 8);
		CHECK_EQ(p->exit_code, 2);
		CHECK_U64(p->allocs, 2);
		CHECK_U64(c->frees, 1);
	}
	analysis_release(&a);
}

/*
 * Tree RSS is the sum over live processes: 10 at 100 (60 anon, 30 file,
 * 10 shmem); 11 at 50 -> tree 150 (peak); 10 drops to 20 -> 70; 11 exits
 * -> 20; a late rss record of the dead 11 is ignored.
 */
static void test_rss_tree(void)
{
	struct analysis a;
	const struct proc_summary *p;

	analysis_init(&a);
	S_RSS(&a, 10, 1, 60, 30, 10);
	S_FORK(&a, 10, 2, 11);
	S_RSS(&a, 11, 3, 50, 0, 0);
	CHECK_U64(a.tree_rss_bytes, 150);
	CHECK_U64(a.tree_anon, 110);
	S_RSS(&a, 10, 4, 10, 10, 0);
	CHECK_U64(a.tree_rss_bytes, 70);
	S_EXIT(&a, 11, 5, 0);
	CHECK_U64(a.tree_rss_bytes, 20);
	S_RSS(&a, 11, 6, 500, 0, 0);
	analysis_finish(&a);
	CHECK_U64(a.tree_rss_bytes, 20);
	CHECK_U64(a.tree_anon, 10);
	CHECK_U64(a.tree_file, 10);
	CHECK_U64(a.tree_shmem, 0);
	CHECK_U64(a.peak_rss_bytes, 150);
	CHECK_U64(a.peak_rss_ts, 3);
	p = analysis_proc(&a, 10);
	CHECK(p && p->peak_rss_bytes == 100);
	p = analysis_proc(&a, 11);
	CHECK(p && p->peak_rss_bytes == 50);
	analysis_release(&a);
}

/* physical: the last record's bytes; peak is the largest, at its ts. */
static void test_physical(void)
{
	struct analysis a;

	analysis_init(&a);
	S_PHYS(&a, 10, 5, 4096);
	S_PHYS(&a, 11, 6, 12288);
	S_PHYS(&a, 10, 9, 8192);
	analysis_finish(&a);
	CHECK(a.has_physical);
	CHECK_U64(a.physical_bytes, 8192);
	CHECK_U64(a.peak_physical_bytes, 12288);
	CHECK_U64(a.peak_physical_ts, 6);
	CHECK_EQ(a.nprocs, 0);
	analysis_release(&a);
}

/*
 * Scale: 5000 processes, each with 200 live blocks when it exits; every
 * exit sweeps its own table only, and the numbers stay exact:
 * leaked = 5000 * 200 blocks of 16 bytes.
 */
static void test_many_processes(void)
{
	struct analysis a;

	analysis_init(&a);
	for (uint32_t pid = 100; pid < 5100; pid++) {
		S_FORK(&a, 1, pid, pid);
		for (uint64_t i = 0; i < 300; i++)
			S_MALLOC(&a, pid, pid, 0x10000 + i * 32, 16);
		for (uint64_t i = 0; i < 100; i++)
			S_FREE(&a, pid, pid, 0x10000 + i * 32);
		S_EXIT(&a, pid, pid, 0);
	}
	analysis_finish(&a);
	CHECK_EQ(a.nprocs, 5001);
	CHECK_U64(a.leaked_count, 5000 * 200);
	CHECK_U64(a.leaked_bytes, 5000 * 200 * 16);
	CHECK_U64(a.peak_live_bytes, 300 * 16);
	CHECK(analysis_proc(&a, 4321) && analysis_proc(&a, 4321)->ppid == 1);
	CHECK(!analysis_proc(&a, 99));
	analysis_release(&a);
}

/* Many short-lived blocks in one process: the table stays sized by live blocks. */
static void test_table_bounded(void)
{
	struct analysis a;
	const struct proc_summary *p;

	analysis_init(&a);
	for (uint64_t i = 0; i < 1000000; i++) {
		S_MALLOC(&a, 7, i, 0x100000 + i * 16, 1);
		S_FREE(&a, 7, i, 0x100000 + i * 16);
	}
	p = analysis_proc(&a, 7);
	CHECK(p && p->live.nslots <= 128);
	CHECK_U64(a.live_bytes, 0);
	CHECK_U64(a.peak_live_bytes, 1);
	analysis_release(&a);
}

/*
 * The live table against a plain array: 300,000 random mallocs and frees on
 * 3000 addresses (many collisions, deletes in the middle of probe chains).
 * After every event live bytes, and at the end the leak count, must match.
 */
static void test_table_random(void)
{
	enum { NADDR = 3000 };
	static uint64_t ref[NADDR]; /* size live at address i, 0: none */
	uint64_t rng = 12345, live = 0, unknown = 0, nlive = 0, bad = 0;
	struct analysis a;

	analysis_init(&a);
	for (int i = 0; i < 300000; i++) {
		unsigned k;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		k = (unsigned)(rng >> 8) % NADDR;
		if (rng & 1) {
			live += 1 + (rng >> 40) % 100 - ref[k];
			nlive += !ref[k];
			ref[k] = 1 + (rng >> 40) % 100;
			S_MALLOC(&a, 3, i, 0x7f0000001000ull + (uint64_t)k * 48, ref[k]);
		} else {
			unknown += !ref[k];
			nlive -= !!ref[k];
			live -= ref[k];
			ref[k] = 0;
			S_FREE(&a, 3, i, 0x7f0000001000ull + (uint64_t)k * 48);
		}
		bad += a.live_bytes != live;
	}
	CHECK_U64(bad, 0);
	CHECK_U64(a.unknown_free_count, unknown);
	analysis_finish(&a);
	CHECK_U64(a.leaked_count, nlive);
	CHECK_U64(a.leaked_bytes, live);
	analysis_release(&a);
}

/*
 * Temporary allocations (heaptrack's test, per thread): on thread 10,
 * malloc A, free A: temporary.  malloc B, malloc C, free C (temporary),
 * free B (not: C came between).  malloc D, realloc D -> E, free E
 * (temporary: the realloc is the thread's last allocation, at E), while
 * thread 11's malloc F in between does not count for thread 10; free F on
 * 11 is temporary too.  A free right after a free is not temporary either.
 * Totals: 4 of 6 allocations (3 on thread 10, 1 on 11).
 */
static void test_temporary(void)
{
	struct analysis a;

	analysis_init(&a);
	S_MALLOC(&a, 10, 1, 0xA0, 8);
	S_FREE(&a, 10, 2, 0xA0);
	S_MALLOC(&a, 10, 3, 0xB0, 8);
	S_MALLOC(&a, 10, 4, 0xC0, 8);
	S_FREE(&a, 10, 5, 0xC0);
	S_FREE(&a, 10, 6, 0xB0);
	S_MALLOC(&a, 10, 7, 0xD0, 8);
	S_REALLOC(&a, 10, 8, 0xE0, 16, 0xD0);
	S_MALLOC(&a, 11, 9, 0xF0, 8);
	S_FREE(&a, 10, 10, 0xE0);
	S_FREE(&a, 11, 11, 0xF0);
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 6);
	CHECK_U64(a.temporary_count, 4); /* A, C, E on 10; F on 11 */
	CHECK_U64(analysis_proc(&a, 10)->temporary, 3);
	CHECK_U64(analysis_proc(&a, 11)->temporary, 1);
	CHECK_U64(a.sites.nsites, 1);
	CHECK_U64(a.sites.sites[0].temporary, 4);
	analysis_release(&a);
}

/* Sizes by power of two: 0 -> bucket 0; 1 -> 1; 2, 3 -> 2; 4096 -> 13; 2^63 -> 64. */
static void test_size_histogram(void)
{
	struct analysis a;

	analysis_init(&a);
	S_MALLOC(&a, 10, 1, 0x10, 0);
	S_MALLOC(&a, 10, 2, 0x20, 1);
	S_MALLOC(&a, 10, 3, 0x30, 2);
	S_MALLOC(&a, 10, 4, 0x40, 3);
	S_MALLOC(&a, 10, 5, 0x50, 4096);
	S_MALLOC(&a, 10, 6, 0x60, 1ull << 63);
	analysis_finish(&a);
	CHECK_U64(a.sizes.count[0], 1);
	CHECK_U64(a.sizes.count[1], 1);
	CHECK_U64(a.sizes.count[2], 2);
	CHECK_U64(a.sizes.bytes[2], 5);
	CHECK_U64(a.sizes.count[13], 1);
	CHECK_U64(a.sizes.bytes[13], 4096);
	CHECK_U64(a.sizes.count[64], 1);
	CHECK_U64(size_bucket_min(13), 4096);
	CHECK_U64(size_bucket_max(13), 8191);
	CHECK_U64(size_bucket_max(64), UINT64_MAX);
	CHECK_U64(size_bucket_max(0), 0);
	analysis_release(&a);
}

/*
 * An attached run: pid 10 exits holding 100 bytes (leaked); pid 11 is still
 * alive at the end holding 30 + 20 (live at end, not leaked).
 */
static void test_attached_live_at_end(void)
{
	struct analysis a;

	analysis_init(&a);
	analysis_set_attached(&a, true);
	S_MALLOC(&a, 10, 1, 0x1000, 100);
	S_MALLOC(&a, 11, 2, 0x2000, 30);
	S_MALLOC(&a, 11, 3, 0x3000, 20);
	S_EXIT(&a, 10, 4, 0);
	analysis_finish(&a);
	CHECK_U64(a.leaked_count, 1);
	CHECK_U64(a.leaked_bytes, 100);
	CHECK_U64(a.live_end_count, 2);
	CHECK_U64(a.live_end_bytes, 50);
	CHECK_U64(a.live_end_procs, 1);
	CHECK_U64(analysis_proc(&a, 11)->leaked_bytes, 0);
	CHECK_U64(analysis_proc(&a, 11)->live_end_bytes, 50);
	CHECK_U64(a.sites.sites[0].leaked_bytes, 100);
	CHECK_U64(a.live_bytes, 0);
	analysis_release(&a);
}

int main(void)
{
	RUN(test_heap_basic);
	RUN(test_realloc);
	RUN(test_unknown_free);
	RUN(test_alloc_over_live);
	RUN(test_leaks_per_process);
	RUN(test_rss_tree);
	RUN(test_physical);
	RUN(test_many_processes);
	RUN(test_table_bounded);
	RUN(test_table_random);
	RUN(test_temporary);
	RUN(test_size_histogram);
	RUN(test_attached_live_at_end);
	HARNESS_EXIT();
}
