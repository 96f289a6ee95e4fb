// SPDX-License-Identifier: MIT
/*
 * test_sample.c - the byte sampler's draw (src/sample.h), shared by the BPF
 * side and libmemtrack-fast.so: -ln(U) in fixed point against log(), the
 * mean distance between points, and each size's sampling probability
 * against 1 - exp(-s/N), with bounds from the binomial variance.
 */
#include <math.h>
#include <stdint.h>
#include <linux/types.h>
#include "harness.h"
#include "sample.h"

/* xorshift64*: a fixed sequence, so the test is the same every run */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Within 1e-4 of -ln(u / 2^32) (plus one unit of the fixed point) over the range. */
static void test_neg_ln(void)
{
	double worst = 0;

	for (uint64_t u = 1; u < (1ull << 32); u = u * 3 / 2 + 1) {
		double want = -log((double)u / 4294967296.0) * 65536.0;
		double got = (double)mt_neg_ln_fx((uint32_t)u);
		double err = fabs(got - want) - 1.0;

		if (err / (want > 1 ? want : 1) > worst)
			worst = err / (want > 1 ? want : 1);
	}
	for (int i = 0; i < 100000; i++) {
		uint32_t u = rnd() | 1;
		double want = -log((double)u / 4294967296.0) * 65536.0;

		CHECK(fabs((double)mt_neg_ln_fx(u) - want) <= 1e-4 * want + 2.0);
	}
	CHECK(worst <= 1e-4);
	CHECK_U64(mt_neg_ln_fx(0), mt_neg_ln_fx(1)); /* 0 is taken as 1 */
	CHECK(mt_neg_ln_fx(UINT32_MAX) <= 1);
}

/* The draws' mean is N: 200000 of them within 5 standard errors (sd of Exp(N) is N). */
static void test_interval_mean(void)
{
	const uint64_t n = 65536;
	const int draws = 200000;
	double sum = 0;

	for (int i = 0; i < draws; i++)
		sum += (double)mt_sample_interval(rnd(), n);
	CHECK(fabs(sum / draws - n) <= 5.0 * n / sqrt(draws));
}

/*
 * An allocation of s bytes is taken with probability 1 - exp(-s/N),
 * whatever came before: a stream of one size, and one of mixed sizes
 * counted per size, each within 5 sigma of the binomial's mean.
 */
static void check_rate(uint64_t taken, uint64_t tries, double s, double n)
{
	double p = -expm1(-s / n), sd = sqrt(tries * p * (1 - p));

	CHECK(fabs((double)taken - tries * p) <= 5 * sd + 1);
}

static void test_probability(void)
{
	const uint64_t n = 4096, sizes[] = { 1, 64, 1000, 4096, 20000 };
	uint64_t taken[5] = { 0 }, tries[5] = { 0 };
	__s64 left = mt_sample_interval(rnd(), n);

	for (int k = 0; k < 5; k++) {
		uint64_t t = 0;

		for (int i = 0; i < 200000; i++)
			t += mt_sample_take(&left, sizes[k], rnd(), n);
		check_rate(t, 200000, (double)sizes[k], (double)n);
	}
	for (int i = 0; i < 1000000; i++) {
		int k = rnd() % 5;

		tries[k]++;
		taken[k] += mt_sample_take(&left, sizes[k], rnd(), n);
	}
	for (int k = 0; k < 5; k++)
		check_rate(taken[k], tries[k], (double)sizes[k], (double)n);
	/* a zero-byte request counts as one byte */
	taken[0] = 0;
	for (int i = 0; i < 200000; i++)
		taken[0] += mt_sample_take(&left, 0, rnd(), n);
	check_rate(taken[0], 200000, 1.0, (double)n);
}

int main(void)
{
	RUN(test_neg_ln);
	RUN(test_interval_mean);
	RUN(test_probability);
	HARNESS_EXIT();
}
