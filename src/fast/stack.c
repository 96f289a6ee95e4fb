// SPDX-License-Identifier: MIT
/*
 * stack.c - the in-process unwinder wired to the ring: the tables memtrack
 * handed over and the stack of an outermost allocator call (unwind.h's
 * fast_unwind_attach, fast_take_stack).  Apart from unwind.c, which the
 * test fixtures link without a ring.
 */
#include <string.h>
#include <sys/mman.h>
#include "fast/fast_ring.h"
#include "fast/ring.h"
#include "fast/unwind.h"
#include "fast/own_map.h"
#include "fast/table_pages.h"
#include "fast/python.h"
#include "stack_id.h"

/*
 * The tables memtrack gave this process (handover.c), or none.  Set once
 * per process image before recording starts (or in a fork child before
 * fork returns), cleared by fast_unwind_detach: read without a lock.
 */
static struct {
	struct fast_unwind_tables t;
	const struct mt_fast_umaps *umaps;
} U;

/* One stack per thread: only a thread's outermost allocator call unwinds. */
static __thread struct fast_stack tls_stack TLS_IE;
/* The code objects of tls_stack's Python frames (python.h), at their frames' indexes. */
static __thread uint64_t tls_codes[MT_STACK_MAX] TLS_IE;

bool fast_unwind_attach(struct fast_table_pages *pages, uint64_t index_off, uint32_t rows_cap,
			uint32_t index_cap, const struct mt_fast_umaps *umaps)
{
	uint64_t bytes = pages->bytes;

	/* memtrack's geometry, checked anyway: nothing is read past the tables */
	if ((uint64_t)rows_cap * sizeof(struct mt_unwind_row) > index_off || index_off > bytes ||
	    (uint64_t)index_cap * sizeof(uint64_t) > bytes - index_off || index_off % 8)
		return false;
	U.t.rows = (const struct mt_unwind_row *)pages->copy;
	U.t.nrows = rows_cap;
	U.t.index = (const uint64_t *)(pages->copy + index_off);
	U.t.nindex = index_cap;
	U.t.pages = pages;
	U.t.maps = &umaps->maps;
	__atomic_store_n(&U.umaps, umaps, __ATOMIC_RELEASE);
	return true;
}


bool fast_unwinding(void)
{
	return __atomic_load_n(&U.umaps, __ATOMIC_ACQUIRE) != NULL;
}

/*
 * The frame cache (unwind.h), mapped at the first stack (inside an
 * allocator call: vm.bpf.c counts it the allocator's, as the dedup set).
 * Two threads racing: one mapping wins.  A fork child's is emptied
 * (fast_unwind_detach): its mappings area is new, its generation may be
 * one its parent's cache holds entries of.
 */
static struct fast_frame_cache *frame_cache;

static struct fast_frame_cache *cache(void)
{
	struct fast_frame_cache *c = __atomic_load_n(&frame_cache, __ATOMIC_ACQUIRE),
				*expect = NULL;
	void *p;

	if (c)
		return c;
	p = mmap(own_map_hint(FAST_CACHE_SLOTS * sizeof(*c)), FAST_CACHE_SLOTS * sizeof(*c),
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL; /* searched every time */
	if (__atomic_compare_exchange_n(&frame_cache, &expect, (struct fast_frame_cache *)p, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return p;
	munmap(p, FAST_CACHE_SLOTS * sizeof(*c));
	return expect;
}

void fast_unwind_detach(void)
{
	struct fast_frame_cache *c = __atomic_load_n(&frame_cache, __ATOMIC_ACQUIRE);

	__atomic_store_n(&U.umaps, NULL, __ATOMIC_RELEASE);
	memset(&U.t, 0, sizeof(U.t));
	/* a fork child's new mappings area may start at its parent's generation */
	if (c)
		memset(c, 0, FAST_CACHE_SLOTS * sizeof(*c));
}

uint64_t fast_take_stack(uint64_t entry_sp, uint64_t bp, bool (*skip)(uint64_t pc))
{
	const struct mt_fast_umaps *um = __atomic_load_n(&U.umaps, __ATOMIC_ACQUIRE);
	struct fast_unwind_tables t;
	uint64_t lo, hi, gen, id;
	struct mt_py py;

	if (!um || fast_thread_stack(entry_sp, &lo, &hi))
		return 0;
	gen = __atomic_load_n(&um->gen, __ATOMIC_ACQUIRE);
	if (gen & 1)
		return 0; /* memtrack is writing: the process was stopped mid-call */
	t = U.t;
	t.cache = cache();
	t.gen = gen;
	py = um->maps.py;
	id = fast_unwind_skip(&t, entry_sp, bp, lo, hi, skip, &tls_stack);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!id || __atomic_load_n(&um->gen, __ATOMIC_RELAXED) != gen)
		return 0; /* the mappings changed under the walk: no stack is better than a wrong one */
	if (py.runtime) {
		uint32_t truncated = tls_stack.truncated;

		/* frames added, or none for want of room: either changes the id */
		if (fast_python_frames(&py, fast_ring_pid(), &tls_stack, tls_codes) ||
		    tls_stack.truncated != truncated)
			id = tls_stack.id =
				mt_stack_id(tls_stack.frames, tls_stack.n, tls_stack.truncated);
	}
	/* marked once written: a vfork child's dropped record must not hide it from its parent */
	if (!fast_stack_seen(id)) {
		if (py.runtime)
			fast_python_codes(&py, &tls_stack, tls_codes);
		if (fast_record_stack(&tls_stack))
			fast_stack_mark(id);
	}
	return id;
}
