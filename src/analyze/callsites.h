/* SPDX-License-Identifier: MIT */
/*
 * callsites.h - what report --top, flamegraph and export --format=pprof
 * share: the call sites of a finished analysis ranked by a metric, each
 * stack expanded into symbolized source frames, and the count of truncated
 * stacks by object.  docs/METRICS.md ("Call sites") defines the metrics.
 *
 * Ownership: everything returned borrows from the analysis, the stack
 * table and the symbolizer given, unless a comment says otherwise.
 */
#ifndef MEMTRACK_CALLSITES_H
#define MEMTRACK_CALLSITES_H

#include <stddef.h>
#include <stdint.h>
#include "analyze/analysis.h"
#include "analyze/stacks.h"
#include "analyze/symbolize.h"

/* The metrics a site is ranked by (their names: `--metric NAME`). */
enum site_metric {
	SITE_PEAK,	  /* "peak": bytes live from the site at the tree's heap peak */
	SITE_ALLOCATIONS, /* "allocations": heap allocations */
	SITE_ALLOCATED,	  /* "allocated": bytes those requested */
	SITE_LEAKED,	  /* "leaked": bytes never freed */
	SITE_MEMORY,	/* "memory": heap + mapped bytes from the site at the tree's memory peak */
	SITE_TEMPORARY, /* "temporary": allocations freed before their thread allocated again */
	SITE_LIVE_END, /* "live_at_end": bytes held at the end of an attach by processes alive then */
	SITE_NMETRICS,
};

const char *site_metric_name(enum site_metric m);

/* 0 and *@m set, or -EINVAL for a name that is no metric. */
int site_metric_parse(const char *name, enum site_metric *m);

uint64_t site_value(const struct site *s, enum site_metric m);

/*
 * The sites of @a with a non-zero value for @m, the largest first (ties:
 * lower stack id first), at most @max (0: all).  Returns a malloc'd array
 * of pointers into a->sites (the caller frees the array), *@n its length;
 * NULL with *@n 0 when there is none or on -ENOMEM (errno says which).
 */
const struct site **callsites_ranked(const struct analysis *a, enum site_metric m, size_t max,
				     size_t *n);

/* One source-level frame of a stack. */
struct site_frame {
	const char *function; /* NULL: unknown (see site_frame_name) */
	const char *file;     /* NULL: unknown */
	uint32_t line;	      /* 0: unknown */
	bool inlined;	      /* inlined into the next frame */
	bool python;	      /* a Python frame (FORMAT.md §8.3): obj NULL, addr its code key */
	const struct mt_object *obj; /* NULL: the pc lay in no known file */
	uint64_t addr;		     /* the recorded frame's address */
};

/*
 * Expands stack @id into @out (innermost first, inlined frames included),
 * at most @max frames.  Returns the count (0 for an unknown stack: id 0 or
 * never recorded) or -ENOMEM.
 */
int callsite_expand(struct symbolizer *sym, const struct stack_table *st, uint64_t id,
		    struct site_frame *out, size_t max);

/*
 * The recorded frames of stack @s in the order a stack shows them (issue
 * 37): its native frames, each native frame of CPython's eval loop
 * (_PyEval_EvalFrameDefault) that Python frames stand for replaced by them
 * (FORMAT.md §8.3), so a stack reads C caller, Python frames, C callee.
 * Fills @out (MT_STACK_MAX) and returns the count, or -ENOMEM.
 */
int callsite_order(struct symbolizer *sym, const struct stack_table *st, const struct mt_stack *s,
		   struct mt_frame *out);

/* What Python frame @f (object MT_PY_FRAME) shows: its code object's name, file and line. */
struct site_frame callsite_python_frame(const struct stack_table *st, const struct mt_frame *f);

/* Most frames callsite_expand() can give for one stack. */
#define SITE_MAX_FRAMES ((size_t)MT_STACK_MAX * 8)

/* The frame's function, or "OBJECT+0xADDR" / "0xADDR" when unknown, in @buf if needed. */
const char *site_frame_name(const struct site_frame *f, char *buf, size_t len);

/*
 * As site_frame_name(), and a Python frame as "file.py:function:line"
 * (basename) in @buf: a flame graph's or top's one-string frame.
 */
const char *site_frame_label(const struct site_frame *f, char *buf, size_t len);

/*
 * Stack @id as text shows it: 8 hex digits (its low 32 bits; ids are
 * hashes), in @buf (9 bytes at least); JSON keeps the full id as "stack".
 */
const char *stack_short_id(uint64_t id, char *buf, size_t len);

/* The basename of a path (borrowed). */
const char *path_base(const char *path);

/* Truncated stacks, grouped by the object of their outermost frame. */
struct truncated_by_object {
	uint32_t object; /* 0: a pc in no known file */
	uint64_t stacks;
};

/*
 * Fills a malloc'd array (the caller frees it) of the objects truncated
 * stacks of @st end in, the most first; *@n its length.  NULL with *@n 0
 * when no stack is truncated or on -ENOMEM.
 */
struct truncated_by_object *callsites_truncated(const struct stack_table *st, size_t *n);

#endif /* MEMTRACK_CALLSITES_H */
