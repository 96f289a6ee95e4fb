/* SPDX-License-Identifier: MIT */
/*
 * mix64.h - the 64-bit finaliser (MurmurHash3's fmix64, first half) that
 * the analysis' open-addressing tables (stacks, sites, resolved addresses)
 * apply to their keys, so ids that differ only in high bits spread.
 */
#ifndef MEMTRACK_MIX64_H
#define MEMTRACK_MIX64_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

#endif /* MEMTRACK_MIX64_H */
