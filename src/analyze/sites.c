// SPDX-License-Identifier: MIT
/* sites.c - per-call-site heap statistics; see sites.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/sites.h"
#include "analyze/mix64.h"

void site_table_init(struct site_table *t)
{
	memset(t, 0, sizeof(*t));
}

static uint64_t *index_slot(const struct site_table *t, uint64_t stack)
{
	uint64_t mask = t->index_slots - 1;

	for (uint64_t i = mix64(stack) & mask;; i = (i + 1) & mask) {
		uint64_t *s = &t->index[i];

		if (!*s || t->sites[*s - 1].stack == stack)
			return s;
	}
}

static int index_grow(struct site_table *t)
{
	uint64_t *old = t->index, n = t->index_slots ? t->index_slots * 2 : 64;

	t->index = calloc(n, sizeof(*t->index));
	if (!t->index) {
		t->index = old;
		return -ENOMEM;
	}
	free(old);
	t->index_slots = n;
	for (uint64_t i = 0; i < t->nsites; i++)
		*index_slot(t, t->sites[i].stack) = i + 1;
	return 0;
}

struct site *site_get(struct site_table *t, uint64_t stack)
{
	struct site *s;
	uint64_t *slot;

	/* heap records come in runs from one site (a loop): skip the hash for them */
	if (t->last && t->sites[t->last - 1].stack == stack)
		return &t->sites[t->last - 1];
	if (t->index_slots) {
		slot = index_slot(t, stack);
		if (*slot) {
			t->last = *slot;
			return &t->sites[*slot - 1];
		}
	}
	if ((t->nsites + 1) * 2 > t->index_slots && index_grow(t))
		return NULL;
	if (t->nsites == t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 64;

		s = realloc(t->sites, cap * sizeof(*s));
		if (!s)
			return NULL;
		t->sites = s;
		t->cap = cap;
	}
	s = &t->sites[t->nsites];
	memset(s, 0, sizeof(*s));
	s->stack = stack;
	s->epoch = t->epoch;
	*index_slot(t, stack) = ++t->nsites;
	t->last = t->nsites;
	return s;
}

void site_table_settle(struct site_table *t)
{
	for (uint64_t i = 0; i < t->nsites; i++)
		site_live_touch(t, &t->sites[i]);
}

void site_table_release(struct site_table *t)
{
	free(t->sites);
	free(t->index);
	memset(t, 0, sizeof(*t));
}
