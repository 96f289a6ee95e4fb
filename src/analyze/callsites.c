// SPDX-License-Identifier: MIT
/* callsites.c - ranked, symbolized call sites; see callsites.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/callsites.h"
#include "analyze/pycode.h"
#include "util/array.h"

static const char *const metric_names[SITE_NMETRICS] = {
	"peak", "allocations", "allocated", "leaked", "memory", "temporary", "live_at_end",
};

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
	case SITE_TEMPORARY: return s->temporary;
	case SITE_LIVE_END: return s->live_end_bytes;
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
	return array_rank((const void **)v, k, max, n, by_value, &m);
}

/* Whether @r, a native frame's symbols, is CPython's eval loop (its own function, not an inlined one). */
static bool is_eval_loop(const struct sym_result *r)
{
	const char *fn = r->nframes ? r->frames[r->nframes - 1].function : NULL;

	return fn && !strcmp(fn, "_PyEval_EvalFrameDefault");
}

/* Copies the Python frames from *@py up to the next eval-loop entry (FORMAT.md §8.3) to @out at @n. */
static uint32_t put_group(const struct mt_stack *s, uint32_t *py, struct mt_frame *out, uint32_t n)
{
	while (*py < s->nframes && n < MT_STACK_MAX) {
		const struct mt_frame *f = &s->frames[(*py)++];

		out[n++] = *f;
		if (f->object & MT_PY_ENTRY)
			break;
	}
	return n;
}

int callsite_order(struct symbolizer *sym, const struct stack_table *st, const struct mt_stack *s,
		   struct mt_frame *out)
{
	uint32_t nat = 0, py, n = 0;

	while (nat < s->nframes && !(s->frames[nat].object & MT_PY_FRAME))
		nat++;
	py = nat;
	for (uint32_t i = 0; i < nat; i++) {
		const struct mt_frame *f = &s->frames[i];
		const struct mt_object *obj = f->object ? stack_table_object(st, f->object) : NULL;
		struct sym_result r;

		if (py < s->nframes) {
			if (symbolizer__lookup(sym, obj, f->addr ? f->addr - 1 : 0, &r))
				return -ENOMEM;
			if (is_eval_loop(&r)) {
				n = put_group(s, &py, out, n);
				continue;
			}
		}
		out[n++] = *f;
	}
	/* the eval loops' native frames beyond a truncated native stack */
	while (py < s->nframes)
		n = put_group(s, &py, out, n);
	return (int)n;
}

struct site_frame callsite_python_frame(const struct stack_table *st, const struct mt_frame *f)
{
	const struct mt_pycode *c = stack_table_code(st, f->addr);

	if (!c)
		return (struct site_frame){ .python = true, .addr = f->addr };
	return (struct site_frame){
		.function = c->qualname[0] ? c->qualname : c->name,
		.file = c->file,
		.line = py_line(c, f->object & MT_PY_OFFSET_MASK),
		.python = true,
		.addr = f->addr,
	};
}

int callsite_expand(struct symbolizer *sym, const struct stack_table *st, uint64_t id,
		    struct site_frame *out, size_t max)
{
	const struct mt_stack *s = stack_table_get(st, id);
	struct mt_frame order[MT_STACK_MAX];
	int nf = s ? callsite_order(sym, st, s, order) : 0;
	size_t n = 0;

	if (nf < 0)
		return nf;
	for (int i = 0; i < nf && n < max; i++) {
		const struct mt_frame *f = &order[i];
		const struct mt_object *obj;
		struct sym_result r;

		if (f->object & MT_PY_FRAME) {
			out[n++] = callsite_python_frame(st, f);
			continue;
		}
		obj = f->object ? stack_table_object(st, f->object) : NULL;
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

const char *stack_short_id(uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%08llx", (unsigned long long)(id & 0xffffffffu));
	return buf;
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
	if (f->python)
		return "<python code not recorded>";
	if (f->obj)
		snprintf(buf, len, "%s+0x%llx", path_base(f->obj->path),
			 (unsigned long long)f->addr);
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)f->addr);
	return buf;
}

/* The outermost native frame of @s (Python frames follow the native ones). */
static const struct mt_frame *last_native(const struct mt_stack *s)
{
	uint32_t n = s->nframes;

	while (n > 1 && s->frames[n - 1].object & MT_PY_FRAME)
		n--;
	return &s->frames[n - 1];
}

const char *site_frame_label(const struct site_frame *f, char *buf, size_t len)
{
	if (!f->python || !f->function)
		return site_frame_name(f, buf, len);
	snprintf(buf, len, "%s:%s:%u", path_base(f->file), f->function, f->line);
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
		o = stack_table_object(st, last_native(s)->object);
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
