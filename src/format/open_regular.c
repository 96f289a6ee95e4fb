// SPDX-License-Identifier: MIT
/* open_regular.c - reading only regular files, never opening anything else; see open_regular.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "open_regular.h"

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

int mt_open_regular(const char *path, struct stat *st, const char **why)
{
	const char *dummy;
	char self[64];
	int at, fd = -1, err = 0;

	if (!why)
		why = &dummy;
	*why = "";
	st->st_ino = 0;
	at = open(path, O_PATH | O_CLOEXEC);
	if (at < 0)
		return -errno;
	if (fstat(at, st)) {
		err = -errno;
		st->st_ino = 0;
	} else if (!S_ISREG(st->st_mode)) {
		*why = mt_file_kind(st->st_mode);
		err = -EINVAL;
	} else {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", at);
		fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, st))
			err = -errno;
	}
	close(at);
	if (err && fd >= 0)
		close(fd);
	return err ? err : fd;
}
