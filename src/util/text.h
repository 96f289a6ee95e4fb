/* SPDX-License-Identifier: MIT */
/*
 * text.h - sizes and strings as a person reads and writes them: option
 * values ("16M"), byte counts ("1.5 KiB"), and strings from an artifact
 * made safe for a terminal.  Pure: no state; none prints but
 * fputs_printable() to the stream it is given.
 */
#ifndef MEMTRACK_TEXT_H
#define MEMTRACK_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "compiler.h"

/* @bytes as "512 B", "1.5 KiB", ... in @buf (@len bytes); returns @buf. */
const char *human_bytes(uint64_t bytes, char *buf, size_t len);

/* @change as "+1.5 KiB", "-512 B", "0 B" (a signed human_bytes) in @buf; returns @buf. */
const char *human_delta(int64_t change, char *buf, size_t len);

/* "s" unless @n is 1: printf("%llu allocation%s", n, plural(n)). */
static inline const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/*
 * @s as a terminal may show it: every control character (C0, DEL, and C1 in
 * UTF-8) written as \xNN, into @buf (@len bytes; cut short when it does not
 * fit, 4 bytes per byte of @s always do); returns @buf.  For the text output
 * of strings from an artifact (commands, paths, marks, symbol names), which
 * anyone may have filled with escape sequences.
 */
const char *printable(const char *s, char *buf, size_t len);

/* The @len for printable() that holds any string of @n bytes. */
#define PRINTABLE_LEN(n) (4 * (n) + 1)

/* fputs() of printable(@s), however long @s is. */
void fputs_printable(const char *s, FILE *f);

/*
 * Parses "64", "64K", "16M", "1G" (also "16Mi", "16MiB", "64B"); returns 0,
 * -EINVAL for anything else, or -ERANGE when the value does not fit 64 bits.
 * @out is left alone on failure.
 */
MT_MUST_CHECK int parse_size(const char *s, uint64_t *out);

#endif /* MEMTRACK_TEXT_H */
