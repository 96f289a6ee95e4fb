// SPDX-License-Identifier: MIT
/* cli_util.c - helpers shared by the subcommands; see cli.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/as_user.h"
#include "cli/cli.h"

void die_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("memtrack: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int close_stdout(const char *what)
{
	int err = 0;

	if (fflush(stdout) || ferror(stdout))
		err = errno ? errno : EIO;
	if (fclose(stdout) && !err)
		err = errno;
	if (!err)
		return 0;
	die_msg("cannot write the %s to standard output: %s; free space or redirect it elsewhere",
		what, strerror(err));
	return 1;
}

bool output_refused(int dirfd, const char *base, const char *path, const char *opt)
{
	struct stat st;

	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) || S_ISREG(st.st_mode))
		return false;
	die_msg("'%s' exists and is not a regular file (%s); memtrack replaces only regular files: choose another path with %s",
		path,
		S_ISLNK(st.st_mode)   ? "a symbolic link"
		: S_ISDIR(st.st_mode) ? "a directory"
				      : "a device, FIFO or socket",
		opt);
	return true;
}

/*
 * Opens @base under @dirfd for writing as the invoking user, without
 * following a link and without blocking on a FIFO, and truncates it once it
 * proved a regular file with no other name (a hard link would have memtrack
 * write over a file it was not given).  Returns the fd or -errno (-EINVAL:
 * not a regular file, -EMLINK: other links).
 */
static int open_for_writing(int dirfd, const char *base)
{
	int fd = as_user_openat(dirfd, base, O_WRONLY | O_CREAT | O_NONBLOCK, 0666);
	struct stat st;
	int err;

	if (fd < 0)
		return fd;
	err = fstat(fd, &st)	     ? -errno
	      : !S_ISREG(st.st_mode) ? -EINVAL
	      : st.st_nlink > 1	     ? -EMLINK
				     : 0;
	if (!err && ftruncate(fd, 0))
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* Says why output_fopen() could not open @path (@err, from open_for_writing or the directory). */
static void output_failed(const char *path, const char *opt, int err)
{
	if (err == -ELOOP || err == -EINVAL)
		die_msg("'%s' is not a regular file (it changed while memtrack opened it); memtrack replaces only regular files: choose another path with %s",
			path, opt);
	else if (err == -EMLINK)
		die_msg("'%s' has other hard links; memtrack does not write through them: remove it or choose another path with %s",
			path, opt);
	else
		die_msg("cannot write '%s': %s; choose a path you can write with %s", path,
			strerror(-err), opt);
}

int output_open(const char *path, const char *opt)
{
	const char *base;
	int dirfd = as_user_open_dir(path, &base), fd = -1;

	if (dirfd == -EINVAL) {
		die_msg("invalid output path '%s'; give a file name with %s", path, opt);
		return -1;
	}
	if (dirfd < 0) {
		output_failed(path, opt, dirfd);
		return -1;
	}
	if (!output_refused(dirfd, base, path, opt)) {
		fd = open_for_writing(dirfd, base);
		if (fd < 0)
			output_failed(path, opt, fd);
	}
	close(dirfd);
	return fd < 0 ? -1 : fd;
}

FILE *output_fopen(const char *path, const char *opt)
{
	int fd = output_open(path, opt);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f) {
		output_failed(path, opt, -errno);
		close(fd);
	}
	return f;
}
