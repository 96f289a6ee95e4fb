/* SPDX-License-Identifier: MIT */
/*
 * table_pages.h - memtrack's unwind tables read into the library's own
 * memory a page at a time, as the unwinder needs them, instead of mapped
 * from memtrack's memfd.
 *
 * Why not the mapping: a read fault on a shared file mapping maps the
 * pages around the one read too (the kernel's fault-around, 16 pages), and
 * every page mapped counts in the process's RSS, the figure memtrack
 * reports for it.  cc1's walks read ~1,070 pages of its 13 MiB of tables,
 * and the mapping added 7.6 MiB to its peak RSS (42.4 -> 50.0 MiB); read
 * here, they add 4.2 MiB.  A page read here is one page of the process's
 * anonymous memory.
 *
 * A page is read with pread() from the memfd (kept open at a high number,
 * checked to be the memfd still before each read: a program may close or
 * reuse the number) into the copy at its own offset, and remembered with
 * the generation of the process's mappings (mt_fast_umaps.gen) it was
 * read under: memtrack writes an object's rows before it publishes the
 * mappings that name them, so a page read under an older generation may
 * lack rows a walk of the current one reads, and is read again.
 *
 * THREAD NOTES: fast_table_page() runs in any thread, in signal handlers
 * too, without a lock: a page is filled by one thread at a time (a busy
 * bit taken with a compare-and-swap; a walk that finds a page busy gets
 * NULL, its frame unresolved, never waits); it is published with a
 * release store, and the memfd's bytes only grow (rows are appended), so
 * a page read again holds what any walk of an older generation read.
 * open and close are single-threaded (handover.c).
 */
#ifndef MEMTRACK_FAST_TABLE_PAGES_H
#define MEMTRACK_FAST_TABLE_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "fast/fast_lib.h"

#define FAST_TABLE_PAGE 4096u

struct fast_table_pages {
	uint8_t *copy;	 /* the tables' bytes at their memfd offsets, as far as read */
	uint64_t *state; /* per page: (gen + 1) << 1 it was read under, | 1 while busy; 0: never */
	uint64_t bytes;	 /* of the tables (the memfd's size) */
	int fd;		 /* the tables' memfd, -1: none */
	dev_t dev;	 /* what fd was when it was handed over */
	ino_t ino;
};

/*
 * Takes @fd (the tables' memfd of @bytes bytes, closed here on failure)
 * and makes the copy and the page states with @map (zeroed anonymous
 * memory: only what is read becomes resident; handover.c's maps it as the
 * allocator's).  Returns 0, or -1 (nothing kept).
 */
int fast_table_pages_open(struct fast_table_pages *tp, int fd, uint64_t bytes,
			  void *(*map)(size_t len)) HIDDEN;

/* Unmaps and closes what open made; after it (or before any open: .fd = -1) a no-op. */
void fast_table_pages_close(struct fast_table_pages *tp) HIDDEN;

/*
 * @p, which points into tp->copy, once the page holding [@p, @p + @len)
 * has been read under the mappings' generation @gen; NULL when that page
 * cannot be had now (out of the tables, across a page boundary, the memfd
 * lost, a read error, another thread filling it).
 */
const void *fast_table_page(struct fast_table_pages *tp, const void *p, size_t len,
			    uint64_t gen) HIDDEN;

#endif /* MEMTRACK_FAST_TABLE_PAGES_H */
