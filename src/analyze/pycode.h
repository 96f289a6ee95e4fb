/* SPDX-License-Identifier: MIT */
/*
 * pycode.h - what a Python frame shows, from its PYCODE record (FORMAT.md
 * §8.3): the code object's strings as printable UTF-8, and the line of an
 * instruction from the line table the record kept.  Both read bytes a
 * tracked process wrote: every length is bounded, every byte checked.
 */
#ifndef MEMTRACK_PYCODE_H
#define MEMTRACK_PYCODE_H

#include <stdint.h>
#include "analyze/stacks.h"

/*
 * @len bytes of characters of @kind (0 ASCII, 1 Latin-1, 2 UCS-2, 4 UCS-4)
 * as a malloc'd NUL-terminated UTF-8 string: control characters become
 * '?', code points that are no characters (surrogates, above U+10FFFF,
 * bytes above 0x7f in "ASCII") U+FFFD.  NULL: out of memory.
 */
char *py_text(const uint8_t *s, uint32_t len, uint32_t kind);

/*
 * The source line of the instruction at @offset (code units) of @c, 0
 * when its line table does not say (no line, a table cut at its record's
 * bound, a malformed one).
 */
uint32_t py_line(const struct mt_pycode *c, uint32_t offset);

#endif /* MEMTRACK_PYCODE_H */
