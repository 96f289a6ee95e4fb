// SPDX-License-Identifier: MIT
/* intern.c - a set of strings stored once; see intern.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "fnv1a.h"
#include "analyze/intern.h"

int intern_init(struct intern *t)
{
	t->n = 0;
	t->nslots = 1024;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	return t->slots ? 0 : -ENOMEM;
}

static char **slot_for(char **slots, uint64_t nslots, const char *s)
{
	uint64_t mask = nslots - 1;

	for (uint64_t i = fnv1a_str(s) & mask;; i = (i + 1) & mask)
		if (!slots[i] || !strcmp(slots[i], s))
			return &slots[i];
}

static int grow(struct intern *t)
{
	uint64_t n = t->nslots * 2;
	char **slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->nslots; i++)
		if (t->slots[i])
			*slot_for(slots, n, t->slots[i]) = t->slots[i];
	free(t->slots);
	t->slots = slots;
	t->nslots = n;
	return 0;
}

const char *intern(struct intern *t, const char *s)
{
	char **slot;

	if ((t->n + 1) * 2 > t->nslots && grow(t))
		return NULL;
	slot = slot_for(t->slots, t->nslots, s);
	if (!*slot) {
		*slot = strdup(s);
		if (!*slot)
			return NULL;
		t->n++;
	}
	return *slot;
}

void intern_release(struct intern *t)
{
	for (uint64_t i = 0; t->slots && i < t->nslots; i++)
		free(t->slots[i]);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
