/* SPDX-License-Identifier: MIT */
/*
 * stacks.h - the call stacks of an artifact in memory: the objects (ELF
 * files) the tracked processes mapped, their executable mappings, and every
 * deduplicated stack by id.  Filled from the `object`, `mapping` and `stack`
 * records (docs/FORMAT.md §8) as the file is read; report --top, flamegraph
 * and export --format=pprof look stacks up by the id a heap record carries.
 *
 * Ownership: the table owns every object, path, stack and frame array; the
 * pointers the getters return stay valid until stack_table_release().
 * Cost: a hash lookup per stack record and per get; memory grows with the
 * distinct stacks, not with the events.
 */
#ifndef MEMTRACK_STACKS_H
#define MEMTRACK_STACKS_H

#include <stdbool.h>
#include <stdint.h>
#include "format/artifact.h"
#include "util/hash_index.h"

/* One frame: a return address inside an object. */
struct mt_frame {
	uint32_t object; /* object id, 0: the pc lay in no known file */
	uint64_t addr;	 /* ELF virtual address (pc - bias); absolute when object is 0 */
};

struct mt_stack {
	uint64_t id;		 /* > 0, as the records name it */
	uint32_t nframes;	 /* 1..127 */
	bool truncated;		 /* unwinding stopped before the outermost frame */
	struct mt_frame *frames; /* owned by the table; innermost first */
};

struct mt_object {
	uint32_t id;	      /* > 0 */
	char *path;	      /* owned by the table */
	uint8_t build_id[20]; /* GNU build-id */
	uint8_t build_id_len; /* 0: the file has none */
};

/* One executable mapping of one process. */
struct mt_mapping {
	uint32_t pid;
	uint32_t object; /* object id */
	uint64_t start;	 /* first address */
	uint64_t end;	 /* one past the last */
	uint64_t offset; /* file offset of start */
	uint64_t bias;	 /* ELF virtual address = pc - bias */
};

/*
 * A Python code object (a PYCODE record, FORMAT.md §8.3): what its frames
 * show.  Strings are UTF-8, made printable (pycode.h); lines is the
 * line table as the record kept it.
 */
struct mt_pycode {
	uint64_t key; /* the frames' addr */
	uint32_t firstlineno;
	char *name;	/* owned; co_name */
	char *qualname; /* owned; co_qualname ("" before 3.11: name is used) */
	char *file;	/* owned; co_filename */
	uint8_t *lines; /* owned; nlines bytes */
	uint32_t nlines;
	uint32_t lines_format; /* enum mt_py_lines */
};

struct stack_table {
	struct mt_stack *stacks; /* owned, nstacks of them, in record order */
	uint64_t nstacks, stacks_cap;
	struct hash_index stack_index; /* owned: stacks by id */
	struct mt_object *objects;     /* owned, nobjects of them, in record order */
	uint32_t nobjects, objects_cap;
	struct hash_index
		object_index;	     /* owned: objects by id (any u32 > 0, not only 1, 2, 3...) */
	struct mt_mapping *mappings; /* owned, nmappings of them, in record order */
	uint64_t nmappings, mappings_cap;
	uint64_t truncated;	 /* stacks marked truncated */
	struct mt_pycode *codes; /* owned, ncodes of them, in record order */
	uint64_t ncodes, codes_cap;
	struct hash_index code_index; /* owned: codes by key */
};

void stack_table_init(struct stack_table *t);

/*
 * Takes an MT_OBJECT, MT_MAPPING, MT_STACK or MT_PYCODE event (any other
 * type is ignored).  A stack, object or code object whose id is already
 * known keeps its first definition.  Returns 0, -EINVAL for a record the contract forbids (id 0,
 * no frames, more than 127), or -ENOMEM (the table is unchanged).
 */
int stack_table_add_event(struct stack_table *t, const struct mt_event *ev);

/* The stack @id, or NULL when no record defined it (id 0 included). */
const struct mt_stack *stack_table_get(const struct stack_table *t, uint64_t id);

/* The object @id, or NULL when no record defined it. */
const struct mt_object *stack_table_object(const struct stack_table *t, uint32_t id);

/* The code object of key @key, or NULL when no PYCODE record defined it. */
const struct mt_pycode *stack_table_code(const struct stack_table *t, uint64_t key);

/* Frees everything; @t can be initialised again. */
void stack_table_release(struct stack_table *t);

#endif /* MEMTRACK_STACKS_H */
