// SPDX-License-Identifier: MIT
/* schema.c - the record type table; see schema.h. */
#include <string.h>
#include "schema.h"

#define U(n) { n, MT_FK_UINT }
#define S(n) { n, MT_FK_SINT }
#define A(n) { n, MT_FK_ADDR }

static const struct mt_type_def type_defs[MT_TYPE_MAX] = {
	[MT_MALLOC] = { "malloc", 2, false, NULL, { A("addr"), U("size") } },
	[MT_CALLOC] = { "calloc", 2, false, NULL, { A("addr"), U("size") } },
	[MT_REALLOC] = { "realloc", 3, false, NULL,
			 { A("addr"), U("size"), A("old_addr") } },
	[MT_ALIGNED_ALLOC] = { "aligned_alloc", 3, false, NULL,
			       { A("addr"), U("size"), U("align") } },
	[MT_FREE] = { "free", 1, false, NULL, { A("addr") } },
	[MT_MMAP] = { "mmap", 6, false, NULL,
		      { A("addr"), U("len"), U("prot"), U("flags"), S("fd"),
			U("offset") } },
	[MT_MUNMAP] = { "munmap", 2, false, NULL, { A("addr"), U("len") } },
	[MT_MREMAP] = { "mremap", 5, false, NULL,
			{ A("addr"), U("len"), A("old_addr"), U("old_len"),
			  U("flags") } },
	[MT_BRK] = { "brk", 1, false, NULL, { A("addr") } },
	[MT_FORK] = { "fork", 3, false, NULL,
		      { U("parent"), U("child"), U("flags") } },
	[MT_EXEC] = { "exec", 1, true, "path", { U("old_pid") } },
	[MT_EXIT] = { "exit", 2, false, NULL, { S("code"), U("signal") } },
	[MT_RSS] = { "rss", 4, false, NULL,
		     { U("anon"), U("file"), U("shmem"), U("swap") } },
	[MT_PHYSICAL] = { "physical", 1, false, NULL, { U("bytes") } },
	[MT_MARK] = { "mark", 0, true, "name", { { NULL, MT_FK_UINT } } },
	[MT_ENABLE] = { "enable", 0, false, NULL, { { NULL, MT_FK_UINT } } },
	[MT_DISABLE] = { "disable", 0, false, NULL, { { NULL, MT_FK_UINT } } },
};

static const char *const fn_names[MT_FN_MAX] = {
#define FN_NAME(id, name, kind) [MT_FN_##id] = name,
	MT_FN_LIST(FN_NAME)
#undef FN_NAME
};

static const unsigned char fn_kinds[MT_FN_MAX] = {
#define FN_KIND(id, name, kind) [MT_FN_##id] = kind,
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

unsigned mt_natural_fn(unsigned type)
{
	switch (type) {
	case MT_MALLOC: return MT_FN_MALLOC;
	case MT_CALLOC: return MT_FN_CALLOC;
	case MT_REALLOC: return MT_FN_REALLOC;
	case MT_ALIGNED_ALLOC: return MT_FN_ALIGNED_ALLOC;
	case MT_FREE: return MT_FN_FREE;
	default: return MT_FN_MALLOC; /* non-heap records carry fn 0 */
	}
}

unsigned mt_type_from_name(const char *name)
{
	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		if (type_defs[t].name && !strcmp(type_defs[t].name, name))
			return t;
	return 0;
}
