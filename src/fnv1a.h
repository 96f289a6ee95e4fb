/* SPDX-License-Identifier: MIT */
/*
 * fnv1a.h - the 64-bit FNV-1a hash of bytes and strings: the symbol cache's
 * checksum, the interned strings' table, the allocator names' table.
 */
#ifndef MEMTRACK_FNV1A_H
#define MEMTRACK_FNV1A_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FNV1A_BASIS 0xcbf29ce484222325ull

/* Continues hash @h over @n bytes at @p. */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The hash of the string @s. */
static inline uint64_t fnv1a_str(const char *s)
{
	return fnv1a(FNV1A_BASIS, s, strlen(s));
}

#endif /* MEMTRACK_FNV1A_H */
