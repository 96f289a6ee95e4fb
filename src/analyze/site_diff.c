// SPDX-License-Identifier: MIT
/* site_diff.c - two runs' call sites side by side; see site_diff.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/site_diff.h"
#include "fnv1a.h"
#include "util/array.h"

#define KEY_MAX ((size_t)64 * 1024) /* a stack's key: longer ones are cut (and may then pair) */
#define LABEL_FRAMES 3		    /* frames a stack's name shows, innermost first */

int site_diff_init(struct site_diff *d)
{
	memset(d, 0, sizeof(*d));
	return intern_init(&d->names);
}

/* Keys are interned: the same key is the same pointer. */
static bool row_has(const void *ctx, uint64_t pos, const void *key)
{
	return ((const struct site_diff *)ctx)->rows[pos].key == key;
}

static uint64_t row_hash(const void *ctx, uint64_t pos)
{
	return fnv1a_str(((const struct site_diff *)ctx)->rows[pos].key);
}

/*
 * Adds @s (of stack @stack) to side @side of the row @key, added with
 * @name and @object when new (all three copied).  0 or -ENOMEM.
 */
static int row_add(struct site_diff *d, enum site_diff_side side, const char *key, const char *name,
		   const char *object, const struct site *s)
{
	const char *k = intern(&d->names, key);
	uint64_t h = fnv1a_str(key), at;
	struct site_diff_row *r;

	if (!k)
		return -ENOMEM;
	at = hash_index_find(&d->index, h, row_has, d, k);
	if (!at) {
		if (hash_index_reserve(&d->index, 64, row_hash, d) ||
		    array_room_for_one((void **)&d->rows, &d->cap, d->nrows, sizeof(*d->rows)))
			return -ENOMEM;
		r = &d->rows[d->nrows];
		memset(r, 0, sizeof(*r));
		r->key = k;
		r->name = intern(&d->names, name);
		r->object = object ? intern(&d->names, object) : NULL;
		if (!r->name || (object && !r->object))
			return -ENOMEM;
		hash_index_add(&d->index, h, d->nrows++);
		at = d->nrows;
	}
	r = &d->rows[at - 1];
	site_cost_add(&r->cost[side], s, !r->in[side]);
	r->stack[side] = r->cost[side].stack;
	r->in[side] = true;
	return 0;
}

int site_diff_add_functions(struct site_diff *d, enum site_diff_side side, const struct fn_table *t)
{
	char key[512];

	for (uint64_t i = 0; i < t->nfns; i++) {
		const struct fn_entry *e = &t->fns[i];
		const char *obj = e->obj ? path_base(e->obj->path) : NULL;
		int err;

		snprintf(key, sizeof(key), "%s\x1f%s", e->name, obj ? obj : "");
		err = row_add(d, side, key, e->name, obj, &e->cost);
		if (err)
			return err;
	}
	return 0;
}

/* Appends frame @f to @key (function, object, line) and, the first few, to @label. */
static void stack_text(const struct site_frame *f, int i, char *key, size_t *kn, char *label,
		       size_t *ln, size_t lsize)
{
	char name[128];
	const char *fn = site_frame_name(f, name, sizeof(name));

	if (*kn < KEY_MAX)
		*kn += snprintf(key + *kn, KEY_MAX - *kn, "%s\x1f%s\x1f%u\x1e", fn,
				f->obj ? path_base(f->obj->path) : "", f->line);
	if (i < LABEL_FRAMES && *ln < lsize)
		*ln += snprintf(label + *ln, lsize - *ln, "%s%s", i ? " < " : "", fn);
	else if (i == LABEL_FRAMES && *ln < lsize)
		*ln += snprintf(label + *ln, lsize - *ln, " < ...");
}

int site_diff_add_stacks(struct site_diff *d, enum site_diff_side side, const struct analysis *a,
			 const struct stack_table *st, struct symbolizer *sym)
{
	struct site_frame *f = calloc(SITE_MAX_FRAMES, sizeof(*f));
	char *key = malloc(KEY_MAX), label[512];
	int err = -ENOMEM;

	if (!f || !key)
		goto out;
	for (uint64_t i = 0; i < a->sites.nsites; i++) {
		const struct site *s = &a->sites.sites[i];
		int n = callsite_expand(sym, st, s->stack, f, SITE_MAX_FRAMES);
		size_t kn = 0, ln = 0;

		if (n < 0)
			goto out;
		key[0] = label[0] = 0;
		for (int j = 0; j < n; j++)
			stack_text(&f[j], j, key, &kn, label, &ln, sizeof(label));
		if (!n) /* no stack, or its record lost: one row for all of them */
			snprintf(label, sizeof(label), "%s", FN_NO_STACK);
		err = row_add(d, side, n ? key : FN_NO_STACK, label,
			      n && f[0].obj ? path_base(f[0].obj->path) : NULL, s);
		if (err)
			goto out;
	}
	err = 0;
out:
	free(key);
	free(f);
	return err;
}

void site_diff_value(const struct site_diff_row *r, enum site_metric m, struct diff_value *v)
{
	diff_value_set(v, site_value(&r->cost[SITE_DIFF_BASE], m),
		       site_value(&r->cost[SITE_DIFF_NEW], m));
	v->known = true;
}

static uint64_t magnitude(int64_t c)
{
	return c < 0 ? 0 - (uint64_t)c : (uint64_t)c;
}

/* qsort_r order: the larger change first, then the name, then the object. */
static int by_change(const void *pa, const void *pb, void *ctx)
{
	const struct site_diff_row *a = *(const struct site_diff_row *const *)pa,
				   *b = *(const struct site_diff_row *const *)pb;
	enum site_metric m = *(const enum site_metric *)ctx;
	struct diff_value va, vb;
	int c;

	site_diff_value(a, m, &va);
	site_diff_value(b, m, &vb);
	if (magnitude(va.change) != magnitude(vb.change))
		return magnitude(va.change) > magnitude(vb.change) ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return strcmp(a->object ? a->object : "", b->object ? b->object : "");
}

const struct site_diff_row **site_diff_ranked(const struct site_diff *d, enum site_metric m,
					      size_t max, size_t *n)
{
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	const struct site_diff_row **v = calloc(d->nrows + 1, sizeof(*v));
	size_t k = 0;

	*n = 0;
	if (!v) {
		errno = ENOMEM;
		return NULL;
	}
	for (uint64_t i = 0; i < d->nrows; i++)
		if (site_value(&d->rows[i].cost[SITE_DIFF_BASE], m) !=
		    site_value(&d->rows[i].cost[SITE_DIFF_NEW], m))
			v[k++] = &d->rows[i];
	return array_rank((const void **)v, k, max, n, by_change, &m);
}

void site_diff_release(struct site_diff *d)
{
	free(d->rows);
	hash_index_release(&d->index);
	intern_release(&d->names);
	memset(d, 0, sizeof(*d));
}
