// SPDX-License-Identifier: MIT
/* schema.c - the record type table, built from MT_RECORD_TYPES; see schema.h. */
#include <string.h>
#include "format/schema.h"

#define FIELD_DEF(INDEX, key, kind) { key, MT_FK_##kind },
#define TYPE_DEF(NAME, num, name, str, fn)                                                    \
	[MT_##NAME] = {                                                                       \
		name, NAME##_NFIELDS, (str) != NULL, str, fn, { MT_FIELDS_##NAME(FIELD_DEF) } \
	},

static const struct mt_type_def type_defs[MT_TYPE_MAX] = { MT_RECORD_TYPES(TYPE_DEF) };

static const char *const fn_names[MT_FN_MAX] = {
#define FN_NAME(id, num, name, kind, sym, where) [MT_FN_##id] = (name),
	MT_FN_LIST(FN_NAME)
#undef FN_NAME
};

static const unsigned char fn_kinds[MT_FN_MAX] = {
#define FN_KIND(id, num, name, kind, sym, where) [MT_FN_##id] = (kind),
	MT_FN_LIST(FN_KIND)
#undef FN_KIND
};

const struct mt_type_def *mt_type_def(unsigned type)
{
	if (type >= MT_TYPE_MAX || !type_defs[type].name)
		return NULL;
	return &type_defs[type];
}

const char *mt_fn_name(unsigned fn)
{
	return fn < MT_FN_MAX ? fn_names[fn] : NULL;
}

int mt_fn_kind(unsigned fn)
{
	return fn < MT_FN_MAX ? fn_kinds[fn] : -1;
}

unsigned mt_fn_from_name(const char *name)
{
	for (unsigned fn = 0; fn < MT_FN_MAX; fn++)
		if (!strcmp(fn_names[fn], name))
			return fn;
	return MT_FN_MAX;
}

/* Non-heap records carry fn 0, which the table gives them too. */
unsigned mt_natural_fn(unsigned type)
{
	const struct mt_type_def *d = mt_type_def(type);

	return d ? d->natural_fn : MT_FN_MALLOC;
}

unsigned mt_type_from_name(const char *name)
{
	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		if (type_defs[t].name && !strcmp(type_defs[t].name, name))
			return t;
	return 0;
}

int mt_stack_field(unsigned type)
{
	const struct mt_type_def *d = mt_type_def(type);

	if (!d)
		return -1;
	for (unsigned i = 0; i < d->nfields; i++)
		if (!strcmp(d->fields[i].name, "stack"))
			return (int)i;
	return -1;
}
