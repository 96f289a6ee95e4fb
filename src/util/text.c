// SPDX-License-Identifier: MIT
/* text.c - sizes and strings as a person reads and writes them; see text.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/text.h"

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

const char *human_delta(int64_t change, char *buf, size_t len)
{
	uint64_t mag = change < 0 ? 0 - (uint64_t)change : (uint64_t)change;
	char b[32];

	snprintf(buf, len, "%s%s",
		 change > 0   ? "+"
		 : change < 0 ? "-"
			      : "",
		 human_bytes(mag, b, sizeof(b)));
	return buf;
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
