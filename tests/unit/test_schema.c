// SPDX-License-Identifier: MIT
/*
 * test_schema.c - the record type table (schema.c, built from
 * MT_RECORD_TYPES in event.h), and docs/FORMAT.md §8 held to it: a type
 * added to the list but not to the spec, or documented with another name,
 * field count, field name, kind or order, fails here.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "format/schema.h"

#ifndef MT_SOURCE_DIR
#define MT_SOURCE_DIR "."
#endif

#define MAX_DOC_TYPES 64

/* What FORMAT.md §8 says about one type. */
struct doc_type {
	char name[64];	  /* from the summary table */
	unsigned nfields; /* from the summary table */
	char string[64];  /* "" when the table says "no" */
	bool in_table;
	bool in_list; /* has a "* **N `name`**" paragraph */
	char list_name[64];
	unsigned nlisted; /* "i: `key` KIND" entries found */
	char key[MT_MAX_FIELDS][64];
	char kind[MT_MAX_FIELDS][8];
};

static struct doc_type doc[MAX_DOC_TYPES];

static char *read_section(void)
{
	static char buf[1 << 17];
	const char *path = MT_SOURCE_DIR "/docs/FORMAT.md";
	FILE *f = fopen(path, "r");
	size_t n;
	char *start, *end;

	if (!f) {
		fprintf(stderr, "  cannot open %s\n", path);
		return NULL;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	start = strstr(buf, "\n## 8. Record types");
	if (!start)
		return NULL;
	end = strstr(start, "\n### 8.1");
	if (end)
		*end = 0;
	return start;
}

/* "| 11   | `exec`          | 1 | yes, `path` |" */
static void parse_table_row(const char *line)
{
	char name[64], str[64];
	unsigned type, nf;

	if (sscanf(line, "| %u | `%63[^`]` | %u | %63[^|]|", &type, name, &nf, str) != 4 ||
	    type >= MAX_DOC_TYPES)
		return;
	doc[type].in_table = true;
	snprintf(doc[type].name, sizeof(doc[type].name), "%s", name);
	doc[type].nfields = nf;
	if (sscanf(str, "yes, `%63[^`]`", doc[type].string) != 1)
		doc[type].string[0] = 0;
}

/* Every "i: `key` KIND" of one type's paragraph, in order. */
static void parse_fields(struct doc_type *d, const char *text, const char *end)
{
	for (const char *p = text; p < end; p++) {
		unsigned i;
		char key[64], kind[8];

		/* a field index starts a word (sscanf would skip blanks itself) */
		if (!isdigit((unsigned char)*p) || (p > text && p[-1] != ' ' && p[-1] != '\n'))
			continue;
		if (sscanf(p, "%u: `%63[^`]` %7[A-Z]", &i, key, kind) != 3)
			continue;
		if (i != d->nlisted || i >= MT_MAX_FIELDS) {
			d->nlisted = MT_MAX_FIELDS + 1; /* out of order: mismatch */
			return;
		}
		snprintf(d->key[i], sizeof(d->key[i]), "%s", key);
		snprintf(d->kind[i], sizeof(d->kind[i]), "%s", kind);
		d->nlisted++;
	}
}

static bool parse_doc(void)
{
	char *sec = read_section(), *p;

	if (!sec)
		return false;
	for (p = sec; p; p = strchr(p, '\n')) {
		unsigned type;
		char name[64];
		char *next;

		p++;
		if (*p == '|') {
			parse_table_row(p);
			continue;
		}
		if (sscanf(p, "* **%u `%63[^`]`**", &type, name) != 2 || type >= MAX_DOC_TYPES)
			continue;
		next = strstr(p + 1, "\n* **");
		doc[type].in_list = true;
		snprintf(doc[type].list_name, sizeof(doc[type].list_name), "%s", name);
		parse_fields(&doc[type], p, next ? next : p + strlen(p));
	}
	return true;
}

static const char *kind_name(enum mt_field_kind k)
{
	return k == MT_FK_ADDR ? "ADDR" : k == MT_FK_SINT ? "SINT" : "UINT";
}

static void test_format_md_matches_list(void)
{
	CHECK(parse_doc());
	for (unsigned t = 1; t < MAX_DOC_TYPES; t++) {
		const struct mt_type_def *d = mt_type_def(t);
		struct doc_type *dt = &doc[t];

		if (!d) {
			/* documented but not in MT_RECORD_TYPES */
			CHECK_EQ(dt->in_table, false);
			CHECK_EQ(dt->in_list, false);
			continue;
		}
		CHECK_EQ(dt->in_table, true);
		CHECK_EQ(dt->in_list, true);
		CHECK_STR(dt->name, d->name);
		CHECK_STR(dt->list_name, d->name);
		CHECK_EQ(dt->nfields, d->nfields);
		CHECK_STR(dt->string, d->has_string ? d->string_name : "");
		CHECK_EQ(dt->nlisted, d->nfields);
		for (unsigned i = 0; i < d->nfields && i < dt->nlisted; i++) {
			CHECK_STR(dt->key[i], d->fields[i].name);
			CHECK_STR(dt->kind[i], kind_name(d->fields[i].kind));
		}
	}
}

static void test_lookup(void)
{
	CHECK(mt_type_def(0) == NULL);
	CHECK(mt_type_def(MT_TYPE_MAX) == NULL);
	CHECK(mt_type_def(~0u) == NULL);
	CHECK_EQ(mt_type_def(MT_MREMAP)->nfields, MREMAP_NFIELDS);
	CHECK_STR(mt_type_def(MT_MREMAP)->fields[MREMAP_OLD_ADDR].name, "old_addr");
	CHECK_EQ(mt_type_def(MT_MREMAP)->fields[MREMAP_NEW_ADDR].kind, MT_FK_ADDR);
	CHECK_EQ(mt_type_def(MT_MMAP)->fields[MMAP_FD].kind, MT_FK_SINT);
	CHECK_EQ(mt_type_def(MT_EXEC)->has_string, true);
	CHECK_STR(mt_type_def(MT_EXEC)->string_name, "path");
	CHECK_EQ(mt_type_def(MT_MALLOC)->has_string, false);
	CHECK_EQ(mt_type_from_name("aligned_alloc"), MT_ALIGNED_ALLOC);
	CHECK_EQ(mt_type_from_name("physical"), MT_PHYSICAL);
	CHECK_EQ(mt_type_from_name("nosuch"), 0);
	CHECK_EQ(mt_type_from_name(""), 0);
}

/* Every type has a name, fields with names, and round-trips by name. */
static void test_every_type(void)
{
	for (unsigned t = 1; t < MT_TYPE_MAX; t++) {
		const struct mt_type_def *d = mt_type_def(t);

		CHECK(d != NULL);
		if (!d)
			continue;
		CHECK_EQ(mt_type_from_name(d->name), t);
		CHECK(d->nfields <= MT_MAX_FIELDS);
		for (unsigned i = 0; i < d->nfields; i++)
			CHECK(d->fields[i].name && d->fields[i].name[0]);
		CHECK_EQ(d->has_string, d->string_name != NULL);
	}
}

static void test_fn(void)
{
	CHECK_STR(mt_fn_name(MT_FN_POSIX_MEMALIGN), "posix_memalign");
	CHECK_STR(mt_fn_name(MT_FN_FREE), "free");
	CHECK(mt_fn_name(MT_FN_MAX) == NULL);
	/* MT_FN_LIST's values are 0 .. MT_FN_MAX - 1, each once: every one is named */
	for (unsigned fn = 0; fn < MT_FN_MAX; fn++) {
		CHECK(mt_fn_name(fn) != NULL);
		CHECK_EQ(mt_fn_from_name(mt_fn_name(fn)), fn);
	}
	CHECK_EQ(mt_natural_fn(MT_MALLOC), MT_FN_MALLOC);
	CHECK_EQ(mt_natural_fn(MT_REALLOC), MT_FN_REALLOC);
	CHECK_EQ(mt_natural_fn(MT_ALIGNED_ALLOC), MT_FN_ALIGNED_ALLOC);
	CHECK_EQ(mt_natural_fn(MT_FREE), MT_FN_FREE);
	CHECK_EQ(mt_natural_fn(MT_MMAP), 0);
	CHECK_EQ(mt_natural_fn(0), 0);
}

/*
 * FORMAT.md §8.1 lists every allocator function MT_FN_LIST gives, each
 * value once, by its name: "| 5 | `memalign` |".
 */
static void test_format_md_fn_table(void)
{
	static char buf[1 << 17];
	bool seen[MT_FN_MAX] = { false };
	FILE *f = fopen(MT_SOURCE_DIR "/docs/FORMAT.md", "r");
	char *at, *end;
	unsigned rows = 0;
	size_t n = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	at = strstr(buf, "\n### 8.1");
	end = at ? strstr(at, "\n## 9.") : NULL;
	CHECK(at && end);
	if (!at || !end)
		return;
	*end = 0;
	while ((at = strstr(at + 1, "\n| ")) && at < end) {
		char name[64];
		unsigned fn;

		if (sscanf(at, "\n| %u | `%63[^`]` |", &fn, name) != 2)
			continue;
		rows++;
		CHECK(fn < MT_FN_MAX);
		if (fn >= MT_FN_MAX)
			continue;
		CHECK(!seen[fn]);
		seen[fn] = true;
		CHECK_STR(name, mt_fn_name(fn));
	}
	CHECK_EQ(rows, MT_FN_MAX);
}

int main(void)
{
	RUN(test_format_md_matches_list);
	RUN(test_lookup);
	RUN(test_every_type);
	RUN(test_fn);
	RUN(test_format_md_fn_table);
	HARNESS_EXIT();
}
