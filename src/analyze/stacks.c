// SPDX-License-Identifier: MIT
/* stacks.c - the in-memory stack, object and mapping table; see stacks.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/stacks.h"
#include "analyze/mix64.h"

void stack_table_init(struct stack_table *t)
{
	memset(t, 0, sizeof(*t));
}

/*
 * The stack and the object index (ids are any u64 or u32 in a crafted
 * file: a linear search for each made reading one quadratic).
 */
static bool stack_has(const void *ctx, uint64_t pos, const void *id)
{
	const struct stack_table *t = ctx;

	return t->stacks[pos].id == *(const uint64_t *)id;
}

static uint64_t stack_hash(const void *ctx, uint64_t pos)
{
	const struct stack_table *t = ctx;

	return mix64(t->stacks[pos].id);
}

static bool object_has(const void *ctx, uint64_t pos, const void *id)
{
	const struct stack_table *t = ctx;

	return t->objects[pos].id == *(const uint64_t *)id;
}

static uint64_t object_hash(const void *ctx, uint64_t pos)
{
	const struct stack_table *t = ctx;

	return mix64(t->objects[pos].id);
}

/* Enters element @pos (hash @hash) in @x.  0 or -ENOMEM. */
static int index_enter(struct hash_index *x, hash_index_hash_fn *hash_of, const void *ctx,
		       uint64_t hash, uint64_t pos)
{
	if (hash_index_reserve(x, 256, hash_of, ctx))
		return -ENOMEM;
	hash_index_add(x, hash, pos);
	return 0;
}

const struct mt_stack *stack_table_get(const struct stack_table *t, uint64_t id)
{
	uint64_t at = id ? hash_index_find(&t->stack_index, mix64(id), stack_has, t, &id) : 0;

	return at ? &t->stacks[at - 1] : NULL;
}

/* Makes room for one more element of @size in *@arr (cap doubles). */
static int reserve(void **arr, uint64_t n, uint64_t *cap, size_t size)
{
	void *grown;
	uint64_t c;

	if (n < *cap && *arr)
		return 0;
	c = *cap ? *cap * 2 : 64;
	grown = realloc(*arr, c * size);
	if (!grown)
		return -ENOMEM;
	*arr = grown;
	*cap = c;
	return 0;
}

static int add_stack(struct stack_table *t, const struct mt_event *ev)
{
	uint64_t id = ev->f[STACK_ID];
	struct mt_stack *st;
	struct mt_frame *fr;

	if (!id || !ev->nframes || ev->nframes > MT_STACK_MAX)
		return -EINVAL;
	if (stack_table_get(t, id))
		return 0;
	if (reserve((void **)&t->stacks, t->nstacks, &t->stacks_cap, sizeof(*t->stacks)))
		return -ENOMEM;
	fr = calloc(ev->nframes, sizeof(*fr));
	if (!fr)
		return -ENOMEM;
	for (uint32_t i = 0; i < ev->nframes; i++) {
		fr[i].object = ev->frames[i].object;
		fr[i].addr = ev->frames[i].addr;
	}
	st = &t->stacks[t->nstacks++];
	st->id = id;
	st->nframes = ev->nframes;
	st->truncated = ev->truncated;
	st->frames = fr;
	if (index_enter(&t->stack_index, stack_hash, t, mix64(id), t->nstacks - 1)) {
		t->nstacks--;
		free(fr);
		return -ENOMEM;
	}
	t->truncated += st->truncated;
	return 0;
}

const struct mt_object *stack_table_object(const struct stack_table *t, uint32_t id)
{
	uint64_t key = id;
	uint64_t at = id ? hash_index_find(&t->object_index, mix64(key), object_has, t, &key) : 0;

	return at ? &t->objects[at - 1] : NULL;
}

static int add_object(struct stack_table *t, const struct mt_event *ev)
{
	uint32_t id = ev->f[OBJECT_ID];
	uint64_t cap = t->objects_cap;
	struct mt_object *o;
	char *path;

	if (!id || ev->f[OBJECT_ID] > UINT32_MAX)
		return -EINVAL;
	if (stack_table_object(t, id))
		return 0;
	if (reserve((void **)&t->objects, t->nobjects, &cap, sizeof(*t->objects)))
		return -ENOMEM;
	t->objects_cap = cap;
	path = strndup(ev->str, sizeof(ev->str));
	if (!path)
		return -ENOMEM;
	o = &t->objects[t->nobjects++];
	memset(o, 0, sizeof(*o));
	o->id = id;
	o->path = path;
	o->build_id_len =
		ev->build_id_len > sizeof(o->build_id) ? sizeof(o->build_id) : ev->build_id_len;
	memcpy(o->build_id, ev->build_id, o->build_id_len);
	if (index_enter(&t->object_index, object_hash, t, mix64(id), t->nobjects - 1)) {
		t->nobjects--;
		free(path);
		return -ENOMEM;
	}
	return 0;
}

static int add_mapping(struct stack_table *t, const struct mt_event *ev)
{
	struct mt_mapping *m;

	if (reserve((void **)&t->mappings, t->nmappings, &t->mappings_cap, sizeof(*t->mappings)))
		return -ENOMEM;
	m = &t->mappings[t->nmappings++];
	m->pid = ev->h.pid;
	m->start = ev->f[MAPPING_START];
	m->end = ev->f[MAPPING_END];
	m->offset = ev->f[MAPPING_OFFSET];
	m->object = ev->f[MAPPING_OBJECT];
	m->bias = ev->f[MAPPING_BIAS];
	return 0;
}

int stack_table_add_event(struct stack_table *t, const struct mt_event *ev)
{
	switch (ev->h.type) {
	case MT_STACK: return add_stack(t, ev);
	case MT_OBJECT: return add_object(t, ev);
	case MT_MAPPING: return add_mapping(t, ev);
	default: return 0;
	}
}

void stack_table_release(struct stack_table *t)
{
	for (uint64_t i = 0; i < t->nstacks; i++)
		free(t->stacks[i].frames);
	for (uint32_t i = 0; i < t->nobjects; i++)
		free(t->objects[i].path);
	free(t->stacks);
	hash_index_release(&t->stack_index);
	hash_index_release(&t->object_index);
	free(t->objects);
	free(t->mappings);
	memset(t, 0, sizeof(*t));
}
