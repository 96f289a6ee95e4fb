// SPDX-License-Identifier: MIT
/*
 * test_mapped.c - one process's own mapped pages (analyze/mapped.c): every
 * operation on hand-made ranges, the expected bytes worked out in the
 * comments (P: one 4096-byte page), and what the accounting hook is told.
 */
#include <stdlib.h>
#include "harness.h"
#include "analyze/mapped.h"

#define P 4096ull
#define B 0x100000ull /* a base address */

struct ledger {
	uint64_t by_stack[4]; /* accessible bytes per stack id 0..3 */
};

static void account(void *ctx, uint64_t stack, uint64_t bytes, bool add)
{
	struct ledger *l = ctx;

	if (stack < 4)
		l->by_stack[stack] = add ? l->by_stack[stack] + bytes : l->by_stack[stack] - bytes;
}

static void test_add_cut(void)
{
	struct mapped_set s = { 0 };
	struct ledger l = { { 0 } };

	s.account = account;
	s.ctx = &l;
	CHECK_EQ(mapped_add(&s, B, B + 64 * P, true, 1), 0);
	CHECK_EQ(s.bytes, 64 * P);
	/* a hole of 16 pages in the middle: two ranges, 48 pages */
	CHECK_EQ(mapped_cut(&s, B + 20 * P, B + 36 * P), 0);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.bytes, 48 * P);
	/* the last 8 and pages outside: 40 */
	CHECK_EQ(mapped_cut(&s, B + 56 * P, B + 100 * P), 0);
	CHECK_EQ(s.bytes, 40 * P);
	/* MAP_FIXED over pages 4..11 with a reservation of stack 2: 32 counted */
	CHECK_EQ(mapped_add(&s, B + 4 * P, B + 12 * P, false, 2), 0);
	CHECK_EQ(s.bytes, 32 * P);
	CHECK_EQ(s.n, 4); /* [0,4) [4,12) none [12,20) [36,56) */
	CHECK_EQ(l.by_stack[1], 32 * P);
	CHECK_EQ(l.by_stack[2], 0);
	/* cutting nothing changes nothing */
	CHECK_EQ(mapped_cut(&s, B + 20 * P, B + 36 * P), 0);
	CHECK_EQ(s.bytes, 32 * P);
	CHECK_EQ(mapped_clear(&s), 32 * P);
	CHECK_EQ(s.bytes, 0);
	CHECK_EQ(l.by_stack[1], 0);
	mapped_release(&s);
}

static void test_protect(void)
{
	struct mapped_set s = { 0 };
	struct ledger l = { { 0 } };

	s.account = account;
	s.ctx = &l;
	/* a 64-page reservation counts nothing */
	CHECK_EQ(mapped_add(&s, B, B + 64 * P, false, 3), 0);
	CHECK_EQ(s.bytes, 0);
	/* pages 8..17 made accessible: 10; then 12..14 taken back: 7 */
	CHECK_EQ(mapped_protect(&s, B + 8 * P, B + 18 * P, true), 0);
	CHECK_EQ(s.bytes, 10 * P);
	CHECK_EQ(mapped_protect(&s, B + 12 * P, B + 15 * P, false), 0);
	CHECK_EQ(s.bytes, 7 * P);
	CHECK_EQ(l.by_stack[3], 7 * P);
	/* mprotect of pages not in the set adds nothing */
	CHECK_EQ(mapped_protect(&s, B + 100 * P, B + 200 * P, true), 0);
	CHECK_EQ(s.bytes, 7 * P);
	mapped_release(&s);
}

static void test_move(void)
{
	struct mapped_set s = { 0 };

	/* 16 pages grown to 48 at a new place: 48, nothing left at the old */
	CHECK_EQ(mapped_add(&s, B, B + 16 * P, true, 0), 0);
	CHECK_EQ(mapped_move(&s, B, 16 * P, 4 * B, 48 * P, false), 0);
	CHECK_EQ(s.bytes, 48 * P);
	CHECK_EQ(s.r[0].start, 4 * B);
	/* shrunk in place to 20 */
	CHECK_EQ(mapped_move(&s, 4 * B, 48 * P, 4 * B, 20 * P, false), 0);
	CHECK_EQ(s.bytes, 20 * P);
	/* growth of a mapping whose last page is a reservation stays uncounted */
	CHECK_EQ(mapped_protect(&s, 4 * B + 10 * P, 4 * B + 20 * P, false), 0);
	CHECK_EQ(s.bytes, 10 * P);
	CHECK_EQ(mapped_move(&s, 4 * B, 20 * P, 4 * B, 30 * P, false), 0);
	CHECK_EQ(s.bytes, 10 * P);
	/* MREMAP_DONTUNMAP: the old range stays, the pages also appear at the new */
	CHECK_EQ(mapped_move(&s, 4 * B, 10 * P, 8 * B, 10 * P, true), 0);
	CHECK_EQ(s.bytes, 20 * P);
	/* a mapping not in the set moved over ours: ours at the target go */
	CHECK_EQ(mapped_move(&s, 12 * B, 4 * P, 8 * B, 4 * P, false), 0);
	CHECK_EQ(s.bytes, 16 * P);
	mapped_release(&s);
}

int main(void)
{
	RUN(test_add_cut);
	RUN(test_protect);
	RUN(test_move);
	HARNESS_EXIT();
}
