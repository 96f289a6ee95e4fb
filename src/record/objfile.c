// SPDX-License-Identifier: MIT
/* objfile.c - opening the files tracked processes map; see objfile.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "objfile.h"

/* O_NONBLOCK: a FIFO swapped in opens at once (and is refused); O_NOCTTY: a tty never becomes ours */
#define OBJFILE_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

/* The length of "/proc/PID/root" at the start of @path, or 0. */
static size_t proc_root_prefix(const char *path)
{
	size_t n = strlen("/proc/");

	if (strncmp(path, "/proc/", n) || path[n] < '1' || path[n] > '9')
		return 0;
	n += strspn(path + n, "0123456789");
	if (strncmp(path + n, "/root/", strlen("/root/")))
		return 0;
	return n + strlen("/root");
}

/* @rest resolved under @root_path with no link followed; -errno on failure. */
static int open_in_root(const char *root_path, const char *rest)
{
	struct open_how how = { .flags = OBJFILE_OPEN_FLAGS,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	int root, fd;

	root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, root, rest, &how, sizeof(how));
	if (fd < 0)
		fd = -errno;
	close(root);
	return fd;
}

int objfile_open(const char *path)
{
	size_t root_len = proc_root_prefix(path);
	char root_path[64];
	struct stat st;
	int fd, err;

	if (root_len && root_len < sizeof(root_path)) {
		memcpy(root_path, path, root_len);
		root_path[root_len] = 0;
		fd = open_in_root(root_path, path + root_len);
	} else {
		fd = open(path, OBJFILE_OPEN_FLAGS);
		if (fd < 0)
			fd = -errno;
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto fail;
	}
	if ((unsigned long long)st.st_size > OBJFILE_MAX_BYTES) {
		err = -EFBIG;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return err;
}
