/* SPDX-License-Identifier: MIT */
/*
 * symcache.h - the on-disk cache of resolved addresses, one file per
 * build-id: DIR/<build-id hex>.syms (symbolize.c's persistence).
 *
 * A file is a header line naming its build-id, one line per address
 * ("ADDR\tN" then N times "\tFUNCTION\tFILE\tLINE", hex ADDR), and an end
 * line with the entry count and an FNV-1a checksum of the entry lines.  A
 * file is written whole to a temporary name and renamed, and read back only
 * if every line parses, the count and checksum match and the build-id is
 * the one asked for: anything else is ignored as if absent.  DIR and its
 * parent are opened without following links and must belong to the user
 * memtrack writes for (as_user.h; the parent may be root's), or the cache
 * is not used; under sudo every file operation in it is that user's.
 * Nothing here reports an error to the user.
 */
#ifndef MEMTRACK_SYMCACHE_H
#define MEMTRACK_SYMCACHE_H

#include <stdint.h>
#include "analyze/symbolize.h"

struct symcache_entry {
	uint64_t addr;
	uint32_t nframes;
	const struct sym_frame *frames; /* borrowed */
};

/*
 * Called for each cached address; returns 0, or -errno to stop loading.
 * The frames' strings are borrowed for the call only.
 */
typedef int symcache_add_fn(void *ctx, uint64_t addr, const struct sym_frame *frames,
			    uint32_t nframes);

/*
 * Feeds every entry of the cache file of @bid to @add, but only once the
 * whole file has proved valid.  Returns the number of entries fed, 0 when
 * there is no valid file, or the first negative @add returned.
 */
int symcache_load(const char *dir, const uint8_t *bid, unsigned bid_len, symcache_add_fn *add,
		  void *ctx);

/* Replaces the cache file of @bid with @n entries; silently does nothing on any failure. */
void symcache_save(const char *dir, const uint8_t *bid, unsigned bid_len,
		   const struct symcache_entry *e, uint64_t n);

#endif /* MEMTRACK_SYMCACHE_H */
