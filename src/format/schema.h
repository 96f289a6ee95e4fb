/* SPDX-License-Identifier: MIT */
/*
 * schema.h - names and field layout of every record type.
 *
 * The table behind dump's JSON keys and the codec's choice of field coding,
 * generated from MT_RECORD_TYPES in event.h (FORMAT.md §8 is checked
 * against it by tests/unit/test_schema.c).
 */
#ifndef MEMTRACK_SCHEMA_H
#define MEMTRACK_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"

/* How a field is coded on disk (see docs/FORMAT.md, "Field coding"). */
enum mt_field_kind {
	MT_FK_UINT = 0, /* unsigned LEB128 varint */
	MT_FK_SINT = 1, /* zigzag, then varint */
	MT_FK_ADDR = 2, /* zigzag(value - previous ADDR field of the frame), then varint */
};

struct mt_field_def {
	const char *name; /* JSON key in `memtrack dump` */
	enum mt_field_kind kind;
};

struct mt_type_def {
	const char *name;	 /* JSON "type" value, NULL for unused slots */
	unsigned nfields;	 /* fields every record of this type carries */
	bool has_string;	 /* a length-prefixed string follows the fields */
	const char *string_name; /* its JSON key */
	unsigned natural_fn;	 /* enum mt_fn a heap type names by default, else 0 */
	struct mt_field_def fields[MT_MAX_FIELDS];
};

/* Returns the definition of @type, or NULL when @type is unknown. */
const struct mt_type_def *mt_type_def(unsigned type);

/* Name of an allocator entry point ("posix_memalign"), or NULL. */
const char *mt_fn_name(unsigned fn);

/* The enum mt_fn_kind of @fn, or -1 when @fn is unknown. */
int mt_fn_kind(unsigned fn);

/* Parses an allocator function name; returns MT_FN_MAX when unknown. */
unsigned mt_fn_from_name(const char *name);

/*
 * The allocator function a heap record of @type names when its fn is the
 * natural one (malloc for MALLOC...); dump prints "fn" only when they differ.
 */
unsigned mt_natural_fn(unsigned type);

/*
 * Index of the `stack` field of @type (heap and mmap records), or -1 when
 * it has none.  Files of writers older than --stacks lack it (FORMAT.md §10).
 */
int mt_stack_field(unsigned type);

/* Parses a type name; returns 0 when unknown. */
unsigned mt_type_from_name(const char *name);

#endif /* MEMTRACK_SCHEMA_H */
