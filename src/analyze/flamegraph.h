/* SPDX-License-Identifier: MIT */
/*
 * flamegraph.h - the call sites of an analysis as a tree of frames
 * (outermost at the root), written as folded stacks ("main;f;g 1234", one
 * line per distinct path, the common format of flame graph tools) or as a
 * self-contained interactive SVG flame graph (click to zoom, Ctrl-F or the
 * Search button to highlight, tooltips with value and share; no external
 * script, font or network).
 *
 * Ownership: the tree owns its nodes; names are borrowed from the
 * symbolizer (or interned here) and live as long as both.
 */
#ifndef MEMTRACK_FLAMEGRAPH_H
#define MEMTRACK_FLAMEGRAPH_H

#include <stdio.h>
#include "analyze/callsites.h"
#include "analyze/intern.h"
#include "util/hash_index.h"

struct flame_node {
	const char *name;		    /* interned */
	uint64_t value;			    /* the metric over every path through this node */
	uint64_t self;			    /* ... of paths that end here */
	uint32_t first_child, next_sibling; /* node indexes, 0 = none (0 is the root) */
	uint32_t parent;		    /* node index (the root's: 0) */
};

struct flame {
	struct flame_node *nodes; /* owned; [0] is the root ("all") */
	uint32_t nnodes, cap;
	struct intern names;	 /* names made here (unknown frames) */
	struct hash_index edges; /* owned: nodes but the root by (parent, name) */
	enum site_metric metric;
	uint32_t depth; /* levels below the root */
};

/*
 * Builds the tree of @a's sites by @m.  Returns 0 or -ENOMEM (then
 * flame_release() is still to be called).
 */
int flame_build(struct flame *f, const struct analysis *a, const struct stack_table *st,
		struct symbolizer *sym, enum site_metric m);

/* One "frame;frame;frame value" line per path with a self value.  0 or -EIO. */
int flame_write_folded(const struct flame *f, FILE *out);

/*
 * The SVG flame graph, @title at its top: the root at the top and callees
 * below (an icicle, what opens on the root whatever the depth), or with
 * @flame the classic flame graph, root at the bottom.  As tall as the
 * levels wide enough to draw.  0 or -EIO/-ENOMEM.
 */
int flame_write_svg(const struct flame *f, const char *title, bool flame, FILE *out);

void flame_release(struct flame *f);

#endif /* MEMTRACK_FLAMEGRAPH_H */
