// SPDX-License-Identifier: MIT
/*
 * test_fast_unwind.c - the in-process unwinder (src/fast/unwind.c) on
 * crafted tables and stacks: each CFA and rbp rule, the outermost frame, a
 * zero return address, frame chains that leave the stack (wild, or into
 * other readable memory: truncated, never read), a pc in no mapping, an
 * unknown row, tables whose slices point past their ends, the index path
 * against the plain search, the 127-frame limit, the stack ids (FNV-1a as
 * in unwind.bpf.h), the stack bounds read from /proc/self/maps (main
 * thread and a pthread), and the per-process set of written ids.
 *
 * The library's files are not in libmemtrack-core.a (they are built with
 * the library's flags into libmemtrack-fast.so): the one under test is
 * included here, with own_map.c and table_pages.c, which it reads its
 * tables through.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "harness.h"
#include "fast/own_map.c"
#include "fast/table_pages.c"
#include "fast/unwind.c"

#define BIAS 0x3ff000ull
#define OBJ 7u

/* One function per row: A (rsp+16), B (frame pointer), the end, unknown, deref, C (rsp+8). */
static const struct mt_unwind_row rows[] = {
	{ .pc = 0x1000, .cfa = MT_CFA_RSP, .cfa_off = 16, .rbp = MT_RBP_SAME },
	{ .pc = 0x2000, .cfa = MT_CFA_RBP, .cfa_off = 16, .rbp = MT_RBP_AT_CFA, .rbp_off = -16 },
	{ .pc = 0x3000, .cfa = MT_CFA_END },
	{ .pc = 0x4000, .cfa = MT_CFA_NONE },
	{ .pc = 0x5000, .cfa = MT_CFA_DEREF_RBP, .cfa_off = 8, .rbp = MT_RBP_LOST },
	{ .pc = 0x6000, .cfa = MT_CFA_RSP, .cfa_off = 8, .rbp = MT_RBP_SAME },
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))
static const uint64_t index_[] = { 0, 1, 2, 3, 4, 5 }; /* text_lo 0x1000, 4 KiB buckets */

static struct mt_umaps maps;
static uint64_t stk[512];	       /* the fake thread stack */
static uint64_t elsewhere[16] = { 1 }; /* readable memory that is not the stack */

static struct fast_unwind_tables tables(bool indexed)
{
	struct fast_unwind_tables t = { rows, NROWS, index_, 6, &maps, NULL, 0, NULL };

	memset(&maps, 0, sizeof(maps));
	maps.n = 1;
	maps.m[0] = (struct mt_umap){ .start = 0x400000,
				      .end = 0x500000,
				      .bias = BIAS,
				      .object = OBJ,
				      .row_start = 0,
				      .nrows = NROWS };
	if (indexed) {
		maps.m[0].text_lo = 0x1000;
		maps.m[0].index_start = 0;
		maps.m[0].nbuckets = 6;
		maps.m[0].shift = 12;
	}
	return t;
}

#define PC(elf) (BIAS + (elf))
#define AT(i) ((uint64_t)(uintptr_t)&stk[i])
#define LO AT(0)
#define HI ((uint64_t)(uintptr_t)(stk + 512))

/* unwind.bpf.h's id of frames (OBJ, @addrs[i]) */
static uint64_t id_of(const uint64_t *addrs, unsigned n, bool complete)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (unsigned i = 0; i < n; i++) {
		h = (h ^ OBJ) * 0x100000001b3ull;
		h = (h ^ addrs[i]) * 0x100000001b3ull;
	}
	return (h ^ (complete ? 0 : 0x9e3779b97f4a7c15ull)) | 1;
}

/* A -> B -> the outermost frame; B's rbp is the caller's (fast_unwind's @bp). */
static void chain(void)
{
	memset(stk, 0, sizeof(stk));
	stk[0] = PC(0x1010); /* the allocator's return address: in A */
	stk[2] = PC(0x2010); /* A's CFA is stk + 3: its return address, in B */
	stk[4] = AT(10);     /* B saved the caller's rbp at its CFA - 16 */
	stk[5] = PC(0x3010); /* B's CFA is rbp + 16 = stk + 6 */
}

static void test_complete_chain(void)
{
	static const uint64_t want[] = { 0x1010, 0x2010, 0x3010 };

	for (int indexed = 0; indexed < 2; indexed++) {
		struct fast_unwind_tables t = tables(indexed);
		struct fast_stack s;

		chain();
		if (!indexed) { /* the unwinders find rows through the index only */
			CHECK_U64(fast_unwind(&t, AT(0), AT(4), LO, HI, &s), id_of(want, 1, false));
			CHECK_EQ(s.n, 1u);
			CHECK_EQ(s.truncated, 1u);
			continue;
		}
		CHECK_U64(fast_unwind(&t, AT(0), AT(4), LO, HI, &s), id_of(want, 3, true));
		CHECK_EQ(s.n, 3u);
		CHECK_EQ(s.truncated, 0u);
		for (unsigned i = 0; i < 3 && i < s.n; i++) {
			CHECK_EQ(s.frames[i].object, OBJ);
			CHECK_U64(s.frames[i].addr, want[i]);
		}
	}
}

static void test_leaves_the_stack(void)
{
	static const uint64_t want[] = { 0x1010, 0x2010 };
	uint64_t wild[] = { 0x10, (uint64_t)(uintptr_t)elsewhere, HI - 8, LO - 64 };
	struct fast_unwind_tables t = tables(true);

	for (unsigned i = 0; i < sizeof(wild) / sizeof(wild[0]); i++) {
		struct fast_stack s;

		chain();
		/* B's CFA is rbp + 16: rbp points outside the stack (or its CFA - 8 past its end) */
		CHECK_U64(fast_unwind(&t, AT(0), wild[i], LO, HI, &s), id_of(want, 2, false));
		CHECK_EQ(s.n, 2u);
		CHECK_EQ(s.truncated, 1u);
	}
}

static void test_entry_outside(void)
{
	struct fast_unwind_tables t = tables(true);
	struct fast_stack s;

	CHECK_U64(fast_unwind(&t, HI, 0, LO, HI, &s), 0);
	CHECK_EQ(s.n, 0u);
	CHECK_U64(fast_unwind(&t, AT(0), 0, LO, LO + 4, &s), 0); /* a range too small */
}

static void test_no_mapping_and_unknown(void)
{
	struct fast_unwind_tables t = tables(true);
	struct fast_stack s;
	uint64_t a = 0x12345;

	memset(stk, 0, sizeof(stk));
	stk[0] = a;
	fast_unwind(&t, AT(0), 0, LO, HI, &s);
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.frames[0].object, 0u);
	CHECK_U64(s.frames[0].addr, a);
	CHECK_EQ(s.truncated, 1u);
	t.maps = NULL; /* no table for this address space */
	fast_unwind(&t, AT(0), 0, LO, HI, &s);
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.truncated, 1u);
	t = tables(true);
	stk[0] = PC(0x4010); /* an unknown row */
	a = 0x4010;
	CHECK_U64(fast_unwind(&t, AT(0), 0, LO, HI, &s), id_of(&a, 1, false));
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.truncated, 1u);
}

static void test_deref_and_zero_ra(void)
{
	static const uint64_t want[] = { 0x5010 };
	struct fast_unwind_tables t = tables(true);
	struct fast_stack s;

	memset(stk, 0, sizeof(stk));
	stk[0] = PC(0x5010); /* CFA = *(rbp + 8) */
	stk[21] = AT(30);    /* at rbp + 8 (rbp = stk + 20) */
	stk[29] = 0;	     /* the return address at CFA - 8: zero ends the chain */
	CHECK_U64(fast_unwind(&t, AT(0), AT(20), LO, HI, &s), id_of(want, 1, true));
	CHECK_EQ(s.truncated, 0u);
	stk[21] = (uint64_t)(uintptr_t)(elsewhere + 8); /* a CFA off the stack */
	fast_unwind(&t, AT(0), AT(20), LO, HI, &s);
	CHECK_EQ(s.truncated, 1u);
	fast_unwind(&t, AT(0), 0x1000, LO, HI, &s); /* rbp + 8 off the stack */
	CHECK_EQ(s.truncated, 1u);
}

static void test_depth_limit(void)
{
	struct fast_unwind_tables t = tables(true);
	uint64_t want[MT_STACK_MAX];
	struct fast_stack s;

	for (unsigned i = 0; i < 300; i++)
		stk[i] = PC(0x6010); /* C calls itself: CFA = rsp + 8 */
	for (unsigned i = 0; i < MT_STACK_MAX; i++)
		want[i] = 0x6010;
	CHECK_U64(fast_unwind(&t, AT(0), 0, LO, HI, &s), id_of(want, MT_STACK_MAX, false));
	CHECK_EQ(s.n, (unsigned)MT_STACK_MAX);
	CHECK_EQ(s.truncated, 1u);
	/* fewer words than frames: the stack's end truncates it */
	fast_unwind(&t, AT(0), 0, LO, AT(40), &s);
	CHECK_EQ(s.n, 40u);
	CHECK_EQ(s.truncated, 1u);
}

/* Slices and buckets that point past the tables: no row, nothing read out of bounds. */
static void test_bad_slices(void)
{
	struct fast_unwind_tables t = tables(true);
	struct fast_stack s;

	chain();
	maps.m[0].row_start = 1000;
	fast_unwind(&t, AT(0), AT(4), LO, HI, &s);
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.truncated, 1u);
	t = tables(true);
	maps.m[0].index_start = 100;
	fast_unwind(&t, AT(0), AT(4), LO, HI, &s);
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.truncated, 1u);
	t = tables(true);
	maps.n = 100000; /* more than a table holds: searched as 256, the empty ones hold nothing */
	fast_unwind(&t, AT(0), AT(4), LO, HI, &s);
	CHECK_EQ(s.n, 1u);
	CHECK_EQ(s.frames[0].object, 0u);
	CHECK_EQ(s.truncated, 1u);
}

static void *bounds_thread(void *arg)
{
	uint64_t local = 0, lo = 0, hi = 0, lo2 = 0, hi2 = 0;
	uint64_t sp = (uint64_t)(uintptr_t)&local;
	int *ok = arg;

	*ok = !fast_thread_stack(sp, &lo, &hi) && lo <= sp && sp < hi &&
	      !fast_thread_stack(sp - 64, &lo2, &hi2) && lo2 == lo && hi2 == hi;
	return NULL;
}

static void test_stack_bounds(void)
{
	uint64_t local = 0, lo = 0, hi = 0;
	uint64_t sp = (uint64_t)(uintptr_t)&local;
	pthread_t th;
	int ok = 0;

	CHECK_EQ(fast_stack_bounds(sp, &lo, &hi), 0);
	CHECK(lo <= sp && sp < hi);
	/* a file's data (elsewhere is initialised: .data) is no stack */
	CHECK_EQ(fast_stack_bounds((uint64_t)(uintptr_t)elsewhere, &lo, &hi), -1);
	CHECK_EQ(fast_stack_bounds(0x1000, &lo, &hi), -1);
	CHECK_EQ(pthread_create(&th, NULL, bounds_thread, &ok), 0);
	pthread_join(th, NULL);
	CHECK_EQ(ok, 1);
}

static void test_seen_set(void)
{
	fast_stack_forget_all();
	CHECK(!fast_stack_seen(0x1235));
	fast_stack_mark(0x1235);
	CHECK(fast_stack_seen(0x1235));
	CHECK(!fast_stack_seen(0x1237));
	/* more ids than slots: every id noted is found, the rest are written again */
	for (uint64_t i = 0; i < 2 * FAST_SEEN_SLOTS; i++)
		fast_stack_mark(i * 0x10001 | 1);
	unsigned found = 0;
	for (uint64_t i = 0; i < 2 * FAST_SEEN_SLOTS; i++)
		found += fast_stack_seen(i * 0x10001 | 1);
	CHECK(found >= FAST_SEEN_SLOTS / 2 && found <= FAST_SEEN_SLOTS);
	fast_stack_forget_all();
	CHECK(!fast_stack_seen(0x1235));
}

/* Anonymous memory, as handover.c's interpose_own_map gives the table pages. */
static void *map_zeroed(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A memfd laid out as memtrack's tables (rows at 0, the index at @index_off)
 * of @bytes bytes; -1 on failure.
 */
static int tables_memfd(uint64_t bytes, uint64_t index_off)
{
	int fd = memfd_create("test-tables", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)bytes) ||
	    pwrite(fd, rows, sizeof(rows), 0) != (ssize_t)sizeof(rows) ||
	    pwrite(fd, index_, sizeof(index_), (off_t)index_off) != (ssize_t)sizeof(index_)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * The same walk with the tables read a page at a time (table_pages.h, as
 * handover.c attaches them): the same stack, and only the pages the walk
 * read are read (the rows' page and the index's, not the one between).
 */
static void test_through_table_pages(void)
{
	static const uint64_t want[] = { 0x1010, 0x2010, 0x3010 };
	const uint64_t index_off = 2 * FAST_TABLE_PAGE, bytes = 3 * FAST_TABLE_PAGE;
	struct fast_unwind_tables t = tables(true);
	struct fast_table_pages tp;
	struct fast_stack s;
	int fd = tables_memfd(bytes, index_off);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ(fast_table_pages_open(&tp, fd, bytes, map_zeroed), 0);
	t.rows = (const struct mt_unwind_row *)tp.copy;
	t.index = (const uint64_t *)(tp.copy + index_off);
	t.pages = &tp;
	t.gen = 4;
	chain();
	CHECK_U64(fast_unwind(&t, AT(0), AT(4), LO, HI, &s), id_of(want, 3, true));
	CHECK_EQ(s.n, 3u);
	CHECK_EQ(s.truncated, 0u);
	CHECK_U64(tp.state[0], (4 + 1) << 1);
	CHECK_U64(tp.state[1], 0); /* never read: nothing of it made resident */
	CHECK_U64(tp.state[2], (4 + 1) << 1);
	fast_table_pages_close(&tp);
	CHECK_EQ(tp.fd, -1);
}

/*
 * The page reader's rules: a page read under an older generation is read
 * again (rows appended since), one being filled gives NULL, an entry
 * across a page or outside the tables gives NULL, the last page is read up
 * to the tables' end, and a memfd whose number now names another file is
 * not read (an already read page still serves its generation).
 */
static void test_table_page_rules(void)
{
	const uint64_t bytes = FAST_TABLE_PAGE + 100;
	struct fast_table_pages tp;
	const uint64_t *e;
	uint64_t v = 0x1111, late = 0x2222;
	int fd = memfd_create("test-pages", MFD_CLOEXEC), other;

	CHECK(fd >= 0);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) || pwrite(fd, &v, 8, 8) != 8)
		return;
	CHECK_EQ(fast_table_pages_open(&tp, fd, bytes, map_zeroed), 0);
	e = fast_table_page(&tp, tp.copy + 8, 8, 0);
	CHECK(e == (const void *)(tp.copy + 8));
	CHECK_U64(e ? *e : 0, 0x1111);
	/* appended after the read: not seen under the same generation, seen under the next */
	CHECK_EQ(pwrite(fd, &late, 8, 16), 8);
	e = fast_table_page(&tp, tp.copy + 16, 8, 0);
	CHECK_U64(e ? *e : 1, 0);
	e = fast_table_page(&tp, tp.copy + 16, 8, 2);
	CHECK_U64(e ? *e : 0, 0x2222);
	/* busy, across a page, outside, before the copy */
	tp.state[0] |= 1;
	CHECK(fast_table_page(&tp, tp.copy + 8, 8, 4) == NULL);
	tp.state[0] &= ~1ull;
	CHECK(fast_table_page(&tp, tp.copy + FAST_TABLE_PAGE - 4, 8, 2) == NULL);
	CHECK(fast_table_page(&tp, tp.copy + bytes - 4, 8, 2) == NULL);
	CHECK(fast_table_page(&tp, tp.copy - 8, 8, 2) == NULL);
	/* the last page, 100 bytes of it */
	CHECK(fast_table_page(&tp, tp.copy + FAST_TABLE_PAGE + 92, 8, 2) != NULL);
	/* the number reused for another file: unread pages are not read from it */
	other = memfd_create("test-other", MFD_CLOEXEC);
	CHECK(other >= 0 && ftruncate(other, (off_t)bytes) == 0);
	CHECK_EQ(dup2(other, tp.fd), tp.fd);
	CHECK(fast_table_page(&tp, tp.copy + 8, 8, 6) == NULL);
	CHECK(fast_table_page(&tp, tp.copy + 8, 8, 2) != NULL);
	close(other);
	fast_table_pages_close(&tp);
}

int main(void)
{
	RUN(test_complete_chain);
	RUN(test_leaves_the_stack);
	RUN(test_entry_outside);
	RUN(test_no_mapping_and_unknown);
	RUN(test_deref_and_zero_ra);
	RUN(test_depth_limit);
	RUN(test_bad_slices);
	RUN(test_stack_bounds);
	RUN(test_seen_set);
	RUN(test_through_table_pages);
	RUN(test_table_page_rules);
	return harness_failed_tests ? 1 : 0;
}
