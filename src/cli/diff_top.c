// SPDX-License-Identifier: MIT
/* diff_top.c - the call-site deltas of `memtrack diff --top N`; see diff_top.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/functions.h"
#include "analyze/site_diff.h"
#include "cli/cli.h"
#include "cli/diff_top.h"
#include "cli/report_top.h"
#include "format/json.h"

#define REGRESSIONS_SHOWN 10 /* text: gated sites listed, then a count */

static const char *const by_prefix[DIFF_NBY] = { "function:", "stack:" };

bool diff_top_wanted(const struct diff_top_opts *o)
{
	if (o->top)
		return true;
	for (int b = 0; b < DIFF_NBY; b++)
		for (int m = 0; m < SITE_NMETRICS; m++)
			if (o->gated[b][m])
				return true;
	return false;
}

int diff_top_metric(struct diff_top_opts *o, const char *arg)
{
	for (int b = 0; b < DIFF_NBY; b++) {
		size_t n = strlen(by_prefix[b]);
		enum site_metric m;

		if (strncmp(arg, by_prefix[b], n) != 0)
			continue;
		if (site_metric_parse(arg + n, &m))
			return -EINVAL;
		o->gated[b][m] = true;
		return 1;
	}
	return 0;
}

void diff_value_print_json(const struct diff_value *v)
{
	if (!v->known) {
		printf("null");
		return;
	}
	printf("{\"base\":%llu,\"new\":%llu,\"change\":%lld,\"change_pct\":",
	       (unsigned long long)v->base, (unsigned long long)v->new, (long long)v->change);
	if (v->pct_valid)
		printf("%.4f}", v->pct);
	else
		printf("null}");
}

void diff_value_cells(const struct diff_value *v, bool bytes, struct diff_cells *c)
{
	if (bytes) {
		human_bytes(v->base, c->base, sizeof(c->base));
		human_bytes(v->new, c->new, sizeof(c->new));
		human_delta(v->change, c->change, sizeof(c->change));
	} else {
		snprintf(c->base, sizeof(c->base), "%llu", (unsigned long long)v->base);
		snprintf(c->new, sizeof(c->new), "%llu", (unsigned long long)v->new);
		snprintf(c->change, sizeof(c->change), "%+lld", (long long)v->change);
	}
	if (v->pct_valid)
		snprintf(c->pct, sizeof(c->pct), "%+.1f%%", v->pct);
	else
		snprintf(c->pct, sizeof(c->pct), "new");
}

static bool counts(enum site_metric m)
{
	return m == SITE_ALLOCATIONS || m == SITE_TEMPORARY;
}

/* Ranking @m is shown: live_at_end only when a run is an attach's (as report --top). */
static bool shown(const struct diff_top_runs *in, enum site_metric m, bool json)
{
	return m != SITE_LIVE_END || json || in->run[0]->a.attached || in->run[1]->a.attached;
}

static void print_row_text(int rank, const struct site_diff_row *r, enum site_metric m,
			   bool by_stack)
{
	struct diff_value v;
	struct diff_cells c;
	char id[20];

	site_diff_value(r, m, &v);
	diff_value_cells(&v, !counts(m), &c);
	printf("  #%d  %s  %s  (%s -> %s)  ", rank, c.change, c.pct, c.base, c.new);
	fputs_printable(r->name, stdout);
	fputs("  [", stdout);
	fputs_printable(r->object ? r->object : "?", stdout);
	fputs("]", stdout);
	if (by_stack)
		printf("  stack %s",
		       stack_short_id(
			       r->stack[r->in[SITE_DIFF_NEW] ? SITE_DIFF_NEW : SITE_DIFF_BASE], id,
			       sizeof(id)));
	printf("%s\n", !r->in[SITE_DIFF_BASE]  ? "  (only in NEW)"
		       : !r->in[SITE_DIFF_NEW] ? "  (only in BASE)"
					       : "");
}

/* "name":..,"object":.. of row @r. */
static void print_where_json(const struct site_diff_row *r)
{
	printf("\"name\":");
	json_print_string(stdout, r->name);
	printf(",\"object\":");
	if (r->object)
		json_print_string(stdout, r->object);
	else
		printf("null");
}

static void print_row_json(const struct site_diff_row *r)
{
	char id[20];

	printf("{");
	print_where_json(r);
	for (int s = 0; s < 2; s++)
		printf(r->in[s] ? ",\"%s_stack_id\":\"%s\"" : ",\"%s_stack_id\":null",
		       s ? "new" : "base", stack_short_id(r->stack[s], id, sizeof(id)));
	printf(",\"metrics\":{");
	for (int m = 0; m < SITE_NMETRICS; m++) {
		struct diff_value v;

		site_diff_value(r, m, &v);
		printf("%s\"%s\":", m ? "," : "", site_metric_name(m));
		diff_value_print_json(&v);
	}
	printf("}}");
}

/* One metric's table of the rows that changed most. */
static int print_table(const struct site_diff *d, const struct diff_top_runs *in,
		       const struct diff_top_opts *o, enum site_metric m, bool first)
{
	size_t k = 0;
	const struct site_diff_row **v = site_diff_ranked(d, m, o->top, &k);
	const char *what = o->by_stack ? "stack" : "function";

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	if (o->json)
		printf("%s\"%s\":[", first ? "" : ",", site_metric_name(m));
	else
		printf("\ntop %zu %s%s by change in %s:\n", k, what, plural(k),
		       site_metric_title(m));
	for (size_t i = 0; v && i < k; i++) {
		if (o->json) {
			printf("%s", i ? "," : "");
			print_row_json(v[i]);
		} else {
			print_row_text((int)i + 1, v[i], m, o->by_stack);
		}
	}
	if (o->json)
		printf("]");
	else if (!k)
		printf("  (no change)\n");
	free(v);
	return 0;
}

static int print_tables(const struct site_diff *d, const struct diff_top_runs *in,
			const struct diff_top_opts *o)
{
	bool first = true;
	int err = 0;

	if (o->json)
		printf(",\"top\":{\"by\":\"%s\",\"n\":%zu,", o->by_stack ? "stack" : "function",
		       o->top);
	for (int m = 0; m < SITE_NMETRICS && !err; m++)
		if (shown(in, m, o->json)) {
			err = print_table(d, in, o, m, first);
			first = false;
		}
	if (o->json && !err)
		printf("}");
	return err;
}

/* Builds the rows of kind @by from both runs into @d (initialised here). */
static int build(struct site_diff *d, enum diff_by by, const struct diff_top_runs *in)
{
	int err = site_diff_init(d);

	for (int s = 0; s < 2 && !err; s++) {
		struct fn_table t;

		if (by == DIFF_BY_STACK) {
			err = site_diff_add_stacks(d, s, &in->run[s]->a, in->st[s], in->sym);
			continue;
		}
		err = fn_table_build(&t, &in->run[s]->a, in->st[s], in->sym);
		if (!err)
			err = site_diff_add_functions(d, s, &t);
		fn_table_release(&t);
	}
	return err;
}

/* One regressed site: a JSON element (after @first) or a text line. */
static void print_regression(enum diff_by by, enum site_metric m, const struct site_diff_row *r,
			     const struct diff_value *v, bool json, bool first)
{
	struct diff_cells c;

	if (json) {
		printf("%s{\"by\":\"%s\",\"metric\":\"%s\",", first ? "" : ",",
		       by == DIFF_BY_STACK ? "stack" : "function", site_metric_name(m));
		print_where_json(r);
		printf(",\"value\":");
		diff_value_print_json(v);
		printf("}");
		return;
	}
	diff_value_cells(v, !counts(m), &c);
	printf("REGRESSION: %s%s ", by_prefix[by], site_metric_name(m));
	fputs_printable(r->name, stdout);
	printf(" [");
	fputs_printable(r->object ? r->object : "?", stdout);
	printf("] %s %s (%s -> %s)\n", c.change, c.pct, c.base, c.new);
}

/*
 * The rows of @d over the threshold in a gated metric, printed (text: while
 * fewer than REGRESSIONS_SHOWN are; @shown so far); returns how many.
 */
static uint64_t print_gates(const struct site_diff *d, enum diff_by by,
			    const struct diff_top_opts *o, uint64_t shown)
{
	uint64_t over = 0;

	for (int m = 0; m < SITE_NMETRICS; m++) {
		for (uint64_t i = 0; o->gated[by][m] && i < d->nrows; i++) {
			struct diff_value v;

			site_diff_value(&d->rows[i], m, &v);
			if (!diff_exceeds(&v, o->fail_above))
				continue;
			if (o->json || shown + over < REGRESSIONS_SHOWN)
				print_regression(by, m, &d->rows[i], &v, o->json, !(shown + over));
			over++;
		}
	}
	return over;
}

int diff_top_print(const struct diff_top_runs *in, const struct diff_top_opts *o, bool *regressed)
{
	struct site_diff d[DIFF_NBY];
	bool built[DIFF_NBY] = { false, false }, gated = false;
	uint64_t over = 0;
	int err = 0;

	*regressed = false;
	for (int b = 0; b < DIFF_NBY && !err; b++) {
		bool want = o->top && (b == DIFF_BY_STACK) == o->by_stack;

		for (int m = 0; m < SITE_NMETRICS; m++)
			if (o->gate && o->gated[b][m])
				want = gated = true;
		if (want) {
			built[b] = true;
			err = build(&d[b], b, in);
		}
	}
	if (!err && o->top)
		err = print_tables(&d[o->by_stack ? DIFF_BY_STACK : DIFF_BY_FUNCTION], in, o);
	if (!err && o->json)
		printf(o->top ? ",\"site_regressions\":[" : ",\"top\":null,\"site_regressions\":[");
	else if (!err && gated)
		printf("\n");
	for (int b = 0; b < DIFF_NBY && !err; b++)
		if (built[b] && o->gate)
			over += print_gates(&d[b], b, o, over);
	if (!err && o->json)
		printf("]");
	else if (!err && over > REGRESSIONS_SHOWN)
		printf("REGRESSION: ... and %llu more site%s\n",
		       (unsigned long long)(over - REGRESSIONS_SHOWN),
		       plural(over - REGRESSIONS_SHOWN));
	for (int b = 0; b < DIFF_NBY; b++)
		if (built[b])
			site_diff_release(&d[b]);
	*regressed = over > 0;
	return err;
}
