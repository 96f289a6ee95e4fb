// SPDX-License-Identifier: MIT
/* flamegraph.c - the call-site tree, folded stacks; see flamegraph.h (SVG: flamegraph_svg.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"

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

/*
 * The child of @parent named @name (names are interned: compared by
 * pointer), added when new; children stay sorted by name so every output
 * is in a stable order.
 */
static int child(struct flame *f, uint32_t parent, const char *name, uint32_t *out)
{
	uint32_t prev = 0, c = f->nodes[parent].first_child, n;

	for (; c; prev = c, c = f->nodes[c].next_sibling) {
		int cmp = f->nodes[c].name == name ? 0 : strcmp(f->nodes[c].name, name);

		if (!cmp) {
			*out = c;
			return 0;
		}
		if (cmp > 0)
			break;
	}
	if (node_new(f, name, &n))
		return -ENOMEM;
	f->nodes[n].next_sibling = c;
	if (prev)
		f->nodes[prev].next_sibling = n;
	else
		f->nodes[parent].first_child = n;
	*out = n;
	return 0;
}

/* Adds one site's path (@fr innermost first) with @value. */
static int add_path(struct flame *f, const struct site_frame *fr, int n, uint64_t value)
{
	uint32_t at = 0, depth = 0;
	char buf[128];

	f->nodes[0].value = sat_add(f->nodes[0].value, value);
	if (n <= 0) { /* no stack: one frame saying so */
		const char *name = intern(&f->names, "(no stack)");

		if (!name || child(f, 0, name, &at))
			return -ENOMEM;
		depth = 1;
	}
	for (int i = n - 1; i >= 0; i--) {
		/* a ';' would split the frame in folded output */
		const char *raw = site_frame_name(&fr[i], buf, sizeof(buf)), *name;
		char clean[512];

		if (strpbrk(raw, ";\n")) {
			snprintf(clean, sizeof(clean), "%s", raw);
			for (char *c = clean; *c; c++)
				if (*c == ';' || *c == '\n')
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
	err = 0;
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
	intern_release(&f->names);
	memset(f, 0, sizeof(*f));
}
