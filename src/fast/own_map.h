/* SPDX-License-Identifier: MIT */
/*
 * own_map.h - where libmemtrack-fast.so puts its own mappings (the ring,
 * the heap switch, memtrack's unwind tables and the unwinder's caches):
 * away from the program's, so that the program's mmaps land where they
 * would without memtrack.
 *
 * The kernel places a mapping without an address just below the last one
 * (top down).  Were the library's there, every mapping the program makes
 * afterwards would move down by their size (13 MiB of tables for cc1), and
 * what a program derives from its addresses would change with them: GCC's
 * garbage collector keeps a page table with a calloc(32768) for each 16 MiB
 * region its pages are in, so cc1 made one call more under memtrack
 * --stacks than alone.  So each mapping gets an address hint in a range
 * of its own, far below the top-down area.  A hint, never MAP_FIXED: where
 * the range is taken the kernel places the mapping as before.
 *
 * THREAD NOTES: own_map_hint() is safe from any thread (one atomic add).
 */
#ifndef MEMTRACK_FAST_OWN_MAP_H
#define MEMTRACK_FAST_OWN_MAP_H

#include <stddef.h>
#include "fast/fast_lib.h"

/* The address to ask mmap() for @len bytes of the library's own, each call a range of its own. */
void *own_map_hint(size_t len) HIDDEN;

#endif /* MEMTRACK_FAST_OWN_MAP_H */
