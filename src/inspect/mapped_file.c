// SPDX-License-Identifier: MIT
/* mapped_file.c - opening the files tracked processes map; see mapped_file.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "inspect/mapped_file.h"
#include "format/open_regular.h"

/* The length of "/proc/PID/root" at the start of @path, or 0. */
static size_t proc_root_prefix(const char *path)
{
	size_t n = strlen("/proc/");

	if (strncmp(path, "/proc/", n) != 0 || path[n] < '1' || path[n] > '9')
		return 0;
	n += strspn(path + n, "0123456789");
	if (strncmp(path + n, "/root/", strlen("/root/")) != 0)
		return 0;
	return n + strlen("/root");
}

/* An O_PATH fd of @path (see mapped_file_open), or -errno. */
static int path_fd(const char *path)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	size_t root_len = proc_root_prefix(path);
	char root_path[64];
	int root, fd;

	if (!root_len || root_len >= sizeof(root_path)) {
		fd = open(path, O_PATH | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	memcpy(root_path, path, root_len);
	root_path[root_len] = 0;
	root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, root, path + root_len, &how, sizeof(how));
	if (fd < 0)
		fd = -errno;
	close(root);
	return fd;
}

int mapped_file_open(const char *path)
{
	struct stat st;
	int at, fd;

	at = path_fd(path);
	if (at < 0)
		return at;
	fd = mt_open_regular_at(at, path, &st, NULL);
	close(at);
	if (fd >= 0 && (unsigned long long)st.st_size > MAPPED_FILE_MAX_BYTES) {
		close(fd);
		fd = -EFBIG;
	}
	return fd;
}
