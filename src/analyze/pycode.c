// SPDX-License-Identifier: MIT
/*
 * pycode.c - a code object's strings and lines; see pycode.h.  The line
 * tables are CPython's: 3.10's co_linetable (Objects/lnotab_notes.txt) and
 * 3.11+'s location table (Objects/locations.md).
 */
#include <stdlib.h>
#include "analyze/pycode.h"

/* Appends code point @c to @out as UTF-8; returns the bytes written (at most 4). */
static unsigned put_utf8(char *out, uint32_t c)
{
	if (c < 0x80) {
		out[0] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c >= 0xd800 && c < 0xe000)
		c = 0xfffd;
	if (c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | (c >> 6 & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | (c >> 12 & 0x3f));
	out[2] = (char)(0x80 | (c >> 6 & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

char *py_text(const uint8_t *s, uint32_t len, uint32_t kind)
{
	uint32_t step = kind == 2 || kind == 4 ? kind : 1, n = len / step;
	char *out = malloc((size_t)n * 4 + 1), *q = out;

	if (!out)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p = s + (size_t)i * step;
		uint32_t c = step == 1	 ? p[0]
			     : step == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
					 : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
						   (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;

		if (kind == 0 && c > 0x7f)
			c = 0xfffd;
		q += put_utf8(q, c);
	}
	*q = '\0';
	return out;
}

/* 3.10: (bytes delta, line delta) pairs from address 0 and co_firstlineno; -128: no line. */
static uint32_t line_310(const struct mt_pycode *c, uint32_t offset)
{
	uint64_t addr = 0, target = (uint64_t)offset * 2;
	int64_t line = c->firstlineno;

	for (uint32_t i = 0; i + 1 < c->nlines; i += 2) {
		uint64_t end = addr + c->lines[i];
		int8_t d = (int8_t)c->lines[i + 1];

		if (d != -128)
			line += d;
		if (target >= addr && target < end)
			return d == -128 || line <= 0 || line > UINT32_MAX ? 0 : (uint32_t)line;
		addr = end;
	}
	return 0;
}

/* A location table's varint: 6 bits a byte, 0x40 continues.  false: the table ends in it. */
static bool varint(const struct mt_pycode *c, uint32_t *at, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	for (;;) {
		uint8_t b;

		if (*at >= c->nlines || shift > 60)
			return false;
		b = c->lines[(*at)++];
		*v |= (uint64_t)(b & 63) << shift;
		if (!(b & 64))
			return true;
		shift += 6;
	}
}

static bool svarint(const struct mt_pycode *c, uint32_t *at, int64_t *v)
{
	uint64_t u;

	if (!varint(c, at, &u))
		return false;
	*v = u & 1 ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return true;
}

/*
 * The line delta of the entry of @code at *@at (its first byte read), its
 * other bytes skipped; false: malformed or cut.
 */
static bool entry_311(const struct mt_pycode *c, uint32_t code, uint32_t *at, int64_t *delta)
{
	uint64_t skip;

	*delta = 0;
	switch (code) {
	case 15: return true; /* no location */
	case 14:	      /* long form: line, end line, column, end column */
		return svarint(c, at, delta) && varint(c, at, &skip) && varint(c, at, &skip) &&
		       varint(c, at, &skip);
	case 13: return svarint(c, at, delta); /* no column */
	case 10:
	case 11:
	case 12: /* one line form: line delta code - 10, two column bytes */
		*delta = code - 10;
		*at += 2;
		return *at <= c->nlines;
	default: /* short form: same line, one column byte */ *at += 1; return *at <= c->nlines;
	}
}

static uint32_t line_311(const struct mt_pycode *c, uint32_t offset)
{
	uint64_t addr = 0;
	int64_t line = c->firstlineno, delta;
	uint32_t at = 0;

	while (at < c->nlines) {
		uint8_t b = c->lines[at++];
		uint32_t code = b >> 3 & 15, len = (b & 7) + 1u;

		if (!(b & 0x80) || !entry_311(c, code, &at, &delta))
			return 0; /* not an entry's first byte: malformed */
		line += delta;
		if (offset >= addr && offset < addr + len)
			return code == 15 || line <= 0 || line > UINT32_MAX ? 0 : (uint32_t)line;
		addr += len;
	}
	return 0;
}

uint32_t py_line(const struct mt_pycode *c, uint32_t offset)
{
	switch (c->lines_format) {
	case MT_PY_LINES_310: return line_310(c, offset);
	case MT_PY_LINES_311: return line_311(c, offset);
	default: return 0;
	}
}
