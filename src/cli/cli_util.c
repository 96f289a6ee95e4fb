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
#include "record/as_user.h"
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

/*
 * Digits, then an optional K/M/G (any case), then an optional "i" (only
 * after K/M/G: "16Ki"), then an optional "B".  No sign, no blanks: strtoull
 * would accept "-1" as 2^64-1.
 */
int parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case 'k':
	case 'K': shift = 10; break;
	case 'm':
	case 'M': shift = 20; break;
	case 'g':
	case 'G': shift = 30; break;
	default: break;
	}
	if (shift) {
		end++;
		if (*end == 'i')
			end++;
	}
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
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

const char *human_bytes(uint64_t bytes, char *buf, size_t len)
{
	const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = bytes;
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, unit[i]);
	return buf;
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

/*
 * The printable form of the character at @p into @out (up to 8 bytes and a
 * NUL): itself, or \xNN for a C0 control or DEL, \xc2\xNN for a C1
 * control in UTF-8 (U+0080..U+009F; 0x9b is a CSI to some terminals).
 * Returns the bytes of @p it stands for.
 */
static size_t printable_char(const unsigned char *p, char out[9])
{
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
		snprintf(out, 9, "\\xc2\\x%02x", p[1]);
		return 2;
	}
	if (p[0] < 0x20 || p[0] == 0x7f)
		snprintf(out, 9, "\\x%02x", p[0]);
	else
		out[0] = (char)p[0], out[1] = 0;
	return 1;
}

const char *printable(const char *s, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t at = 0;
	char one[9];

	if (!len)
		return "";
	while (*p) {
		size_t used = printable_char(p, one), n = strlen(one);

		if (at + n >= len)
			break;
		memcpy(buf + at, one, n);
		at += n;
		p += used;
	}
	buf[at] = 0;
	return buf;
}

void fputs_printable(const char *s, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;
	char one[9];

	while (*p) {
		p += printable_char(p, one);
		fputs(one, f);
	}
}
