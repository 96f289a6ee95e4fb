// SPDX-License-Identifier: MIT
/* callsites.c - ranked, symbolized call sites; see callsites.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/callsites.h"

static const char *const metric_names[SITE_NMETRICS] = { "peak", "allocations", "allocated",
							 "leaked", "memory" };

const char *site_metric_name(enum site_metric m)
{
	return m < SITE_NMETRICS ? metric_names[m] : "?";
}

int site_metric_parse(const char *name, enum site_metric *m)
{
	for (int i = 0; i < SITE_NMETRICS; i++)
		if (!strcmp(name, metric_names[i])) {
			*m = i;
			return 0;
		}
	return -EINVAL;
}

uint64_t site_value(const struct site *s, enum site_metric m)
{
	switch (m) {
	case SITE_PEAK: return s->peak_bytes;
	case SITE_ALLOCATIONS: return s->allocs;
	case SITE_ALLOCATED: return s->allocated_bytes;
	case SITE_LEAKED: return s->leaked_bytes;
	case SITE_MEMORY: return s->mem_peak;
	default: return 0;
	}
}

/* qsort_r order: the larger value of the metric at @ctx first, then the lower stack id. */
static int by_value(const void *pa, const void *pb, void *ctx)
{
	const struct site *a = *(const struct site *const *)pa,
			  *b = *(const struct site *const *)pb;
	enum site_metric m = *(const enum site_metric *)ctx;
	uint64_t va = site_value(a, m), vb = site_value(b, m);

	if (va != vb)
		return va > vb ? -1 : 1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

const struct site **callsites_ranked(const struct analysis *a, enum site_metric m, size_t max,
				     size_t *n)
{
	const struct site **v;
	size_t k = 0;

	*n = 0;
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	v = calloc(a->sites.nsites ? a->sites.nsites : 1, sizeof(*v));
	if (!v)
		return NULL;
	for (uint64_t i = 0; i < a->sites.nsites; i++)
		if (site_value(&a->sites.sites[i], m))
			v[k++] = &a->sites.sites[i];
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	qsort_r(v, k, sizeof(*v), by_value, &m);
	if (max && k > max)
		k = max;
	if (!k) {
		free(v);
		errno = 0;
		return NULL;
	}
	*n = k;
	return v;
}

int callsite_expand(struct symbolizer *sym, const struct stack_table *st, uint64_t id,
		    struct site_frame *out, size_t max)
{
	const struct mt_stack *s = stack_table_get(st, id);
	size_t n = 0;

	for (uint32_t i = 0; s && i < s->nframes; i++) {
		const struct mt_frame *f = &s->frames[i];
		const struct mt_object *obj = f->object ? stack_table_object(st, f->object) : NULL;
		struct sym_result r;

		/* a return address: the call is the instruction before it */
		if (symbolizer__lookup(sym, obj, f->addr ? f->addr - 1 : 0, &r))
			return -ENOMEM;
		for (uint32_t k = 0; k < r.nframes && n < max; k++)
			out[n++] = (struct site_frame){
				.function = r.frames[k].function,
				.file = r.frames[k].file,
				.line = r.frames[k].line,
				.inlined = k + 1 < r.nframes,
				.obj = obj,
				.addr = f->addr,
			};
	}
	return (int)n;
}

const char *path_base(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	return b ? b + 1 : path ? path : "";
}

const char *site_frame_name(const struct site_frame *f, char *buf, size_t len)
{
	if (f->function)
		return f->function;
	if (f->obj)
		snprintf(buf, len, "%s+0x%llx", path_base(f->obj->path),
			 (unsigned long long)f->addr);
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)f->addr);
	return buf;
}

static int by_stacks(const void *pa, const void *pb)
{
	const struct truncated_by_object *a = pa, *b = pb;

	if (a->stacks != b->stacks)
		return a->stacks > b->stacks ? -1 : 1;
	return a->object < b->object ? -1 : a->object > b->object;
}

struct truncated_by_object *callsites_truncated(const struct stack_table *st, size_t *n)
{
	struct truncated_by_object *v = NULL;
	size_t k = 0;

	*n = 0;
	if (!st->truncated)
		return NULL;
	/* one slot per object id, and slot 0 for no object */
	v = calloc(st->nobjects + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (uint64_t i = 0; i < st->nstacks; i++) {
		const struct mt_stack *s = &st->stacks[i];
		const struct mt_object *o;
		uint32_t slot;

		if (!s->truncated)
			continue;
		o = stack_table_object(st, s->frames[s->nframes - 1].object);
		slot = o ? (uint32_t)(o - st->objects) + 1 : 0;
		v[slot].object = o ? o->id : 0;
		v[slot].stacks++;
	}
	for (uint32_t i = 0; i <= st->nobjects; i++)
		if (v[i].stacks)
			v[k++] = v[i];
	qsort(v, k, sizeof(*v), by_stacks);
	*n = k;
	return v;
}
