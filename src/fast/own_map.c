// SPDX-License-Identifier: MIT
/* own_map.c - address hints for the library's own mappings; see own_map.h. */
#include <stdint.h>
#include "fast/own_map.h"

/*
 * 64 TiB: unused by the kernel's top-down area (below 128 TiB, from the
 * stack down), PIE executables (0x55..., 0x56...) and the brk heap after
 * them, and ASan's fixed shadow (below 16 TiB).  MSan and TSan keep the
 * range as a protected gap: the hint is taken there and the kernel places
 * the mapping as it would without one.  A fork inherits the next hint with
 * the mappings made below it.
 */
#define OWN_MAP_BASE 0x400000000000ull
#define OWN_MAP_ALIGN 0x10000ull /* 64 KiB between two ranges: room for a page of rounding */

static uint64_t own_map_next = OWN_MAP_BASE;

void *own_map_hint(size_t len)
{
	uint64_t span = ((uint64_t)len + 2 * OWN_MAP_ALIGN - 1) & ~(OWN_MAP_ALIGN - 1);

	return (void *)(uintptr_t)__atomic_fetch_add(&own_map_next, span, __ATOMIC_RELAXED);
}
