// SPDX-License-Identifier: MIT
/* report_top.c - the call-site rankings of `report --top N`; see report_top.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "analyze/callsites.h"
#include "analyze/functions.h"
#include "cli/cli.h"
#include "format/json.h"
#include "cli/report_top.h"

static const char *const titles[SITE_NMETRICS] = {
	"peak heap (bytes live at the tree's heap peak)",
	"allocations",
	"allocated bytes",
	"leaked bytes",
	"memory (heap + mapped bytes at the tree's memory peak)",
	"temporary allocations (freed before their thread allocated again)",
	"bytes live at the end (held by processes still running when the attach ended)",
};

const char *site_metric_title(enum site_metric m)
{
	return m < SITE_NMETRICS ? titles[m] : "?";
}

#define TEXT_CALLERS 3	/* callers shown under a function in text */
#define JSON_CALLERS 10 /* ... in JSON (callers_total says how many there are) */

/* What report --top prints with, for every ranking. */
struct top_ctx {
	const struct analysis *a;
	const struct stack_table *st;
	struct symbolizer *sym;
	const struct top_opts *o;
	struct site_frame *f; /* scratch: SITE_MAX_FRAMES frames */
	struct fn_table fns;  /* built when functions are printed */
};

static void print_frames_text(const struct site_frame *f, int n, uint64_t stack)
{
	char name[128], id[20];

	if (n <= 0 && stack) { /* its record was lost (dropped events) or the file cut */
		printf("      (stack %s has no record in the file)\n",
		       stack_short_id(stack, id, sizeof(id)));
		return;
	}
	if (n <= 0) {
		printf("      (no stack recorded)\n");
		return;
	}
	/* names come from the binaries and the artifact: anyone's bytes, escapes included */
	for (int i = 0; i < n; i++) {
		fputs("      ", stdout);
		fputs_printable(site_frame_name(&f[i], name, sizeof(name)), stdout);
		if (f[i].file) {
			fputs("  ", stdout);
			fputs_printable(f[i].file, stdout);
			printf(":%u", f[i].line);
		}
		fputs("  [", stdout);
		fputs_printable(f[i].python ? "python"
				: f[i].obj  ? path_base(f[i].obj->path)
					    : "?",
				stdout);
		printf("]%s\n", f[i].inlined ? " (inlined)" : "");
	}
}

/* The numbers of a site or function, on one line with no newline. */
static void print_cost_text(const struct site *s)
{
	char b1[32], b2[32], b3[32], b4[32];

	printf("%s at peak, %llu allocation%s, %s allocated, %llu leaked (%s",
	       human_bytes(s->peak_bytes, b1, sizeof(b1)), (unsigned long long)s->allocs,
	       plural(s->allocs), human_bytes(s->allocated_bytes, b2, sizeof(b2)),
	       (unsigned long long)s->leaked_count, human_bytes(s->leaked_bytes, b3, sizeof(b3)));
	if (s->leaked_count)
		printf(", %.3f s old at most, %.3f s on average", s->leaked_age_max_ns / 1e9,
		       s->leaked_age_sum_ns / 1e9 / s->leaked_count);
	printf("), %llu temporary, %s memory", (unsigned long long)s->temporary,
	       human_bytes(s->mem_peak, b4, sizeof(b4)));
	if (s->live_end_count)
		printf(", %llu live at end (%s, %.3f s old at most)",
		       (unsigned long long)s->live_end_count,
		       human_bytes(s->live_end_bytes, b4, sizeof(b4)),
		       s->live_end_age_max_ns / 1e9);
}

static void print_site_text(int rank, const struct site *s, const struct site_frame *f, int n)
{
	char id[20];

	printf("  #%d  ", rank);
	print_cost_text(s);
	printf("  stack %s\n", stack_short_id(s->stack, id, sizeof(id)));
	print_frames_text(f, n, s->stack);
}

/* The numbers of a site or function as JSON keys, after @lead ("" or ","). */
static void print_cost_json(const char *lead, const struct site *s)
{
	char id[20];

	printf("%s\"stack\":%llu,\"stack_id\":\"%s\",\"peak_bytes\":%llu,\"alloc_count\":%llu"
	       ",\"allocated_bytes\":%llu,\"leaked_count\":%llu,\"leaked_bytes\":%llu"
	       ",\"leaked_age_max_ns\":%llu,\"leaked_age_mean_ns\":%llu,\"memory_bytes\":%llu"
	       ",\"temporary_count\":%llu,\"live_at_end_count\":%llu,\"live_at_end_bytes\":%llu"
	       ",\"live_at_end_age_max_ns\":%llu,\"live_at_end_age_mean_ns\":%llu",
	       lead, (unsigned long long)s->stack, stack_short_id(s->stack, id, sizeof(id)),
	       (unsigned long long)s->peak_bytes, (unsigned long long)s->allocs,
	       (unsigned long long)s->allocated_bytes, (unsigned long long)s->leaked_count,
	       (unsigned long long)s->leaked_bytes, (unsigned long long)s->leaked_age_max_ns,
	       (unsigned long long)(s->leaked_count ? s->leaked_age_sum_ns / s->leaked_count : 0),
	       (unsigned long long)s->mem_peak, (unsigned long long)s->temporary,
	       (unsigned long long)s->live_end_count, (unsigned long long)s->live_end_bytes,
	       (unsigned long long)s->live_end_age_max_ns,
	       (unsigned long long)(s->live_end_count ? s->live_end_age_sum_ns / s->live_end_count
						      : 0));
}

static void print_string_or_null(const char *key, const char *v)
{
	printf(",\"%s\":", key);
	if (v)
		json_print_string(stdout, v);
	else
		printf("null");
}

static void print_site_json(const struct site *s, const struct site_frame *f, int n,
			    const struct stack_table *st)
{
	const struct mt_stack *stack = stack_table_get(st, s->stack);
	char name[128];

	printf("{");
	print_cost_json("", s);
	printf(",\"truncated\":%s,\"frames\":[", stack && stack->truncated ? "true" : "false");
	for (int i = 0; i < n; i++) {
		printf("%s{\"function\":", i ? "," : "");
		json_print_string(stdout, site_frame_name(&f[i], name, sizeof(name)));
		print_string_or_null("file", f[i].file);
		printf(",\"line\":%u,\"inlined\":%s,\"python\":%s", f[i].line,
		       f[i].inlined ? "true" : "false", f[i].python ? "true" : "false");
		print_string_or_null("object", f[i].obj ? f[i].obj->path : NULL);
		printf(",\"addr\":%llu}", (unsigned long long)f[i].addr);
	}
	printf("]}");
}

/* The sites of @v[0..@k) under @key (JSON) or @title; frees @v. */
static int print_sites(struct top_ctx *c, const struct site **v, size_t k, const char *key,
		       const char *title, bool first)
{
	bool json = c->o->json;

	if (json)
		printf("%s\"%s\":[", first ? "" : ",", key);
	else
		printf("\ntop %zu call site%s by %s:\n", k, plural(k), title);
	for (size_t i = 0; v && i < k; i++) {
		int nf = callsite_expand(c->sym, c->st, v[i]->stack, c->f, SITE_MAX_FRAMES);

		if (nf < 0) {
			free(v);
			return -ENOMEM;
		}
		if (json) {
			printf("%s", i ? "," : "");
			print_site_json(v[i], c->f, nf, c->st);
		} else {
			print_site_text((int)i + 1, v[i], c->f, nf);
		}
	}
	if (json)
		printf("]");
	else if (!k)
		printf("  (none)\n");
	free(v);
	return 0;
}

/* One ranking of whole-stack sites. */
static int print_ranking(struct top_ctx *c, enum site_metric m, size_t n)
{
	size_t k = 0;
	const struct site **v = callsites_ranked(c->a, m, n, &k);

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	return print_sites(c, v, k, site_metric_name(m), titles[m], m == 0);
}

/* qsort order: the oldest leak first, then the lower stack id. */
static int by_leak_age(const void *pa, const void *pb)
{
	const struct site *a = *(const struct site *const *)pa,
			  *b = *(const struct site *const *)pb;

	if (a->leaked_age_max_ns != b->leaked_age_max_ns)
		return a->leaked_age_max_ns > b->leaked_age_max_ns ? -1 : 1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/*
 * The leaking sites by the age of their oldest leaked block ("leak_age"):
 * a steady leak's blocks span the run, a cache filled once has its blocks
 * all of one age, a burst at the end is young.
 */
static int print_leak_ages(struct top_ctx *c, size_t n)
{
	size_t k = 0;
	const struct site **v = callsites_ranked(c->a, SITE_LEAKED, 0, &k);

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	if (v) // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
		qsort(v, k, sizeof(*v), by_leak_age);
	if (n && k > n)
		k = n;
	return print_sites(c, v, k, "leak_age", "leak age (the oldest leaked block)", false);
}

/* @m's value of @s as text: "11.7 KiB at peak", "3 allocations"... */
static const char *metric_text(enum site_metric m, const struct site *s, char *buf, size_t len)
{
	char b[32];
	uint64_t v = site_value(s, m);

	switch (m) {
	case SITE_ALLOCATIONS:
		snprintf(buf, len, "%llu allocation%s", (unsigned long long)v, plural(v));
		break;
	case SITE_TEMPORARY: snprintf(buf, len, "%llu temporary", (unsigned long long)v); break;
	case SITE_PEAK: snprintf(buf, len, "%s at peak", human_bytes(v, b, sizeof(b))); break;
	case SITE_ALLOCATED:
		snprintf(buf, len, "%s allocated", human_bytes(v, b, sizeof(b)));
		break;
	case SITE_LEAKED: snprintf(buf, len, "%s leaked", human_bytes(v, b, sizeof(b))); break;
	case SITE_LIVE_END:
		snprintf(buf, len, "%s live at end", human_bytes(v, b, sizeof(b)));
		break;
	default: snprintf(buf, len, "%s memory", human_bytes(v, b, sizeof(b))); break;
	}
	return buf;
}

static void print_where_text(const char *name, const struct mt_object *obj, const char *file)
{
	fputs_printable(name, stdout);
	fputs("  [", stdout);
	fputs_printable(obj ? path_base(obj->path) : "?", stdout);
	fputs("]", stdout);
	if (file) {
		fputs("  ", stdout);
		fputs_printable(file, stdout);
	}
}

static void print_fn_text(int rank, const struct fn_entry *e, enum site_metric m,
			  const struct fn_caller **cv, size_t nc)
{
	char id[20], val[64];

	printf("  #%d  ", rank);
	print_where_text(e->name, e->obj, e->file);
	printf("\n      ");
	print_cost_text(&e->cost);
	printf("; %llu stack%s, heaviest %s\n", (unsigned long long)e->nsites, plural(e->nsites),
	       stack_short_id(e->cost.stack, id, sizeof(id)));
	for (size_t i = 0; i < nc && i < TEXT_CALLERS; i++) {
		printf("      %s from ", metric_text(m, &cv[i]->cost, val, sizeof(val)));
		print_where_text(cv[i]->name, cv[i]->obj, NULL);
		printf("\n");
	}
	if (nc > TEXT_CALLERS)
		printf("      ... and %zu more caller%s\n", nc - TEXT_CALLERS,
		       plural(nc - TEXT_CALLERS));
}

static void print_fn_json(const struct fn_entry *e, const struct fn_caller **cv, size_t nc)
{
	printf("{\"function\":");
	json_print_string(stdout, e->name);
	print_string_or_null("file", e->file);
	print_string_or_null("object", e->obj ? e->obj->path : NULL);
	printf(",\"sites\":%llu", (unsigned long long)e->nsites);
	print_cost_json(",", &e->cost);
	printf(",\"callers_total\":%zu,\"callers\":[", nc);
	for (size_t i = 0; i < nc && i < JSON_CALLERS; i++) {
		printf("%s{\"function\":", i ? "," : "");
		json_print_string(stdout, cv[i]->name);
		print_string_or_null("object", cv[i]->obj ? cv[i]->obj->path : NULL);
		print_cost_json(",", &cv[i]->cost);
		printf("}");
	}
	printf("]}");
}

/* One ranking of functions, each with its callers by the same metric. */
static int print_fn_ranking(struct top_ctx *c, enum site_metric m, size_t n)
{
	size_t k = 0, nc;
	const struct fn_entry **v = fn_ranked(&c->fns, m, n, &k);
	bool json = c->o->json;

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	if (json)
		printf("%s\"%s\":[", m ? "," : "", site_metric_name(m));
	else
		printf("\ntop %zu function%s by %s:\n", k, plural(k), titles[m]);
	for (size_t i = 0; v && i < k; i++) {
		const struct fn_caller **cv = fn_callers_ranked(v[i], m, 0, &nc);

		if (!cv && errno == ENOMEM) {
			free(v);
			return -ENOMEM;
		}
		if (json) {
			printf("%s", i ? "," : "");
			print_fn_json(v[i], cv, nc);
		} else {
			print_fn_text((int)i + 1, v[i], m, cv, nc);
		}
		free(cv);
	}
	if (json)
		printf("]");
	else if (!k)
		printf("  (none)\n");
	free(v);
	return 0;
}

static int print_truncated(const struct stack_table *st, bool json)
{
	size_t n = 0;
	struct truncated_by_object *t = callsites_truncated(st, &n);

	if (!t && st->truncated)
		return -ENOMEM;
	if (json)
		printf(",\"truncated_stacks\":{\"count\":%llu,\"stacks\":%llu,\"objects\":[",
		       (unsigned long long)st->truncated, (unsigned long long)st->nstacks);
	else
		printf("\ntruncated stacks: %llu of %llu\n", (unsigned long long)st->truncated,
		       (unsigned long long)st->nstacks);
	for (size_t i = 0; t && i < n; i++) {
		const struct mt_object *o = stack_table_object(st, t[i].object);
		const char *where = o ? o->path : "no known file (JIT, vdso or anonymous memory)";

		if (json) {
			printf("%s{\"object\":", i ? "," : "");
			if (o)
				json_print_string(stdout, o->path);
			else
				printf("null");
			printf(",\"count\":%llu}", (unsigned long long)t[i].stacks);
		} else {
			printf("  %8llu  ending in ", (unsigned long long)t[i].stacks);
			fputs_printable(where, stdout);
			fputs("\n", stdout);
		}
	}
	if (json)
		printf("]}");
	free(t);
	return 0;
}

/* Whether ranking @m is printed: live_at_end in text for an attach only. */
static bool shown(const struct top_ctx *c, enum site_metric m)
{
	return m != SITE_LIVE_END || c->o->json || c->a->attached;
}

/* The site rankings: JSON's "top" value, or the text of --by stack. */
static int print_site_rankings(struct top_ctx *c)
{
	int err = 0;

	if (c->o->json)
		printf("{");
	for (int m = 0; m < SITE_NMETRICS && !err; m++)
		if (shown(c, m))
			err = print_ranking(c, m, c->o->n);
	if (!err)
		err = print_leak_ages(c, c->o->n);
	if (c->o->json && !err)
		printf("}");
	return err;
}

/* The function rankings: JSON's "functions" value, or the text of --by function. */
static int print_fn_rankings(struct top_ctx *c)
{
	int err = fn_table_build(&c->fns, c->a, c->st, c->sym);

	if (c->o->json && !err)
		printf("{");
	for (int m = 0; m < SITE_NMETRICS && !err; m++)
		if (shown(c, m))
			err = print_fn_ranking(c, m, c->o->n);
	if (c->o->json && !err)
		printf("}");
	return err;
}

int report_top_print(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		     const struct top_opts *o)
{
	struct top_ctx c = { .a = a, .st = st, .sym = sym, .o = o };
	int err = 0;

	c.f = calloc(SITE_MAX_FRAMES, sizeof(*c.f));
	if (!c.f)
		return -ENOMEM;
	if (o->json) { /* "top", then "truncated_stacks", then "functions" */
		err = print_site_rankings(&c);
		if (!err)
			err = print_truncated(st, true);
		if (!err)
			printf(",\"functions\":");
		if (!err)
			err = print_fn_rankings(&c);
	} else {
		err = o->by_stack ? print_site_rankings(&c) : print_fn_rankings(&c);
		if (!err)
			err = print_truncated(st, false);
	}
	fn_table_release(&c.fns);
	free(c.f);
	return err;
}

int report_top_print_peak(const struct analysis *a, const struct stack_table *st,
			  struct symbolizer *sym, const struct top_opts *o)
{
	struct top_ctx c = { .a = a, .st = st, .sym = sym, .o = o };
	int err;

	c.f = calloc(SITE_MAX_FRAMES, sizeof(*c.f));
	if (!c.f)
		return -ENOMEM;
	if (o->by_stack) {
		err = print_ranking(&c, SITE_PEAK, o->n);
	} else {
		err = fn_table_build(&c.fns, a, st, sym);
		if (!err)
			err = print_fn_ranking(&c, SITE_PEAK, o->n);
	}
	if (!err)
		printf("  (memtrack report --top N: more %s and rankings)\n",
		       o->by_stack ? "sites" : "functions");
	fn_table_release(&c.fns);
	free(c.f);
	return err;
}

#define MAX_REFUSED_SHOWN 10 /* a crafted artifact may name thousands of FIFOs */

static void warn_refused(void *ctx, const char *path, const char *why)
{
	unsigned *shown = ctx;
	char p[PRINTABLE_LEN(MT_PATH_MAX)];

	if (++*shown > MAX_REFUSED_SHOWN) {
		if (*shown == MAX_REFUSED_SHOWN + 1)
			die_msg("warning: more of the recorded binaries are refused; their frames are left unresolved too");
		return;
	}
	die_msg("warning: '%s' %s, so its frames are left unresolved (put the recorded binary back there to resolve them)",
		printable(path, p, sizeof(p)), why);
}

struct symbolizer *cli_symbolizer_new(void)
{
	static unsigned shown; /* one symbolizer per command */
	struct symbolizer_opts o = { .notice = warn_refused, .notice_ctx = &shown };

	return symbolizer__new(&o);
}
