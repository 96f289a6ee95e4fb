// SPDX-License-Identifier: MIT
/* mapped.c - one process's own mapped pages; see mapped.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/mapped.h"

static uint64_t range_bytes(const struct map_range *r)
{
	return r->accessible ? r->end - r->start : 0;
}

/* @r's accessible bytes join (@add) or leave the set's count. */
static void credit(struct mapped_set *s, const struct map_range *r, bool add)
{
	uint64_t b = range_bytes(r);

	if (!b)
		return;
	s->bytes = add ? s->bytes + b : s->bytes - b;
	if (s->account)
		s->account(s->ctx, r->stack, b, add);
}

/* The first range whose end lies above @x (s->n if none). */
static uint64_t first_ending_above(const struct mapped_set *s, uint64_t x)
{
	uint64_t lo = 0, hi = s->n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (s->r[mid].end <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Opens a gap of one range at @at.  0 or -ENOMEM. */
static int insert_slot(struct mapped_set *s, uint64_t at)
{
	if (s->n == s->cap) {
		uint64_t cap = s->cap ? s->cap * 2 : 16;
		struct map_range *r = realloc(s->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		s->r = r;
		s->cap = cap;
	}
	memmove(&s->r[at + 1], &s->r[at], (s->n - at) * sizeof(*s->r));
	s->n++;
	return 0;
}

/* Splits the range that holds @x strictly inside it, so a range boundary lies at @x. */
static int split_at(struct mapped_set *s, uint64_t x)
{
	uint64_t i = first_ending_above(s, x);

	if (i == s->n || s->r[i].start >= x)
		return 0;
	if (insert_slot(s, i + 1))
		return -ENOMEM;
	s->r[i + 1] = s->r[i];
	s->r[i].end = x;
	s->r[i + 1].start = x;
	return 0;
}

/* Ranges [*lo, *hi) of the set lie in [start, end), whose ends are boundaries. */
static int bound(struct mapped_set *s, uint64_t start, uint64_t end, uint64_t *lo, uint64_t *hi)
{
	if (split_at(s, start) || split_at(s, end))
		return -ENOMEM;
	*lo = first_ending_above(s, start);
	*hi = *lo;
	while (*hi < s->n && s->r[*hi].end <= end)
		(*hi)++;
	return 0;
}

int mapped_cut(struct mapped_set *s, uint64_t start, uint64_t end)
{
	uint64_t lo, hi;

	if (start >= end || !s->n)
		return 0;
	if (bound(s, start, end, &lo, &hi))
		return -ENOMEM;
	for (uint64_t i = lo; i < hi; i++)
		credit(s, &s->r[i], false);
	memmove(&s->r[lo], &s->r[hi], (s->n - hi) * sizeof(*s->r));
	s->n -= hi - lo;
	return 0;
}

int mapped_add(struct mapped_set *s, uint64_t start, uint64_t end, bool accessible, uint64_t stack)
{
	uint64_t at;

	if (start >= end)
		return 0;
	if (mapped_cut(s, start, end))
		return -ENOMEM;
	at = first_ending_above(s, start);
	if (insert_slot(s, at))
		return -ENOMEM;
	s->r[at] = (struct map_range){ start, end, stack, accessible };
	credit(s, &s->r[at], true);
	return 0;
}

int mapped_protect(struct mapped_set *s, uint64_t start, uint64_t end, bool accessible)
{
	uint64_t lo, hi;

	if (start >= end || !s->n)
		return 0;
	if (bound(s, start, end, &lo, &hi))
		return -ENOMEM;
	for (uint64_t i = lo; i < hi; i++) {
		credit(s, &s->r[i], false);
		s->r[i].accessible = accessible;
		credit(s, &s->r[i], true);
	}
	return 0;
}

int mapped_move(struct mapped_set *s, uint64_t old, uint64_t old_len, uint64_t new,
		uint64_t new_len, bool keep_old)
{
	uint64_t lo, hi, keep = old_len < new_len ? old_len : new_len, n = 0;
	struct map_range *moved = NULL, tail = { 0 };
	bool grow_owned = false;
	int err = -ENOMEM;

	if (!old_len || !s->n)
		goto cut_new; /* nothing of ours moves (old_len 0: a shared duplicate) */
	if (bound(s, old, old + old_len, &lo, &hi))
		return -ENOMEM;
	if (hi > lo && s->r[hi - 1].end == old + old_len) {
		grow_owned = true;
		tail = s->r[hi - 1];
	}
	moved = malloc((hi - lo + 1) * sizeof(*moved));
	if (!moved)
		return -ENOMEM;
	for (uint64_t i = lo; i < hi; i++) {
		struct map_range m = s->r[i];

		if (m.start >= old + keep)
			break;
		if (m.end > old + keep)
			m.end = old + keep;
		m.start = m.start - old + new;
		m.end = m.end - old + new;
		moved[n++] = m;
	}
	if (!keep_old && mapped_cut(s, old, old + old_len))
		goto out;
cut_new:
	if (mapped_cut(s, new, new + new_len))
		goto out;
	for (uint64_t i = 0; i < n; i++)
		if (mapped_add(s, moved[i].start, moved[i].end, moved[i].accessible,
			       moved[i].stack))
			goto out;
	if (grow_owned && new_len > old_len &&
	    mapped_add(s, new + old_len, new + new_len, tail.accessible, tail.stack))
		goto out;
	err = 0;
out:
	free(moved);
	return err;
}

uint64_t mapped_clear(struct mapped_set *s)
{
	uint64_t bytes = s->bytes;

	for (uint64_t i = 0; i < s->n; i++)
		credit(s, &s->r[i], false);
	s->n = 0;
	return bytes;
}

void mapped_release(struct mapped_set *s)
{
	free(s->r);
	s->r = NULL;
	s->n = s->cap = s->bytes = 0;
}
