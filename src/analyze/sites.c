// SPDX-License-Identifier: MIT
/* sites.c - per-call-site heap statistics; see sites.h. */
#include <stdlib.h>
#include <string.h>
#include "analyze/sites.h"
#include "analyze/mix64.h"

void site_table_init(struct site_table *t)
{
	memset(t, 0, sizeof(*t));
}

static bool site_has(const void *ctx, uint64_t pos, const void *stack)
{
	const struct site_table *t = ctx;

	return t->sites[pos].stack == *(const uint64_t *)stack;
}

static uint64_t site_hash(const void *ctx, uint64_t pos)
{
	const struct site_table *t = ctx;

	return mix64(t->sites[pos].stack);
}

struct site *site_get(struct site_table *t, uint64_t stack)
{
	struct site *s;
	uint64_t at;

	/* heap records come in runs from one site (a loop): skip the hash for them */
	if (t->last && t->sites[t->last - 1].stack == stack)
		return &t->sites[t->last - 1];
	at = hash_index_find(&t->index, mix64(stack), site_has, t, &stack);
	if (at) {
		t->last = at;
		return &t->sites[at - 1];
	}
	if (hash_index_reserve(&t->index, 64, site_hash, t))
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
	s->mem_epoch = t->mem_epoch;
	hash_index_add(&t->index, mix64(stack), t->nsites++);
	t->last = t->nsites;
	return s;
}

void site_table_settle(struct site_table *t)
{
	for (uint64_t i = 0; i < t->nsites; i++) {
		site_live_touch(t, &t->sites[i]);
		site_mem_touch(t, &t->sites[i]);
	}
}

void site_table_release(struct site_table *t)
{
	free(t->sites);
	hash_index_release(&t->index);
	memset(t, 0, sizeof(*t));
}

/* Adds site @s's numbers into @sum (the first site added names sum->stack). */
void site_cost_add(struct site *sum, const struct site *s, bool first)
{
	if (first)
		sum->stack = s->stack;
	sum->allocs = sat_add(sum->allocs, s->allocs);
	sum->allocated_bytes = sat_add(sum->allocated_bytes, s->allocated_bytes);
	sum->peak_bytes = sat_add(sum->peak_bytes, s->peak_bytes);
	sum->leaked_count = sat_add(sum->leaked_count, s->leaked_count);
	sum->leaked_bytes = sat_add(sum->leaked_bytes, s->leaked_bytes);
	if (s->leaked_age_max_ns > sum->leaked_age_max_ns)
		sum->leaked_age_max_ns = s->leaked_age_max_ns;
	sum->leaked_age_sum_ns = sat_add(sum->leaked_age_sum_ns, s->leaked_age_sum_ns);
	sum->mem_peak = sat_add(sum->mem_peak, s->mem_peak);
	sum->temporary = sat_add(sum->temporary, s->temporary);
	sum->live_end_count = sat_add(sum->live_end_count, s->live_end_count);
	sum->live_end_bytes = sat_add(sum->live_end_bytes, s->live_end_bytes);
	if (s->live_end_age_max_ns > sum->live_end_age_max_ns)
		sum->live_end_age_max_ns = s->live_end_age_max_ns;
	sum->live_end_age_sum_ns = sat_add(sum->live_end_age_sum_ns, s->live_end_age_sum_ns);
}
