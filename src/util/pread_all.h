/* SPDX-License-Identifier: MIT */
/*
 * pread_all.h - a pread() of exactly @n bytes, through short reads: for
 * files memtrack wrote itself (inspect/unwind_cache.c's entries), where a
 * short file is damage.
 */
#ifndef MEMTRACK_PREAD_ALL_H
#define MEMTRACK_PREAD_ALL_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

/* 0, or -errno (-EIO: the file ends first). */
static inline int pread_all(int fd, void *buf, size_t n, off_t off)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);

		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return 0;
}

#endif /* MEMTRACK_PREAD_ALL_H */
