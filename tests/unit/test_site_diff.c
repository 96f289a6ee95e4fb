// SPDX-License-Identifier: MIT
/*
 * test_site_diff.c - diff --top's rows (src/analyze/site_diff.c) on two
 * hand-made function tables: pairing by name and object basename (not by
 * stack id, not by the object's directory), rows only one run has, the
 * ranking by the size of the change either way with its ties, and the cut.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "analyze/site_diff.h"

static struct mt_object prog_a = { .id = 1, .path = "/build/a/prog" },
			prog_b = { .id = 7, .path = "/build/b/prog" }, /* rebuilt elsewhere */
	libx = { .id = 2, .path = "/usr/lib/libx.so" };

struct fn_def {
	const char *name;
	const struct mt_object *obj;
	uint64_t stack, allocs, peak;
};

/* A table of @n functions (only what site_diff reads is filled). */
static void table(struct fn_table *t, const struct fn_def *d, size_t n)
{
	memset(t, 0, sizeof(*t));
	t->fns = calloc(n, sizeof(*t->fns));
	CHECK(t->fns != NULL);
	for (size_t i = 0; t->fns && i < n; i++) {
		t->fns[i].name = d[i].name;
		t->fns[i].obj = d[i].obj;
		t->fns[i].cost.stack = d[i].stack;
		t->fns[i].cost.allocs = d[i].allocs;
		t->fns[i].cost.peak_bytes = d[i].peak;
	}
	t->nfns = t->fns ? n : 0;
}

static const char *label(const struct site_diff_row *r)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s[%s]", r->name, r->object ? r->object : "?");
	return buf;
}

static void test_pairs_and_ranks(void)
{
	static const struct fn_def base[] = {
		{ "grow", &prog_a, 0x11, 2, 6144 },	  { "steady", &prog_a, 0x13, 10, 0 },
		{ "leak", &prog_a, 0x15, 1, 0 },	  { "gone", &prog_a, 0x17, 4, 0 },
		{ "(no stack recorded)", NULL, 0, 1, 0 },
	};
	static const struct fn_def new[] = {
		{ "grow", &prog_b, 0x21, 5,
		  15360 }, /* another id, another directory: the same function */
		{ "steady", &prog_b, 0x23, 10, 0 },
		{ "leak", &prog_b, 0x25, 3, 0 },
		{ "fresh", &prog_b, 0x27, 7, 0 },
		{ "grow", &libx, 0x29, 3, 0 }, /* the same name in another object: another row */
		{ "(no stack recorded)", NULL, 0, 1, 0 },
	};
	static const char *const by_allocs[] = { "fresh[prog]", "gone[prog]", "grow[libx.so]",
						 "grow[prog]", "leak[prog]" };
	struct fn_table b, n;
	struct site_diff d;
	struct diff_value v;
	const struct site_diff_row **rows;
	size_t k = 99;

	table(&b, base, sizeof(base) / sizeof(base[0]));
	table(&n, new, sizeof(new) / sizeof(new[0]));
	CHECK_EQ(site_diff_init(&d), 0);
	CHECK_EQ(site_diff_add_functions(&d, SITE_DIFF_BASE, &b), 0);
	CHECK_EQ(site_diff_add_functions(&d, SITE_DIFF_NEW, &n), 0);
	CHECK_U64(d.nrows, 7);

	rows = site_diff_ranked(&d, SITE_ALLOCATIONS, 0, &k);
	CHECK_EQ(k, 5); /* steady and the stackless row did not change */
	for (size_t i = 0; rows && i < k && i < 5; i++)
		CHECK_STR(label(rows[i]), by_allocs[i]);
	if (rows && k == 5) {
		CHECK(!rows[0]->in[SITE_DIFF_BASE] && rows[0]->in[SITE_DIFF_NEW]);
		CHECK(rows[1]->in[SITE_DIFF_BASE] && !rows[1]->in[SITE_DIFF_NEW]);
		site_diff_value(rows[1], SITE_ALLOCATIONS, &v);
		CHECK(v.known && v.base == 4 && v.new == 0 && v.change == -4 && v.pct == -100.0);
		site_diff_value(rows[0], SITE_ALLOCATIONS, &v);
		CHECK(v.known && !v.pct_valid && v.change == 7); /* from 0 */
		CHECK(diff_exceeds(&v, 1e9));
		CHECK_U64(rows[3]->stack[SITE_DIFF_BASE], 0x11);
		CHECK_U64(rows[3]->stack[SITE_DIFF_NEW], 0x21);
	}
	free(rows);

	rows = site_diff_ranked(&d, SITE_PEAK, 0, &k);
	CHECK_EQ(k, 1);
	if (rows) {
		CHECK_STR(label(rows[0]), "grow[prog]");
		site_diff_value(rows[0], SITE_PEAK, &v);
		CHECK(v.base == 6144 && v.new == 15360 && v.pct == 150.0);
		CHECK(diff_exceeds(&v, 149.9) && !diff_exceeds(&v, 150));
	}
	free(rows);

	rows = site_diff_ranked(&d, SITE_ALLOCATIONS, 2, &k); /* the cut */
	CHECK_EQ(k, 2);
	if (rows)
		CHECK_STR(label(rows[1]), "gone[prog]");
	free(rows);

	errno = EINVAL;
	rows = site_diff_ranked(&d, SITE_LEAKED, 0, &k); /* nothing changed: NULL, errno 0 */
	CHECK(rows == NULL && k == 0 && errno == 0);

	site_diff_release(&d);
	free(b.fns);
	free(n.fns);
}

int main(void)
{
	RUN(test_pairs_and_ranks);
	HARNESS_EXIT();
}
