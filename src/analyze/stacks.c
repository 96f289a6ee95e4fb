// SPDX-License-Identifier: MIT
/* stacks.c - the in-memory stack, object and mapping table; see stacks.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/stacks.h"
#include "analyze/mix64.h"
#include "analyze/pycode.h"
#include "util/array.h"

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
static int add_stack(struct stack_table *t, const struct mt_event *ev)
{
	uint64_t id = ev->f[STACK_ID];
	struct mt_stack *st;
	struct mt_frame *fr;

	if (!id || !ev->nframes || ev->nframes > MT_STACK_MAX)
		return -EINVAL;
	if (stack_table_get(t, id))
		return 0;
	if (array_room_for_one((void **)&t->stacks, &t->stacks_cap, t->nstacks, sizeof(*t->stacks)))
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
	if (array_room_for_one((void **)&t->objects, &cap, t->nobjects, sizeof(*t->objects)))
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

	if (array_room_for_one((void **)&t->mappings, &t->mappings_cap, t->nmappings,
			       sizeof(*t->mappings)))
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

static bool code_has(const void *ctx, uint64_t pos, const void *key)
{
	const struct stack_table *t = ctx;

	return t->codes[pos].key == *(const uint64_t *)key;
}

static uint64_t code_hash(const void *ctx, uint64_t pos)
{
	const struct stack_table *t = ctx;

	return mix64(t->codes[pos].key);
}

const struct mt_pycode *stack_table_code(const struct stack_table *t, uint64_t key)
{
	uint64_t at = key ? hash_index_find(&t->code_index, mix64(key), code_has, t, &key) : 0;

	return at ? &t->codes[at - 1] : NULL;
}

static void code_free(struct mt_pycode *c)
{
	free(c->name);
	free(c->qualname);
	free(c->file);
	free(c->lines);
}

/* A PYCODE record's strings (untrusted: pycode.h) and line table, copied. */
static int code_fill(struct mt_pycode *c, const struct mt_event *ev)
{
	uint64_t str = ev->f[PYCODE_STRINGS];
	uint32_t at = 0, len[3];
	char **dst[3] = { &c->name, &c->qualname, &c->file };

	for (int i = 0; i < 3; i++) {
		len[i] = MT_PYCODE_STR_LEN(str, i);
		*dst[i] = py_text(ev->blob + at, len[i], MT_PYCODE_STR_KIND(str, i));
		if (!*dst[i])
			return -ENOMEM;
		at += len[i];
	}
	c->nlines = (uint32_t)(ev->f[PYCODE_LINES] & 0xffffffffu);
	c->lines_format = (uint32_t)(ev->f[PYCODE_LINES] >> 32);
	c->firstlineno =
		ev->f[PYCODE_FIRSTLINE] > INT32_MAX ? 0 : (uint32_t)ev->f[PYCODE_FIRSTLINE];
	c->lines = malloc(c->nlines ? c->nlines : 1);
	if (!c->lines)
		return -ENOMEM;
	memcpy(c->lines, ev->blob + at, c->nlines);
	return 0;
}

static int add_code(struct stack_table *t, const struct mt_event *ev)
{
	uint64_t key = ev->f[PYCODE_KEY];
	struct mt_pycode *c;

	if (!key || ev->blob_len != mt_pycode_blob_len(ev->f))
		return -EINVAL;
	if (stack_table_code(t, key))
		return 0;
	if (array_room_for_one((void **)&t->codes, &t->codes_cap, t->ncodes, sizeof(*t->codes)))
		return -ENOMEM;
	c = &t->codes[t->ncodes];
	memset(c, 0, sizeof(*c));
	c->key = key;
	if (code_fill(c, ev) || index_enter(&t->code_index, code_hash, t, mix64(key), t->ncodes)) {
		code_free(c);
		return -ENOMEM;
	}
	t->ncodes++;
	return 0;
}

int stack_table_add_event(struct stack_table *t, const struct mt_event *ev)
{
	switch (ev->h.type) {
	case MT_PYCODE: return add_code(t, ev);
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
	for (uint64_t i = 0; i < t->ncodes; i++)
		code_free(&t->codes[i]);
	free(t->codes);
	hash_index_release(&t->code_index);
	free(t->stacks);
	hash_index_release(&t->stack_index);
	hash_index_release(&t->object_index);
	free(t->objects);
	free(t->mappings);
	memset(t, 0, sizeof(*t));
}
