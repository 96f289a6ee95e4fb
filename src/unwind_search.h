/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * unwind_search.h - the mapping search both unwinders run, one copy for
 * the kernel's (src/bpf/unwind.bpf.c) and the library's (src/fast/unwind.c),
 * so that they find the same mapping for every pc.  Branch-free with a
 * fixed number of steps: with a branch on the data per step (or an early
 * exit) the BPF verifier walks every path, 2^steps states.
 *
 * Like bpf_abi.h (which the includer has included) it includes nothing and
 * uses only __u32/__u64.
 */
#ifndef MEMTRACK_UNWIND_SEARCH_H
#define MEMTRACK_UNWIND_SEARCH_H

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* All ones when @a <= @b, else 0: for user addresses (< 2^63) the sign of b - a. */
static __always_inline __u64 mt_le_mask(__u64 a, __u64 b)
{
	return ((b - a) >> 63) - 1;
}

/* The index in @um->m of the mapping holding @pc, or MT_MAX_UMAPS: none. */
static __always_inline __u32 mt_find_umap(const struct mt_umaps *um, __u64 pc)
{
	__u64 lo = 0, hi = um->n, mid, take;

	if (hi > MT_MAX_UMAPS)
		hi = MT_MAX_UMAPS;
	if (!hi)
		return MT_MAX_UMAPS;
	/* the last mapping starting at or below pc: a[lo] <= pc < a[hi] */
	for (int k = 0; k <= MT_UMAPS_LOG2; k++) {
		mid = ((lo + hi) / 2) & (MT_MAX_UMAPS - 1);
		take = mt_le_mask(um->m[mid].start, pc);
		lo = (mid & take) | (lo & ~take);
		hi = (hi & take) | (mid & ~take);
	}
	lo &= MT_MAX_UMAPS - 1;
	if (pc < um->m[lo].start || pc >= um->m[lo].end)
		return MT_MAX_UMAPS;
	return (__u32)lo;
}

#endif /* MEMTRACK_UNWIND_SEARCH_H */
