// SPDX-License-Identifier: MIT
/* table_pages.c - the unwind tables read a page at a time; see table_pages.h. */
#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fast/table_pages.h"

int fast_table_pages_open(struct fast_table_pages *tp, int fd, uint64_t bytes,
			  void *(*map)(size_t len))
{
	uint64_t npages = (bytes + FAST_TABLE_PAGE - 1) / FAST_TABLE_PAGE;
	struct stat st;

	*tp = (struct fast_table_pages){ .fd = fd, .bytes = bytes };
	if (fd < 0 || !bytes || fstat(fd, &st) || (uint64_t)st.st_size < bytes)
		goto fail;
	tp->dev = st.st_dev;
	tp->ino = st.st_ino;
	tp->copy = map(npages * FAST_TABLE_PAGE);
	tp->state = map(npages * sizeof(*tp->state));
	if (!tp->copy || !tp->state)
		goto fail;
	/* never transparent huge pages: one page read would make 2 MiB resident */
	madvise(tp->copy, npages * FAST_TABLE_PAGE, MADV_NOHUGEPAGE);
	madvise(tp->state, npages * sizeof(*tp->state), MADV_NOHUGEPAGE);
	return 0;
fail:
	fast_table_pages_close(tp);
	return -1;
}

void fast_table_pages_close(struct fast_table_pages *tp)
{
	uint64_t npages = (tp->bytes + FAST_TABLE_PAGE - 1) / FAST_TABLE_PAGE;

	if (tp->copy)
		munmap(tp->copy, npages * FAST_TABLE_PAGE);
	if (tp->state)
		munmap(tp->state, npages * sizeof(*tp->state));
	if (tp->fd >= 0)
		close(tp->fd);
	*tp = (struct fast_table_pages){ .fd = -1 };
}

/*
 * Whether tp->fd is still the memfd handed over (the program may have
 * closed and reused the number).  A program that does so between this
 * check and the read (another thread, in that window) is not caught: the
 * page then holds another file's bytes, which the walks read as rows
 * (stacks wrong, never a fault: a walk reads only the thread's stack).
 */
static bool fd_ours(const struct fast_table_pages *tp)
{
	struct stat st;

	return tp->fd >= 0 && !fstat(tp->fd, &st) && st.st_dev == tp->dev && st.st_ino == tp->ino;
}

/* Reads page @pg whole (the last one up to the tables' end); false on any failure. */
static bool read_page(const struct fast_table_pages *tp, uint64_t pg)
{
	uint64_t off = pg * FAST_TABLE_PAGE;
	uint64_t want = tp->bytes - off < FAST_TABLE_PAGE ? tp->bytes - off : FAST_TABLE_PAGE;
	uint64_t got = 0;

	if (!fd_ours(tp))
		return false;
	while (got < want) {
		ssize_t n = pread(tp->fd, tp->copy + off + got, want - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += (uint64_t)n;
	}
	return true;
}

const void *fast_table_page(struct fast_table_pages *tp, const void *p, size_t len, uint64_t gen)
{
	uint64_t off = (uint64_t)((const uint8_t *)p - tp->copy), pg, ready = (gen + 1) << 1, seen;

	if ((const uint8_t *)p < tp->copy || off >= tp->bytes || !len || len > tp->bytes - off)
		return NULL;
	pg = off / FAST_TABLE_PAGE;
	if ((off + len - 1) / FAST_TABLE_PAGE != pg)
		return NULL; /* rows and index entries never cross a page: a bad geometry */
	seen = __atomic_load_n(&tp->state[pg], __ATOMIC_ACQUIRE);
	if (seen == ready)
		return p;
	if ((seen & 1) || !__atomic_compare_exchange_n(&tp->state[pg], &seen, seen | 1, false,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return NULL; /* another thread (or the walk this handler interrupted) fills it */
	if (!read_page(tp, pg)) { /* what it read is the memfd's: the page serves what it served */
		__atomic_store_n(&tp->state[pg], seen, __ATOMIC_RELEASE);
		return NULL;
	}
	__atomic_store_n(&tp->state[pg], ready, __ATOMIC_RELEASE);
	return p;
}
