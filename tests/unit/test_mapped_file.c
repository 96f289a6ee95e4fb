// SPDX-License-Identifier: MIT
/*
 * test_mapped_file.c - mapped_file_open() (src/inspect/mapped_file.c) on what
 * a tracked program can put where its maps name a file: a regular file
 * opens; a FIFO, a device and a directory are refused without being opened
 * (a FIFO nobody writes would block an open); a symbolic link anywhere in
 * the path under /proc/PID/root is refused; other paths follow links.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "inspect/mapped_file.h"

static char dir[64];

/* @name under the scratch directory, as probes.c names a process's files */
static const char *in_root(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "/proc/%d/root%s/%s", (int)getpid(), dir, name);
	return path;
}

static void test_regular_and_not(void)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	close(fd);
	fd = mapped_file_open(in_root("file"));
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
		close(fd);
	}
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK_EQ(mkfifo(path, 0600), 0);
	CHECK_EQ(mapped_file_open(in_root("fifo")), -EINVAL); /* returns: nothing opened it */
	CHECK_EQ(mapped_file_open(in_root("")), -EINVAL);     /* the directory */
	CHECK_EQ(mapped_file_open("/dev/null"), -EINVAL);
	CHECK_EQ(mapped_file_open(in_root("none")), -ENOENT);
}

static void test_links(void)
{
	char path[128], target[128];
	int fd;

	snprintf(path, sizeof(path), "%s/link", dir);
	snprintf(target, sizeof(target), "%s/file", dir);
	CHECK_EQ(symlink(target, path), 0);
	CHECK_EQ(mapped_file_open(in_root("link")), -ELOOP);
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK_EQ(symlink(dir, path), 0);
	CHECK_EQ(mapped_file_open(in_root("sub/file")),
		 -ELOOP);	       /* a directory swapped for a link */
	fd = mapped_file_open(target); /* a plain path: links followed (tests, tools) */
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/memtrack-mapped-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(test_regular_and_not);
	RUN(test_links);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* a scratch directory left in /tmp is harmless */
	}
	HARNESS_EXIT();
}
