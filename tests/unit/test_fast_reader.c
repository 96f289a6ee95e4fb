// SPDX-License-Identifier: MIT
/*
 * test_fast_reader.c - which records of a process's in-process ring
 * memtrack accepts (fast_record_valid(), src/inspect/fast_reader.c): every
 * record the library makes (interpose.c, described here call kind by call
 * kind, built as fast/ring.c's fast_record() lays it out), and none of what
 * a process may not report about itself.  The reading of whole rings is
 * fuzzed (tests/fuzz/fuzz_drain.c) and attacked (test_hostile_ring.py).
 */
#include <stdlib.h>
#include "harness.h"
#include "inspect/fast_reader.h"
#include "format/schema.h"

#define VA_END (1ull << 47)
#define ADDR 0x55d3a0e4c010ull

/* A record as fast_record() writes it: addr, size, third field, stack 0. */
static struct mt_rec make(uint16_t type, uint16_t fn, uint64_t a, uint64_t b, uint64_t c)
{
	struct mt_rec r = { .h = { .type = type, .fn = fn, .pid = 1, .tid = 1, .ts = 1 } };

	r.h.nfields = type == MT_FREE			       ? FREE_NFIELDS
		      : type == MT_MALLOC || type == MT_CALLOC ? MALLOC_NFIELDS
							       : REALLOC_NFIELDS;
	r.f[0] = a;
	r.f[1] = b;
	r.f[2] = r.h.nfields == REALLOC_NFIELDS ? c : 0;
	return r;
}

static bool valid(struct mt_rec r)
{
	return fast_record_valid(&r.h, r.f, VA_END);
}

static const uint16_t fast_fns[] = {
#define X_FN(id, num, name, kind, sym, where) MT_FN_IF_FAST(where, MT_FN_##id, )
	MT_FN_LIST(X_FN)
#undef X_FN
};

/* What interpose.c records for a call of each kind of function. */
static void test_library_records_valid(void)
{
	for (size_t i = 0; i < sizeof(fast_fns) / sizeof(fast_fns[0]); i++) {
		uint16_t fn = fast_fns[i];

		switch (mt_fn_kind(fn)) {
		case MT_K_MALLOC: /* malloc, operator new (its delegate records it so) */
			CHECK(valid(make(MT_MALLOC, fn, ADDR, 100, 0)));
			break;
		case MT_K_CALLOC: CHECK(valid(make(MT_CALLOC, fn, ADDR, 100, 0))); break;
		case MT_K_REALLOC:
		case MT_K_REALLOCARRAY: /* realloc(NULL, n), realloc(p, n), realloc(p, 0) */
			CHECK(valid(make(MT_MALLOC, fn, ADDR, 100, 0)));
			CHECK(valid(make(MT_REALLOC, fn, ADDR, 200, ADDR + 4096)));
			CHECK(valid(make(MT_FREE, fn, ADDR, 0, 0)));
			break;
		case MT_K_SIZE_ALIGN: /* operator new(align); an executable's may call malloc */
			CHECK(valid(make(MT_ALIGNED_ALLOC, fn, ADDR, 100, 64)));
			CHECK(valid(make(MT_MALLOC, fn, ADDR, 100, 0)));
			break;
		case MT_K_ALIGN_SIZE:
		case MT_K_POSIX_MEMALIGN:
		case MT_K_PAGE_ALIGNED:
			CHECK(valid(make(MT_ALIGNED_ALLOC, fn, ADDR, 100, 4096)));
			CHECK(valid(
				make(MT_ALIGNED_ALLOC, fn, ADDR, 100, 3))); /* memalign rounds up */
			break;
		case MT_K_FREE: /* free, every operator delete form */
			CHECK(valid(make(MT_FREE, fn, ADDR, 0, 0)));
			break;
		default: CHECK(!"a function of the library with a kind this test does not know");
		}
	}
	/* the largest block that fits; malloc(0) */
	CHECK(valid(make(MT_MALLOC, MT_FN_MALLOC, ADDR, VA_END - ADDR, 0)));
	CHECK(valid(make(MT_MALLOC, MT_FN_MALLOC, ADDR, 0, 0)));
}

/* Nothing that would make memtrack act, nor a heap call the library cannot have made. */
static void test_forgeries_refused(void)
{
	struct mt_rec r;

	for (unsigned t = 0; t < MT_TYPE_MAX + 2; t++) {
		if (t >= MT_MALLOC && t <= MT_FREE)
			continue;
		r = make(MT_MALLOC, 0, 1234, 5678, 0);
		r.h.type = t; /* fork, exec, exit, rss, mark, enable, disable, stack ... */
		for (unsigned n = 0; n <= MT_MAX_FIELDS; n++) {
			r.h.nfields = n;
			CHECK(!valid(r));
		}
	}
	/* the parked bit, an fn out of range, one the library does not interpose */
	CHECK(!valid(make(MT_MALLOC, MT_FN_MALLOC | MT_REC_PARKED, ADDR, 100, 0)));
	CHECK(!valid(make(MT_FREE, MT_FN_FREE | MT_REC_PARKED, ADDR, 0, 0)));
	CHECK(!valid(make(MT_MALLOC, MT_FN_MAX, ADDR, 100, 0)));
	CHECK(!valid(make(MT_MALLOC, 0x7777, ADDR, 1ull << 40, 0)));
	CHECK(!valid(make(MT_ALIGNED_ALLOC, MT_FN_MALLOCX, ADDR, 100, 64)));
	CHECK(!valid(make(MT_FREE, MT_FN_FREE_SIZED, ADDR, 0, 0)));
	/* an fn whose calls never make that type */
	CHECK(!valid(make(MT_MALLOC, MT_FN_FREE, ADDR, 100, 0)));
	CHECK(!valid(make(MT_FREE, MT_FN_MALLOC, ADDR, 0, 0)));
	CHECK(!valid(make(MT_CALLOC, MT_FN_MALLOC, ADDR, 100, 0)));
	CHECK(!valid(make(MT_REALLOC, MT_FN_MEMALIGN, ADDR, 100, ADDR)));
	CHECK(!valid(make(MT_ALIGNED_ALLOC, MT_FN_NEW, ADDR, 100, 64)));
	/* field counts */
	r = make(MT_MALLOC, MT_FN_MALLOC, ADDR, 100, 0);
	r.h.nfields = MALLOC_NFIELDS - 1;
	CHECK(!valid(r));
	r.h.nfields = MALLOC_NFIELDS + 1;
	CHECK(!valid(r));
	r = make(MT_FREE, MT_FN_FREE, ADDR, 0, 0);
	r.h.nfields = 0;
	CHECK(!valid(r));
	/* a stack id (the library takes none), NULL, blocks past the address space */
	r = make(MT_MALLOC, MT_FN_MALLOC, ADDR, 100, 0);
	r.f[MALLOC_STACK] = 5;
	CHECK(!valid(r));
	r = make(MT_REALLOC, MT_FN_REALLOC, ADDR, 100, ADDR);
	r.f[REALLOC_STACK] = 5;
	CHECK(!valid(r));
	CHECK(!valid(make(MT_MALLOC, MT_FN_MALLOC, 0, 100, 0)));
	CHECK(!valid(make(MT_FREE, MT_FN_FREE, 0, 0, 0)));
	CHECK(!valid(make(MT_REALLOC, MT_FN_REALLOC, ADDR, 100, 0)));
	CHECK(!valid(make(MT_MALLOC, MT_FN_MALLOC, ADDR, VA_END - ADDR + 1, 0)));
	CHECK(!valid(make(MT_MALLOC, MT_FN_MALLOC, ADDR, 1ull << 60, 0)));
	CHECK(!valid(make(MT_MALLOC, MT_FN_MALLOC, VA_END, 1, 0)));
	CHECK(!valid(make(MT_FREE, MT_FN_FREE, UINT64_MAX, 0, 0)));
	CHECK(!valid(make(MT_ALIGNED_ALLOC, MT_FN_MEMALIGN, ADDR, 100, VA_END)));
}

/* This machine's address space: 4-level paging ends below 2^47 on x86-64. */
static void test_va_end(void)
{
	uint64_t end = fast_va_end();

	CHECK(end == 1ull << 48 || end == 1ull << 57);
	CHECK((uint64_t)(uintptr_t)&end < end); /* the stack is in it */
}

int main(void)
{
	RUN(test_library_records_valid);
	RUN(test_forgeries_refused);
	RUN(test_va_end);
	return harness_failed_tests ? 1 : 0;
}
