/* SPDX-License-Identifier: MIT */
/* json.h - the little JSON output dump and report need. */
#ifndef MEMTRACK_JSON_H
#define MEMTRACK_JSON_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Prints @s as a JSON string literal, quotes included.  Well-formed UTF-8
 * is copied; control characters are escaped; every other byte (0x80-0xff
 * outside a well-formed sequence) becomes \udcXX, the lone surrogate
 * U+DC00 + byte, as Python's surrogateescape does: every line parses, and
 * the original bytes can be recovered (docs/FORMAT.md).
 */
void json_print_string(FILE *out, const char *s);

/*
 * json_print_string() for JSON inside an HTML <script>: <, > and & are
 * written \u003c, \u003e and \u0026 too, so no string (a command or
 * function name from a tracked program) can close the script element.
 */
void json_print_string_html(FILE *out, const char *s);

#endif /* MEMTRACK_JSON_H */
