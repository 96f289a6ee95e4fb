/* SPDX-License-Identifier: MIT */
/*
 * unwind_cache.h - unwind tables (unwind_table.h) kept across runs in a
 * directory only root can write (by default /var/cache/memtrack), one file
 * per object file, so that a command tracked again does not wait for the
 * tables of the files it maps to be built again (cc1's takes 55 ms).
 *
 * An entry is the table of one file as it was: it is found by, and holds,
 * the file's device, inode, size, mtime and ctime (any write or rename of
 * the file changes its ctime) and the build-id of the memtrack that built
 * it (a memtrack built differently may build different rows).  An entry is
 * used only if every one of these matches, the entry is a regular file
 * owned by memtrack's user and writable by nobody else, and its contents
 * check out (a checksum, the rows' order, the index within the rows);
 * anything else is a miss, and the table is built and the entry replaced.
 * An entry over 256 KiB is checked a piece at a time and left in its file
 * (the table's file_fd, unwind_table.h), read again a piece at a time as
 * it is stored: memtrack's memory never holds cc1's 9 MB of rows.
 * Entries are written whole under a temporary name and renamed into place,
 * so a reader (another memtrack at the same time) sees all of one or none.
 * The directory keeps at most UNWIND_CACHE_MAX_BYTES: a store beyond that
 * removes the entries used longest ago (a hit marks its entry used).
 *
 * THREAD NOTES: unwind_cache_open()/_close() on one thread; in between,
 * unwind_cache_build() may run on any number of threads at once (the
 * cache holds only its directory's fd).
 * Ownership: unwind_cache_open() returns a cache freed by
 * unwind_cache_close(); unwind_cache_build()'s table is the caller's
 * (unwind_table_free()).
 */
#ifndef MEMTRACK_UNWIND_CACHE_H
#define MEMTRACK_UNWIND_CACHE_H

#include <stddef.h>
#include "inspect/unwind_table.h"

#define UNWIND_CACHE_DEFAULT_DIR "/var/cache/memtrack"
#define UNWIND_CACHE_MAX_BYTES (512ull << 20)

struct unwind_cache;

/*
 * Opens (creating its last component, mode 0700) the cache directory
 * @dir, an absolute path every directory of which is owned by root or
 * memtrack's user and writable by no one else (sticky ones excepted: /tmp),
 * followed without symbolic links.  Returns 0, or -errno with a one-line
 * reason in @why: -EINVAL not absolute, -ELOOP a link, -EPERM a directory
 * others may write, -ENOTSUP memtrack has no build-id (nothing could tell
 * its entries from another build's).
 */
int unwind_cache_open(const char *dir, struct unwind_cache **out, char *why, size_t whylen);

void unwind_cache_close(struct unwind_cache *c);

/*
 * The table of @path (as unwind_table_build() opens it): the cache's entry
 * for that very file when it has a good one, else built and stored.  @c
 * may be NULL (no cache: built).  Returns as unwind_table_build().
 */
int unwind_cache_build(struct unwind_cache *c, const char *path, struct unwind_table **out);

#endif /* MEMTRACK_UNWIND_CACHE_H */
