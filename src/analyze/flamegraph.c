// SPDX-License-Identifier: MIT
/* flamegraph.c - the call-site tree, folded stacks; see flamegraph.h (SVG: flamegraph_svg.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/flamegraph.h"
#include "analyze/mix64.h"

/* Folded output's separators and the control characters XML 1.0 forbids. */
#define FLAME_BAD_CHARS                                                                         \
	";\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15" \
	"\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f"

static int node_new(struct flame *f, const char *name, uint32_t *idx)
{
	if (f->nnodes == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 256;
		struct flame_node *n = realloc(f->nodes, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		f->nodes = n;
		f->cap = cap;
	}
	f->nodes[f->nnodes] = (struct flame_node){ .name = name };
	*idx = f->nnodes++;
	return 0;
}

/* A node's key in the edge index: its parent and its (interned) name. */
struct edge {
	uint32_t parent;
	const char *name;
};

static uint64_t edge_hash(uint32_t parent, const char *name)
{
	return mix64((uint64_t)(uintptr_t)name ^ ((uint64_t)parent << 40));
}

static bool edge_has(const void *ctx, uint64_t pos, const void *key)
{
	const struct flame_node *n = &((const struct flame *)ctx)->nodes[pos];
	const struct edge *e = key;

	return n->parent == e->parent && n->name == e->name;
}

static uint64_t node_hash(const void *ctx, uint64_t pos)
{
	const struct flame_node *n = &((const struct flame *)ctx)->nodes[pos];

	return edge_hash(n->parent, n->name);
}

/*
 * The child of @parent named @name (names are interned: one pointer per
 * name), added when new, through a hash on (parent, name): a crafted file
 * can give one node 10^5 children, and walking its sibling list for each
 * was quadratic.  Siblings are sorted by name once, by sort_children().
 */
static int child(struct flame *f, uint32_t parent, const char *name, uint32_t *out)
{
	const struct edge key = { parent, name };
	uint64_t at = hash_index_find(&f->edges, edge_hash(parent, name), edge_has, f, &key);
	uint32_t n;

	if (at) {
		*out = (uint32_t)(at - 1);
		return 0;
	}
	if (hash_index_reserve(&f->edges, 1024, node_hash, f) || node_new(f, name, &n))
		return -ENOMEM;
	f->nodes[n].parent = parent;
	f->nodes[n].next_sibling = f->nodes[parent].first_child;
	f->nodes[parent].first_child = n;
	hash_index_add(&f->edges, edge_hash(parent, name), n);
	*out = n;
	return 0;
}

static int by_name(const void *pa, const void *pb, void *ctx)
{
	const struct flame_node *nodes = ctx;

	return strcmp(nodes[*(const uint32_t *)pa].name, nodes[*(const uint32_t *)pb].name);
}

/* Sorts every node's children by name, so every output is in a stable order. */
static int sort_children(struct flame *f)
{
	uint32_t *kids = calloc(f->nnodes ? f->nnodes : 1, sizeof(*kids));

	if (!kids)
		return -ENOMEM;
	for (uint32_t p = 0; p < f->nnodes; p++) {
		uint32_t k = 0;

		for (uint32_t c = f->nodes[p].first_child; c; c = f->nodes[c].next_sibling)
			kids[k++] = c;
		qsort_r(kids, k, sizeof(*kids), by_name, f->nodes);
		f->nodes[p].first_child = k ? kids[0] : 0;
		for (uint32_t i = 0; i < k; i++)
			f->nodes[kids[i]].next_sibling = i + 1 < k ? kids[i + 1] : 0;
	}
	free(kids);
	return 0;
}

/* Adds one site's path (@fr innermost first) with @value. */
static int add_path(struct flame *f, const struct site_frame *fr, int n, uint64_t value)
{
	uint32_t at = 0, depth = 0;
	char buf[512];

	f->nodes[0].value = sat_add(f->nodes[0].value, value);
	if (n <= 0) { /* no stack: one frame saying so */
		const char *name = intern(&f->names, "(no stack)");

		if (!name || child(f, 0, name, &at))
			return -ENOMEM;
		depth = 1;
	}
	for (int i = n - 1; i >= 0; i--) {
		/*
		 * a ';' would split the frame in folded output, and a control
		 * character (from a crafted file) is no XML the SVG may hold
		 */
		const char *raw = site_frame_label(&fr[i], buf, sizeof(buf)), *name;
		char clean[512];

		if (strpbrk(raw, FLAME_BAD_CHARS)) {
			snprintf(clean, sizeof(clean), "%s", raw);
			for (char *c = clean; *c; c++)
				if (strchr(FLAME_BAD_CHARS, *c))
					*c = ':';
			raw = clean;
		}
		name = intern(&f->names, raw);
		if (!name || child(f, at, name, &at))
			return -ENOMEM;
		f->nodes[at].value = sat_add(f->nodes[at].value, value);
		depth++;
	}
	if (n <= 0)
		f->nodes[at].value = sat_add(f->nodes[at].value, value);
	f->nodes[at].self = sat_add(f->nodes[at].self, value);
	if (depth > f->depth)
		f->depth = depth;
	return 0;
}

int flame_build(struct flame *f, const struct analysis *a, const struct stack_table *st,
		struct symbolizer *sym, enum site_metric m)
{
	struct site_frame *fr = NULL;
	const struct site **v = NULL;
	size_t k = 0;
	uint32_t root;
	int err = -ENOMEM;

	memset(f, 0, sizeof(*f));
	f->metric = m;
	if (intern_init(&f->names) || node_new(f, "all", &root))
		return -ENOMEM;
	fr = calloc(SITE_MAX_FRAMES, sizeof(*fr));
	if (!fr)
		goto out;
	v = callsites_ranked(a, m, 0, &k);
	if (!v && errno == ENOMEM)
		goto out;
	for (size_t i = 0; v && i < k; i++) {
		int n = callsite_expand(sym, st, v[i]->stack, fr, SITE_MAX_FRAMES);

		if (n < 0 || add_path(f, fr, n, site_value(v[i], m)))
			goto out;
	}
	err = sort_children(f);
out:
	free(v);
	free(fr);
	return err;
}

/* Writes the folded lines under node @n whose path (without the root) is @path. */
static void folded(const struct flame *f, uint32_t n, char *path, size_t len, size_t cap, FILE *out)
{
	const struct flame_node *node = &f->nodes[n];
	size_t l = len;

	if (n) {
		int w = snprintf(path + len, cap - len, "%s%s", len ? ";" : "", node->name);

		l = w < 0 || len + w >= cap ? cap - 1 : len + w;
		if (node->self)
			fprintf(out, "%.*s %llu\n", (int)l, path, (unsigned long long)node->self);
	}
	for (uint32_t c = node->first_child; c; c = f->nodes[c].next_sibling)
		folded(f, c, path, l, cap, out);
}

int flame_write_folded(const struct flame *f, FILE *out)
{
	size_t cap = SITE_MAX_FRAMES * 256;
	char *path = malloc(cap);

	if (!path)
		return -ENOMEM;
	path[0] = 0;
	folded(f, 0, path, 0, cap, out);
	free(path);
	return ferror(out) ? -EIO : 0;
}

void flame_release(struct flame *f)
{
	free(f->nodes);
	hash_index_release(&f->edges);
	intern_release(&f->names);
	memset(f, 0, sizeof(*f));
}
