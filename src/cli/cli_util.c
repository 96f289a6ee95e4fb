// SPDX-License-Identifier: MIT
/* cli_util.c - helpers shared by the subcommands; see cli.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

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
