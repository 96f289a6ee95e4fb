// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * unwind.bpf.c - one frame of the kernel unwinder (unwind.bpf.h's
 * mt_unwind_frame): which mapping holds the pc, which .eh_frame row covers
 * it, and the caller's pc, sp and rbp that row gives.  Kept out of line in
 * its own file so that each program taking stacks links one copy, which the
 * verifier checks once.  src/fast/unwind.c is the same walk in-process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "bpf/python.bpf.h" /* and unwind.bpf.h */
#include "unwind_search.h"

/*
 * The index in @um->m of the mapping holding @pc: @hint's (the previous
 * frame's: callers are often in it) or a search's; MT_MAX_UMAPS: none.  A
 * global function (@um may be NULL), so that the verifier checks the rest
 * of a frame once, not once for the hint and once for the search (12K
 * instructions a program instead of 5.8K).
 */
__noinline __u32 mt_unwind_umap(const struct mt_umaps *um, __u64 pc, __u32 hint)
{
	if (!um)
		return MT_MAX_UMAPS;
	if (hint < MT_MAX_UMAPS && pc >= um->m[hint].start && pc < um->m[hint].end)
		return hint;
	return mt_find_umap(um, pc);
}

/* The mapping holding st->pc, or NULL. */
static __always_inline const struct mt_umap *frame_umap(const struct mt_umaps *um,
							struct mt_unwind_state *st)
{
	__u32 k = mt_unwind_umap(um, st->pc, st->last);

	st->last = k;
	return um && k < MT_MAX_UMAPS ? &um->m[k] : NULL;
}

/* unwind_index[idx] (a row of the object), or -1: its chunk, then the entry in it. */
static __always_inline __s64 bucket_row(__u32 idx)
{
	__u32 chunk = idx >> MT_UNWIND_CHUNK_INDEX_LOG2, at = idx & (MT_UNWIND_CHUNK_INDEX - 1);
	void *inner = bpf_map_lookup_elem(&unwind_index, &chunk);
	__u64 *v;

	if (!inner)
		return -1;
	v = bpf_map_lookup_elem(inner, &at);
	return v ? (__s64)(*v & 0xffffffffu) : -1;
}

/* Row @idx of the flat numbering (bpf_abi.h), or NULL: its chunk not created. */
static __always_inline const struct mt_unwind_row *row_at(__u32 idx)
{
	__u32 chunk = idx >> MT_UNWIND_CHUNK_LOG2, at = idx & (MT_UNWIND_CHUNK_ROWS - 1);
	void *inner = bpf_map_lookup_elem(&unwind_rows, &chunk);

	return inner ? bpf_map_lookup_elem(inner, &at) : NULL;
}

/* One step of the search for the last row <= @addr in [*lo, *hi); false: no row. */
static __always_inline bool row_step(__u64 *lo, __u64 *hi, __u64 addr)
{
	__u32 idx = (__u32)((*lo + *hi) / 2);
	const struct mt_unwind_row *row = row_at(idx);
	__u64 take;

	if (!row)
		return false;
	take = mt_le_mask(row->pc, addr);
	*lo = (idx & take) | (*lo & ~take);
	*hi = (*hi & take) | (idx & ~take);
	return true;
}

/*
 * The row of @m's object covering ELF address @addr, or NULL: the index's
 * bucket, then MT_UNWIND_BUCKET_STEPS steps in its rows (an object without
 * an index has no rows: bpf_abi.h).
 */
static __always_inline const struct mt_unwind_row *find_row(const struct mt_umap *m, __u64 addr)
{
	const struct mt_unwind_row *row;
	__s64 first, next;
	__u64 lo, hi, b;

	if (!m->nrows || !m->nbuckets || addr > 0xffffffffull || addr < m->text_lo)
		return NULL;
	b = (addr - m->text_lo) >> (m->shift & 31);
	if (b >= m->nbuckets)
		b = m->nbuckets - 1;
	first = bucket_row(m->index_start + (__u32)b);
	next = b + 1 < m->nbuckets ? bucket_row(m->index_start + (__u32)b + 1) : m->nrows - 1;
	if (first < 0 || next < first)
		return NULL;
	lo = m->row_start + (__u64)first;
	hi = m->row_start + (__u64)next + 1;
	_Static_assert(1u << MT_UNWIND_BUCKET_STEPS == MT_UNWIND_BUCKET_ROWS, "bucket steps");
	for (int k = 0; k < MT_UNWIND_BUCKET_STEPS; k++)
		if (!row_step(&lo, &hi, addr))
			return NULL;
	row = row_at((__u32)lo);
	return row && row->pc <= addr ? row : NULL;
}

/* unwind.bpf.h's contract; __noinline and not static: a global function. */
__noinline long mt_unwind_frame(struct mt_unwind_state *st, struct mt_rec_stack *s,
				const struct mt_umaps *um)
{
	const struct mt_unwind_row *row;
	const struct mt_umap *m;
	__u64 addr, cfa, ra;

	if (!st || !s)
		return 1;
	if (!st->exact && st->n >= MT_STACK_MAX)
		goto truncated; /* more frames than a stack may hold */
	m = frame_umap(um, st);
	addr = m ? st->pc - m->bias : st->pc;
	if (!st->exact)
		add_frame(st, s, m ? m->object : 0, addr);
	if (!m)
		goto truncated;
	/* a return address may be the first byte after a noreturn call's function */
	row = find_row(m, st->exact ? addr : addr - 1);
	if (!row)
		goto truncated;
	switch (row->cfa) {
	case MT_CFA_END: st->status = UNWIND_COMPLETE; return 1;
	case MT_CFA_RSP: cfa = st->sp + row->cfa_off; break;
	case MT_CFA_RBP: cfa = st->bp + row->cfa_off; break;
	case MT_CFA_DEREF_RBP:
		if (bpf_probe_read_user(&cfa, sizeof(cfa), (void *)(st->bp + row->cfa_off)))
			goto truncated;
		break;
	default: goto truncated;
	}
	switch (row->ra) {
	case MT_RA_CFA_MINUS_8:
		if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)))
			goto truncated;
		break;
	case MT_RA_AT_CFA:
		if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa + row->ra_off)))
			goto truncated;
		break;
	case MT_RA_LR: /* x30 is the caller's only where the task stopped */
		if (!st->exact)
			goto truncated;
		ra = st->lr;
		break;
	default: goto truncated;
	}
	ra &= UNWIND_RA_MASK; /* a pac-ret signature (unwind.bpf.h) */
	if (row->rbp == MT_RBP_AT_CFA) {
		if (bpf_probe_read_user(&st->bp, sizeof(st->bp), (void *)(cfa + row->rbp_off)))
			goto truncated;
	} else if (row->rbp == MT_RBP_LOST) {
		st->bp = 0;
	}
	if (!ra) { /* a zeroed return address ends some hand-written chains */
		st->status = UNWIND_COMPLETE;
		return 1;
	}
	st->sp = cfa;
	st->pc = ra;
	st->exact = 0;
	return 0;
truncated:
	st->status = UNWIND_TRUNCATED;
	return 1;
}
