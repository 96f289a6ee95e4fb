/* SPDX-License-Identifier: MIT */
/* json.h - the little JSON output dump and report need. */
#ifndef MEMTRACK_JSON_H
#define MEMTRACK_JSON_H

#include <stdio.h>

/* Prints @s as a JSON string literal, quotes included. */
void json_print_string(FILE *out, const char *s);

#endif /* MEMTRACK_JSON_H */
