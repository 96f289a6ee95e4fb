// SPDX-License-Identifier: MIT
/* open_regular.c - reading only regular files, never opening anything else; see open_regular.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "format/open_regular.h"

const char *mt_file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO: return "is a FIFO, not a regular file";
	case S_IFCHR: return "is a character device, not a regular file";
	case S_IFBLK: return "is a block device, not a regular file";
	case S_IFDIR: return "is a directory, not a regular file";
	case S_IFSOCK: return "is a socket, not a regular file";
	default: return "is not a regular file";
	}
}

/*
 * Opens the regular file of the O_PATH fd @at (@st its stat) for reading:
 * through /proc/self/fd, else (no /proc) by @path again, then only when it
 * is still that file.  The fd or -errno; @st is the opened file's.
 */
static int reopen(const char *path, int at, struct stat *st)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat was = *st;
	char self[64];
	int fd, err;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", at);
	fd = open(self, flags);
	if (fd < 0 && errno == ENOENT)
		fd = open(path, flags);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (st->st_dev != was.st_dev || st->st_ino != was.st_ino) { /* replaced meanwhile */
		close(fd);
		*st = was;
		return -ESTALE;
	}
	return fd;
}

int mt_open_regular_at(int at, const char *path, struct stat *st, const char **why)
{
	const char *dummy;
	int fd;

	if (!why)
		why = &dummy;
	*why = "";
	if (fstat(at, st)) {
		st->st_ino = 0;
		return -errno;
	}
	if (!S_ISREG(st->st_mode)) {
		*why = mt_file_kind(st->st_mode);
		return -EINVAL;
	}
	fd = reopen(path, at, st);
	return fd;
}

int mt_open_regular(const char *path, struct stat *st, const char **why)
{
	int at, fd;

	if (why)
		*why = "";
	st->st_ino = 0;
	at = open(path, O_PATH | O_CLOEXEC);
	if (at < 0)
		return -errno;
	fd = mt_open_regular_at(at, path, st, why);
	close(at);
	return fd;
}
