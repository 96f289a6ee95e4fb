// SPDX-License-Identifier: MIT
/* report_top.c - the call-site rankings of `report --top N`; see report_top.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "analyze/callsites.h"
#include "cli/cli.h"
#include "format/json.h"
#include "cli/report_top.h"

static const char *const titles[SITE_NMETRICS] = {
	"peak heap (bytes live at the tree's heap peak)",
	"allocations",
	"allocated bytes",
	"leaked bytes",
	"memory (heap + mapped bytes at the tree's memory peak)",
};

static void print_frames_text(const struct site_frame *f, int n, uint64_t stack)
{
	char name[128];

	if (n <= 0 && stack) { /* its record was lost (dropped events) or the file cut */
		printf("      (stack %llu has no record in the file)\n", (unsigned long long)stack);
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
		fputs_printable(f[i].obj ? path_base(f[i].obj->path) : "?", stdout);
		printf("]%s\n", f[i].inlined ? " (inlined)" : "");
	}
}

static void print_site_text(int rank, const struct site *s, const struct site_frame *f, int n)
{
	char b1[32], b2[32], b3[32];

	char b4[32];

	printf("  #%d  %s at peak, %llu allocations, %s allocated, %llu leaked (%s", rank,
	       human_bytes(s->peak_bytes, b1, sizeof(b1)), (unsigned long long)s->allocs,
	       human_bytes(s->allocated_bytes, b2, sizeof(b2)), (unsigned long long)s->leaked_count,
	       human_bytes(s->leaked_bytes, b3, sizeof(b3)));
	if (s->leaked_count)
		printf(", %.3f s old at most, %.3f s on average", s->leaked_age_max_ns / 1e9,
		       s->leaked_age_sum_ns / 1e9 / s->leaked_count);
	printf("), %s memory  stack %llu\n", human_bytes(s->mem_peak, b4, sizeof(b4)),
	       (unsigned long long)s->stack);
	print_frames_text(f, n, s->stack);
}

static void print_site_json(const struct site *s, const struct site_frame *f, int n,
			    const struct stack_table *st)
{
	const struct mt_stack *stack = stack_table_get(st, s->stack);
	char name[128];

	printf("{\"stack\":%llu,\"peak_bytes\":%llu,\"alloc_count\":%llu,\"allocated_bytes\":%llu"
	       ",\"leaked_count\":%llu,\"leaked_bytes\":%llu,\"leaked_age_max_ns\":%llu"
	       ",\"leaked_age_mean_ns\":%llu,\"memory_bytes\":%llu,\"truncated\":%s,\"frames\":[",
	       (unsigned long long)s->stack, (unsigned long long)s->peak_bytes,
	       (unsigned long long)s->allocs, (unsigned long long)s->allocated_bytes,
	       (unsigned long long)s->leaked_count, (unsigned long long)s->leaked_bytes,
	       (unsigned long long)s->leaked_age_max_ns,
	       (unsigned long long)(s->leaked_count ? s->leaked_age_sum_ns / s->leaked_count : 0),
	       (unsigned long long)s->mem_peak, stack && stack->truncated ? "true" : "false");
	for (int i = 0; i < n; i++) {
		printf("%s{\"function\":", i ? "," : "");
		json_print_string(stdout, site_frame_name(&f[i], name, sizeof(name)));
		printf(",\"file\":");
		if (f[i].file)
			json_print_string(stdout, f[i].file);
		else
			printf("null");
		printf(",\"line\":%u,\"inlined\":%s,\"object\":", f[i].line,
		       f[i].inlined ? "true" : "false");
		if (f[i].obj)
			json_print_string(stdout, f[i].obj->path);
		else
			printf("null");
		printf(",\"addr\":%llu}", (unsigned long long)f[i].addr);
	}
	printf("]}");
}

/* The sites of @v[0..@k) under @key (JSON) or @title; frees @v.  @f: scratch frames. */
static int print_sites(const struct site **v, size_t k, const char *key, const char *title,
		       bool first, const struct stack_table *st, struct symbolizer *sym, bool json,
		       struct site_frame *f)
{
	if (json)
		printf("%s\"%s\":[", first ? "" : ",", key);
	else
		printf("\ntop %zu call site%s by %s:\n", k, k == 1 ? "" : "s", title);
	for (size_t i = 0; v && i < k; i++) {
		int nf = callsite_expand(sym, st, v[i]->stack, f, SITE_MAX_FRAMES);

		if (nf < 0) {
			free(v);
			return -ENOMEM;
		}
		if (json) {
			printf("%s", i ? "," : "");
			print_site_json(v[i], f, nf, st);
		} else {
			print_site_text((int)i + 1, v[i], f, nf);
		}
	}
	if (json)
		printf("]");
	else if (!k)
		printf("  (none)\n");
	free(v);
	return 0;
}

/* One ranking; @f is scratch space for SITE_MAX_FRAMES frames. */
static int print_ranking(const struct analysis *a, const struct stack_table *st,
			 struct symbolizer *sym, enum site_metric m, size_t n, bool json,
			 struct site_frame *f)
{
	size_t k = 0;
	const struct site **v = callsites_ranked(a, m, n, &k);

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	return print_sites(v, k, site_metric_name(m), titles[m], m == 0, st, sym, json, f);
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
static int print_leak_ages(const struct analysis *a, const struct stack_table *st,
			   struct symbolizer *sym, size_t n, bool json, struct site_frame *f)
{
	size_t k = 0;
	const struct site **v = callsites_ranked(a, SITE_LEAKED, 0, &k);

	if (!v && errno == ENOMEM)
		return -ENOMEM;
	if (v) // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
		qsort(v, k, sizeof(*v), by_leak_age);
	if (n && k > n)
		k = n;
	return print_sites(v, k, "leak_age", "leak age (the oldest leaked block)", false, st, sym,
			   json, f);
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

int report_top_print(const struct analysis *a, const struct stack_table *st, struct symbolizer *sym,
		     size_t n, bool json)
{
	struct site_frame *f = calloc(SITE_MAX_FRAMES, sizeof(*f));
	int err = 0;

	if (!f)
		return -ENOMEM;
	if (json)
		printf("{");
	for (int m = 0; m < SITE_NMETRICS && !err; m++)
		err = print_ranking(a, st, sym, m, n, json, f);
	if (!err)
		err = print_leak_ages(a, st, sym, n, json, f);
	if (json && !err)
		printf("}");
	if (!err)
		err = print_truncated(st, json);
	free(f);
	return err;
}

int report_top_print_peak(const struct analysis *a, const struct stack_table *st,
			  struct symbolizer *sym, size_t n)
{
	struct site_frame *f = calloc(SITE_MAX_FRAMES, sizeof(*f));
	int err;

	if (!f)
		return -ENOMEM;
	err = print_ranking(a, st, sym, SITE_PEAK, n, false, f);
	if (!err)
		printf("  (memtrack report --top N: more sites and rankings)\n");
	free(f);
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
