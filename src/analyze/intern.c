// SPDX-License-Identifier: MIT
/* intern.c - a set of strings stored once; see intern.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "fnv1a.h"
#include "analyze/intern.h"

/* Sized for the first 512 strings: symbolization interns hundreds at once. */
int intern_init(struct intern *t)
{
	memset(t, 0, sizeof(*t));
	return hash_index_reserve(&t->index, 1024, NULL, NULL);
}

static bool string_is(const void *ctx, uint64_t pos, const void *s)
{
	return !strcmp(((const struct intern *)ctx)->strings[pos], s);
}

static uint64_t string_hash(const void *ctx, uint64_t pos)
{
	return fnv1a_str(((const struct intern *)ctx)->strings[pos]);
}

const char *intern(struct intern *t, const char *s)
{
	uint64_t h = fnv1a_str(s), at = hash_index_find(&t->index, h, string_is, t, s);
	char *copy;

	if (at)
		return t->strings[at - 1];
	if (hash_index_reserve(&t->index, 1024, string_hash, t))
		return NULL;
	if (t->n == t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 256;
		char **grown = realloc(t->strings, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		t->strings = grown;
		t->cap = cap;
	}
	copy = strdup(s);
	if (!copy)
		return NULL;
	t->strings[t->n] = copy;
	hash_index_add(&t->index, h, t->n++);
	return copy;
}

void intern_release(struct intern *t)
{
	for (uint64_t i = 0; i < t->n; i++)
		free(t->strings[i]);
	free(t->strings);
	hash_index_release(&t->index);
	memset(t, 0, sizeof(*t));
}
