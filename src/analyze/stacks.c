// SPDX-License-Identifier: MIT
/* stacks.c - the in-memory stack, object and mapping table; see stacks.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "stacks.h"
#include "mix64.h"

void stack_table_init(struct stack_table *t)
{
	memset(t, 0, sizeof(*t));
}

/* The index slot holding @id, or the empty one where it goes; the index has slots. */
static uint64_t *index_slot(const struct stack_table *t, uint64_t id)
{
	uint64_t mask = t->index_slots - 1;

	for (uint64_t i = mix64(id) & mask;; i = (i + 1) & mask) {
		uint64_t *s = &t->index[i];

		if (!*s || t->stacks[*s - 1].id == id)
			return s;
	}
}

const struct mt_stack *stack_table_get(const struct stack_table *t, uint64_t id)
{
	uint64_t *s;

	if (!id || !t->index_slots)
		return NULL;
	s = index_slot(t, id);
	return *s ? &t->stacks[*s - 1] : NULL;
}

static int index_grow(struct stack_table *t)
{
	uint64_t *old = t->index, n = t->index_slots ? t->index_slots * 2 : 256;

	t->index = calloc(n, sizeof(*t->index));
	if (!t->index) {
		t->index = old;
		return -ENOMEM;
	}
	free(old);
	t->index_slots = n;
	for (uint64_t i = 0; t->stacks && i < t->nstacks; i++)
		*index_slot(t, t->stacks[i].id) = i + 1;
	return 0;
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
	if ((t->nstacks + 1) * 2 > t->index_slots && index_grow(t))
		return -ENOMEM;
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
	*index_slot(t, id) = t->nstacks;
	t->truncated += st->truncated;
	return 0;
}

const struct mt_object *stack_table_object(const struct stack_table *t, uint32_t id)
{
	/* ids are handed out 1, 2, 3... by the recorder: try the direct slot first */
	if (id && id <= t->nobjects && t->objects[id - 1].id == id)
		return &t->objects[id - 1];
	for (uint32_t i = 0; id && i < t->nobjects; i++)
		if (t->objects[i].id == id)
			return &t->objects[i];
	return NULL;
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
	free(t->index);
	free(t->objects);
	free(t->mappings);
	memset(t, 0, sizeof(*t));
}
