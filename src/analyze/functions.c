// SPDX-License-Identifier: MIT
/* functions.c - call sites merged by function; see functions.h. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/functions.h"
#include "analyze/mix64.h"
#include "util/array.h"

/* Allocator entry points and internals, by exact name (after a "__GI_" prefix). */
static const char *const allocator_names[] = {
	"malloc",
	"calloc",
	"realloc",
	"reallocarray",
	"free",
	"cfree",
	"posix_memalign",
	"aligned_alloc",
	"memalign",
	"valloc",
	"pvalloc",
	"__libc_malloc",
	"__libc_calloc",
	"__libc_realloc",
	"__libc_free",
	"__libc_memalign",
	"__libc_valloc",
	"__libc_pvalloc",
	"__posix_memalign",
	"_int_malloc",
	"_int_realloc",
	"_int_memalign",
	"_int_free",
	"sysmalloc",
	"tcache_init",
	"malloc_hook_ini",
	"_mid_memalign",
	"mmap",
	"mmap64",
	"__mmap",
	"__mmap64",
	"munmap",
	"__munmap",
	"mremap",
	"__mremap",
	"brk",
	"__brk",
	"sbrk",
	"__sbrk",
	"__default_morecore",
	"PyObject_Malloc",
	"PyObject_Calloc",
	"PyObject_Realloc",
	"_PyObject_Malloc",
	"_PyObject_Calloc",
	"_PyObject_Realloc",
};

/* ... and by prefix: C++'s operators (demangled or not), Python's allocators. */
static const char *const allocator_prefixes[] = {
	"operator new", "operator delete", "_Znw",	 "_Zna", "PyMem_",
	"_PyMem_",	"pymalloc_",	   "__minimal_", /* ld.so's own malloc, before libc's is relocated */
};

/* Allocators whose every frame is the allocator's, by object basename prefix. */
static const char *const allocator_objects[] = { "libjemalloc", "libtcmalloc", "libmimalloc" };

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

bool frame_is_allocator(const struct site_frame *f)
{
	const char *name = f->function;

	if (f->obj)
		for (size_t i = 0; i < sizeof(allocator_objects) / sizeof(*allocator_objects); i++)
			if (has_prefix(path_base(f->obj->path), allocator_objects[i]))
				return true;
	if (!name)
		return false;
	if (has_prefix(name, "__GI_"))
		name += 5;
	for (size_t i = 0; i < sizeof(allocator_names) / sizeof(*allocator_names); i++)
		if (!strcmp(name, allocator_names[i]))
			return true;
	for (size_t i = 0; i < sizeof(allocator_prefixes) / sizeof(*allocator_prefixes); i++)
		if (has_prefix(name, allocator_prefixes[i]))
			return true;
	return false;
}

/* ---- the two indexes ---------------------------------------------------- */

struct fn_key {
	const char *name; /* interned: equal names are equal pointers */
	const struct mt_object *obj;
	uint64_t fn; /* callers only: the function's index */
};

static uint64_t key_hash(const char *name, const struct mt_object *obj, uint64_t fn)
{
	return mix64((uint64_t)(uintptr_t)name ^ mix64((uint64_t)(uintptr_t)obj ^ mix64(fn)));
}

static bool fn_has(const void *ctx, uint64_t pos, const void *key)
{
	const struct fn_entry *e = &((const struct fn_table *)ctx)->fns[pos];
	const struct fn_key *k = key;

	return e->name == k->name && e->obj == k->obj;
}

static uint64_t fn_hash(const void *ctx, uint64_t pos)
{
	const struct fn_entry *e = &((const struct fn_table *)ctx)->fns[pos];

	return key_hash(e->name, e->obj, 0);
}

static bool caller_has(const void *ctx, uint64_t pos, const void *key)
{
	const struct fn_caller *c = &((const struct fn_table *)ctx)->callers[pos];
	const struct fn_key *k = key;

	return c->name == k->name && c->obj == k->obj && c->fn == k->fn;
}

static uint64_t caller_hash(const void *ctx, uint64_t pos)
{
	const struct fn_caller *c = &((const struct fn_table *)ctx)->callers[pos];

	return key_hash(c->name, c->obj, c->fn + 1);
}

/* ---- sums --------------------------------------------------------------- */

/* Whether site @s outweighs @shown (more peak bytes, then allocations, then memory). */
static bool heavier(const struct site *s, const struct site *shown)
{
	if (s->peak_bytes != shown->peak_bytes)
		return s->peak_bytes > shown->peak_bytes;
	if (s->allocs != shown->allocs)
		return s->allocs > shown->allocs;
	return s->mem_peak > shown->mem_peak;
}

/* The function (@name, @obj), added when new; its index, or -ENOMEM. */
static int64_t fn_get(struct fn_table *t, const char *name, const struct mt_object *obj,
		      const char *file)
{
	struct fn_key k = { name, obj, 0 };
	uint64_t h = key_hash(name, obj, 0), at = hash_index_find(&t->fn_index, h, fn_has, t, &k);

	if (at)
		return (int64_t)at - 1;
	if (hash_index_reserve(&t->fn_index, 64, fn_hash, t) ||
	    array_room_for_one((void **)&t->fns, &t->fns_cap, t->nfns, sizeof(*t->fns)))
		return -ENOMEM;
	t->fns[t->nfns] = (struct fn_entry){ .name = name, .obj = obj, .file = file };
	hash_index_add(&t->fn_index, h, t->nfns);
	return (int64_t)t->nfns++;
}

/* Adds @s to the caller (@name, @obj) of function @fn. */
static int caller_add(struct fn_table *t, uint64_t fn, const char *name,
		      const struct mt_object *obj, const struct site *s)
{
	struct fn_key k = { name, obj, fn };
	uint64_t h = key_hash(name, obj, fn + 1);
	uint64_t at = hash_index_find(&t->caller_index, h, caller_has, t, &k);
	bool first = !at;

	if (!at) {
		if (hash_index_reserve(&t->caller_index, 64, caller_hash, t) ||
		    array_room_for_one((void **)&t->callers, &t->callers_cap, t->ncallers,
				       sizeof(*t->callers)))
			return -ENOMEM;
		t->callers[t->ncallers] = (struct fn_caller){ .name = name, .obj = obj, .fn = fn };
		hash_index_add(&t->caller_index, h, t->ncallers);
		at = ++t->ncallers;
	}
	site_cost_add(&t->callers[at - 1].cost, s, first);
	return 0;
}

/* The interned name of frame @f (NULL: -ENOMEM). */
static const char *frame_name(struct fn_table *t, const struct site_frame *f)
{
	char buf[128];

	return intern(&t->names, site_frame_name(f, buf, sizeof(buf)));
}

/* Folds site @s, whose stack expanded to @f[0..@n), into its function and caller. */
static int add_site(struct fn_table *t, const struct site *s, const struct site_frame *f, int n)
{
	const char *name, *cname = intern(&t->names, FN_NO_CALLER), *file = NULL;
	const struct mt_object *obj = NULL, *cobj = NULL;
	struct fn_entry *e;
	int k = 0;
	int64_t fn;

	while (k + 1 < n && frame_is_allocator(&f[k]))
		k++;
	if (n > 0) {
		name = frame_name(t, &f[k]);
		obj = f[k].obj;
		file = f[k].file;
		if (k + 1 < n) {
			cname = frame_name(t, &f[k + 1]);
			cobj = f[k + 1].obj;
		}
	} else {
		name = intern(&t->names, FN_NO_STACK);
	}
	if (!name || !cname)
		return -ENOMEM;
	fn = fn_get(t, name, obj, file);
	if (fn < 0)
		return -ENOMEM;
	e = &t->fns[fn];
	if (!e->nsites++ || heavier(s, e->heaviest))
		e->heaviest = s;
	site_cost_add(&e->cost, s, false);
	e->cost.stack = e->heaviest->stack;
	return caller_add(t, (uint64_t)fn, cname, cobj, s);
}

/* qsort order of callers: by function, then name, then object path. */
static int by_fn(const void *pa, const void *pb)
{
	const struct fn_caller *a = pa, *b = pb;
	int c;

	if (a->fn != b->fn)
		return a->fn < b->fn ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return strcmp(a->obj ? a->obj->path : "", b->obj ? b->obj->path : "");
}

int fn_table_build(struct fn_table *t, const struct analysis *a, const struct stack_table *st,
		   struct symbolizer *sym)
{
	struct site_frame *f = calloc(SITE_MAX_FRAMES, sizeof(*f));
	int err = 0;

	memset(t, 0, sizeof(*t));
	if (!f || intern_init(&t->names)) {
		free(f);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < a->sites.nsites && !err; i++) {
		const struct site *s = &a->sites.sites[i];
		int n = callsite_expand(sym, st, s->stack, f, SITE_MAX_FRAMES);

		err = n < 0 ? n : add_site(t, s, f, n);
	}
	free(f);
	if (err)
		return err;
	/* the callers of each function side by side; the caller index is done with */
	qsort(t->callers, t->ncallers, sizeof(*t->callers), by_fn);
	hash_index_release(&t->caller_index);
	for (uint64_t i = 0; i < t->ncallers; i++) {
		struct fn_entry *e = &t->fns[t->callers[i].fn];

		if (!e->ncallers++)
			e->callers = &t->callers[i];
	}
	return 0;
}

/* qsort_r order: the larger value of the metric first, then name, then object. */
static int fn_by_value(const void *pa, const void *pb, void *ctx)
{
	const struct fn_entry *a = *(const struct fn_entry *const *)pa,
			      *b = *(const struct fn_entry *const *)pb;
	enum site_metric m = *(const enum site_metric *)ctx;
	uint64_t va = site_value(&a->cost, m), vb = site_value(&b->cost, m);
	int c;

	if (va != vb)
		return va > vb ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return strcmp(a->obj ? a->obj->path : "", b->obj ? b->obj->path : "");
}

static int caller_by_value(const void *pa, const void *pb, void *ctx)
{
	const struct fn_caller *a = *(const struct fn_caller *const *)pa,
			       *b = *(const struct fn_caller *const *)pb;
	enum site_metric m = *(const enum site_metric *)ctx;
	uint64_t va = site_value(&a->cost, m), vb = site_value(&b->cost, m);

	if (va != vb)
		return va > vb ? -1 : 1;
	return by_fn(a, b);
}

/*
 * The elements of @base (@count of @size bytes) with a non-zero @m (read
 * through @cost_at), sorted by @cmp, at most @max: see fn_ranked().
 */
static const void **ranked(const void *base, uint64_t count, size_t size,
			   const struct site *(*cost_at)(const void *), enum site_metric m,
			   int (*cmp)(const void *, const void *, void *), size_t max, size_t *n)
{
	const void **v;
	size_t k = 0;

	*n = 0;
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return NULL;
	for (uint64_t i = 0; i < count; i++) {
		const void *e = (const char *)base + i * size;

		if (site_value(cost_at(e), m))
			v[k++] = e;
	}
	return array_rank((const void **)v, k, max, n, cmp, &m);
}

static const struct site *fn_cost(const void *e)
{
	return &((const struct fn_entry *)e)->cost;
}

static const struct site *caller_cost(const void *c)
{
	return &((const struct fn_caller *)c)->cost;
}

const struct fn_entry **fn_ranked(const struct fn_table *t, enum site_metric m, size_t max,
				  size_t *n)
{
	return (const struct fn_entry **)ranked(t->fns, t->nfns, sizeof(*t->fns), fn_cost, m,
						fn_by_value, max, n);
}

const struct fn_caller **fn_callers_ranked(const struct fn_entry *e, enum site_metric m, size_t max,
					   size_t *n)
{
	return (const struct fn_caller **)ranked(e->callers, e->ncallers, sizeof(*e->callers),
						 caller_cost, m, caller_by_value, max, n);
}

const struct fn_entry *fn_find(const struct fn_table *t, const char *name)
{
	for (uint64_t i = 0; i < t->nfns; i++)
		if (!strcmp(t->fns[i].name, name))
			return &t->fns[i];
	return NULL;
}

void fn_table_release(struct fn_table *t)
{
	free(t->fns);
	free(t->callers);
	hash_index_release(&t->fn_index);
	hash_index_release(&t->caller_index);
	intern_release(&t->names);
	memset(t, 0, sizeof(*t));
}
