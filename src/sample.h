/* SPDX-License-Identifier: MIT */
/*
 * sample.h - the byte sampler of --sample-bytes N, shared by the BPF side
 * (alloc.bpf.c) and libmemtrack-fast.so (fast/sample.c), so both paths
 * draw the same way.
 *
 * Poisson sampling by bytes, as tcmalloc and heapprofd do: the bytes a
 * thread allocates are a line on which sample points fall at random, one
 * per N bytes on average (a Poisson process of rate 1/N).  A thread keeps
 * the distance to its next point (`left`); an allocation of s bytes that
 * reaches it is sampled, and the distance is drawn afresh (the process is
 * memoryless, so what follows the block is independent of it).  Each
 * allocation is so sampled with probability 1 - exp(-s/N) whatever came
 * before, and the analysis weighs a sampled one by 1 / (1 - exp(-s/N))
 * (docs/FORMAT.md, `sampling`).  A zero-byte request counts as one byte.
 *
 * The draw needs -ln(U) for U uniform in (0, 1): computed here in integers
 * (BPF has no floating point) from a 64-entry table of log2(1 + k/64) with
 * linear interpolation; the error is below 1e-4 of the value
 * (tests/unit/test_sample.c checks it against log()).
 *
 * This header includes nothing and uses only __u32/__u64/__s64.
 */
#ifndef MEMTRACK_SAMPLE_H
#define MEMTRACK_SAMPLE_H

/* --sample-bytes bounds: the product below stays under 2^63 */
#define MT_SAMPLE_MIN 1ull
#define MT_SAMPLE_MAX (1ull << 40)

/* the fixed point of the draws: 1.0 is 1 << MT_SAMPLE_FX */
#define MT_SAMPLE_FX 16

/* clang-format off */
/* log2(1 + k/64) << 16, k = 0 .. 64 */
static const __u32 mt_log2_1p[65] = {
	0, 1466, 2909, 4331, 5732, 7112, 8473, 9814, 11136, 12440, 13727, 14996, 16248,
	17484, 18704, 19909, 21098, 22272, 23433, 24579, 25711, 26830, 27936, 29029, 30109,
	31178, 32234, 33279, 34312, 35334, 36346, 37346, 38336, 39316, 40286, 41246, 42196,
	43137, 44068, 44990, 45904, 46809, 47705, 48593, 49472, 50344, 51207, 52063, 52911,
	53751, 54584, 55410, 56229, 57040, 57845, 58643, 59434, 60219, 60997, 61769, 62534,
	63294, 64047, 64794, 65536,
};
/* clang-format on */
#define MT_LN2_FX 45426ull /* ln 2 << 16 */

/* -ln(u / 2^32) << 16 for u in 1 .. 2^32 - 1 (0 is taken as 1): at most ~22.2 << 16. */
static inline __u64 mt_neg_ln_fx(__u32 u)
{
	__u64 x = u ? u : 1, m, l;
	__u32 e = 0, k;

	/* e = floor(log2 x), by halves (no loop for the verifier) */
	if (x >> 16) {
		e += 16;
		x >>= 16;
	}
	if (x >> 8) {
		e += 8;
		x >>= 8;
	}
	if (x >> 4) {
		e += 4;
		x >>= 4;
	}
	if (x >> 2) {
		e += 2;
		x >>= 2;
	}
	if (x >> 1)
		e += 1;
	/* the mantissa's 31 fraction bits: the top 6 index the table */
	m = (((__u64)(u ? u : 1)) << (31 - e)) & 0x7fffffffull;
	k = (__u32)(m >> 25) & 63;
	l = mt_log2_1p[k] + (((__u64)(mt_log2_1p[k + 1] - mt_log2_1p[k]) * (m & 0x1ffffff)) >> 25);
	/* -ln U = (32 - log2 u) * ln 2 */
	return ((((__u64)32 << MT_SAMPLE_FX) - (((__u64)e << MT_SAMPLE_FX) + l)) * MT_LN2_FX) >>
	       MT_SAMPLE_FX;
}

/* The distance to a thread's next sample point, in bytes: Exp(mean @period), from @rnd. */
static inline __s64 mt_sample_interval(__u32 rnd, __u64 period)
{
	return (__s64)((mt_neg_ln_fx(rnd) * period) >> MT_SAMPLE_FX);
}

/*
 * Whether an allocation of @size bytes is sampled, given the thread's
 * distance *@left to its next point (updated; @rnd draws the next one when
 * it is).
 */
static inline int mt_sample_take(__s64 *left, __u64 size, __u32 rnd, __u64 period)
{
	__s64 s = size ? (__s64)(size > MT_SAMPLE_MAX ? MT_SAMPLE_MAX : size) : 1;

	if (s < *left) {
		*left -= s;
		return 0;
	}
	*left = mt_sample_interval(rnd, period);
	return 1;
}

#endif /* MEMTRACK_SAMPLE_H */
