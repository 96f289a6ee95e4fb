// SPDX-License-Identifier: MIT
/*
 * report_html.c - report --html's page; see report_html.h.  This file
 * writes the page's skeleton and its data (one JSON object); the layout,
 * tables, flame graph and sorting are the page's script, report_page.js,
 * styled by report_page.css, both embedded here as written in the tree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/callsites.h"
#include "analyze/flamegraph.h"
#include "analyze/functions.h"
#include "analyze/report_html.h"
#include "format/json.h"
#include "format/schema.h"

/*
 * The page's style and script, NUL-terminated: kept as .css and .js files
 * (read, linted and diffed as what they are) rather than C string literals.
 * Paths are relative to the top of the tree, where make runs the compiler;
 * the Makefile makes this object depend on both files.
 */
__asm__(".pushsection .rodata\n"
	".globl mt_report_page_css\n.hidden mt_report_page_css\n"
	"mt_report_page_css:\n.incbin \"src/analyze/report_page.css\"\n.byte 0\n"
	".globl mt_report_page_js\n.hidden mt_report_page_js\n"
	"mt_report_page_js:\n.incbin \"src/analyze/report_page.js\"\n.byte 0\n"
	".popsection\n");
extern const char mt_report_page_css[], mt_report_page_js[];

#define SITES_PER_METRIC 100 /* the page keeps the top sites (and functions) of each ranking */
#define CALLERS_SHOWN 12     /* callers of a function the page lists */
#define PAGE_FRAMES 64	     /* frames of a stack the page shows */
#define FLAME_MIN_SHARE 1e-6 /* narrower flame graph frames are left out */

static void jstr(FILE *out, const char *s)
{
	json_print_string_html(out, s ? s : "");
}

static void jkey_u64(FILE *out, const char *key, uint64_t v)
{
	fprintf(out, ",\"%s\":%" PRIu64, key, v);
}

/* The run's numbers, for the summary cards and the details. */
static void write_summary(const struct report_html_in *in, FILE *out)
{
	const struct analysis *a = in->a;

	fprintf(out, "\"command\":");
	jstr(out, in->command);
	fprintf(out, ",\"kernel\":");
	jstr(out, in->kernel);
	fprintf(out, ",\"attached\":%s,\"truncated\":%s,\"stacks\":%s,\"rss\":%s,\"physical\":%s",
		in->attached ? "true" : "false", in->truncated ? "true" : "false",
		in->st ? "true" : "false", a->has_rss ? "true" : "false",
		in->meta->physical ? "true" : "false");
	if (in->has_exit)
		fprintf(out, ",\"exit\":{\"code\":%d,\"signal\":%d}", in->exit_code,
			in->exit_signal);
	jkey_u64(out, "duration_ns", in->duration_ns);
	jkey_u64(out, "dropped", in->dropped);
	jkey_u64(out, "alloc_count", a->alloc_count);
	jkey_u64(out, "total_allocated_bytes", a->total_allocated_bytes);
	jkey_u64(out, "free_count", a->free_count);
	jkey_u64(out, "unknown_free_count", a->unknown_free_count);
	jkey_u64(out, "peak_heap_bytes", a->peak_live_bytes);
	jkey_u64(out, "peak_heap_ns",
		 a->peak_live_ts > in->start_ns ? a->peak_live_ts - in->start_ns : 0);
	jkey_u64(out, "peak_rss_bytes", a->peak_rss_bytes);
	jkey_u64(out, "peak_rss_ns",
		 a->peak_rss_ts > in->start_ns ? a->peak_rss_ts - in->start_ns : 0);
	jkey_u64(out, "peak_mapped_bytes", a->peak_mapped_bytes);
	jkey_u64(out, "peak_memory_bytes", a->peak_memory_bytes);
	jkey_u64(out, "peak_physical_bytes", a->peak_physical_bytes);
	jkey_u64(out, "leaked_count", a->leaked_count);
	jkey_u64(out, "leaked_bytes", a->leaked_bytes);
	jkey_u64(out, "leaked_mapped_bytes", a->leaked_mapped_bytes);
	jkey_u64(out, "temporary_count", a->temporary_count);
	jkey_u64(out, "live_end_count", a->live_end_count);
	jkey_u64(out, "live_end_bytes", a->live_end_bytes);
	jkey_u64(out, "live_end_procs", a->live_end_procs);
	fprintf(out, ",\"sizes\":[");
	for (unsigned b = 0, first = 1; b < SIZE_BUCKETS; b++) {
		if (!a->sizes.count[b])
			continue;
		fprintf(out, "%s[\"%" PRIu64 "\",\"%" PRIu64 "\",%" PRIu64 ",%" PRIu64 "]",
			first ? "" : ",", size_bucket_min(b), size_bucket_max(b), a->sizes.count[b],
			a->sizes.bytes[b]);
		first = 0;
	}
	fprintf(out, "],\"events\":{");
	for (unsigned t = 1, first = 1; t < MT_TYPE_MAX; t++) {
		if (!a->events[t])
			continue;
		fprintf(out, "%s\"%s\":%" PRIu64, first ? "" : ",", mt_type_def(t)->name,
			a->events[t]);
		first = 0;
	}
	fprintf(out, "},\"marks\":[");
	for (unsigned i = 0; i < a->nmarks; i++) {
		fprintf(out, "%s{\"name\":", i ? "," : "");
		jstr(out, a->marks[i].name);
		fprintf(out, ",\"ns\":%" PRIu64 ",\"pid\":%u}",
			a->marks[i].ts > in->start_ns ? a->marks[i].ts - in->start_ns : 0,
			a->marks[i].pid);
	}
	fprintf(out, "]");
}

static void write_processes(const struct analysis *a, FILE *out)
{
	fprintf(out, ",\"processes\":[");
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct proc_summary *p = &a->procs[i];

		fprintf(out, "%s{\"pid\":%u,\"ppid\":%u,\"command\":", i ? ",\n" : "", p->pid,
			p->ppid);
		jstr(out, p->command);
		jkey_u64(out, "allocs", p->allocs);
		jkey_u64(out, "allocated", p->allocated_bytes);
		jkey_u64(out, "peak_heap", p->peak_heap_bytes);
		jkey_u64(out, "peak_rss", p->peak_rss_bytes);
		jkey_u64(out, "peak_mapped", p->peak_mapped_bytes);
		jkey_u64(out, "leaked", p->leaked_bytes);
		jkey_u64(out, "leaked_count", p->leaked_count);
		jkey_u64(out, "temporary", p->temporary);
		jkey_u64(out, "live_end", p->live_end_bytes);
		if (p->exited)
			fprintf(out, ",\"exit_code\":%" PRId64 ",\"exit_signal\":%u", p->exit_code,
				p->exit_signal);
		fprintf(out, "}");
	}
	fprintf(out, "]");
}

/* The numbers of a site, or the sums of a function's or a caller's. */
static void write_cost(const struct site *s, FILE *out)
{
	jkey_u64(out, "peak", s->peak_bytes);
	jkey_u64(out, "allocs", s->allocs);
	jkey_u64(out, "allocated", s->allocated_bytes);
	jkey_u64(out, "leaked", s->leaked_bytes);
	jkey_u64(out, "leaked_count", s->leaked_count);
	jkey_u64(out, "age_max_ns", s->leaked_age_max_ns);
	jkey_u64(out, "age_mean_ns", s->leaked_count ? s->leaked_age_sum_ns / s->leaked_count : 0);
	jkey_u64(out, "memory", s->mem_peak);
	jkey_u64(out, "temporary", s->temporary);
}

/*
 * One site: its numbers, its first PAGE_FRAMES frames ([function, file,
 * line, object, inlined]) and "fn", the index of the first frame outside
 * the allocator (functions.h): the function the page names it by.
 */
static int write_site(const struct report_html_in *in, const struct site *s, struct site_frame *f,
		      bool first, FILE *out)
{
	int n = callsite_expand(in->sym, in->st, s->stack, f, SITE_MAX_FRAMES), fn = 0;
	char name[128];

	if (n < 0)
		return n;
	while (fn < n - 1 && fn < PAGE_FRAMES - 1 && frame_is_allocator(&f[fn]))
		fn++;
	fprintf(out, "%s{\"stack\":\"%" PRIu64 "\"", first ? "" : ",\n", s->stack);
	write_cost(s, out);
	fprintf(out, ",\"fn\":%d,\"nframes\":%d,\"frames\":[", fn, n);
	for (int i = 0; i < n && i < PAGE_FRAMES; i++) {
		fprintf(out, "%s[", i ? "," : "");
		jstr(out, site_frame_name(&f[i], name, sizeof(name)));
		fputc(',', out);
		jstr(out, f[i].file);
		fprintf(out, ",%u,", f[i].line);
		jstr(out, f[i].obj ? path_base(f[i].obj->path) : "");
		fprintf(out, ",%d]", f[i].inlined);
	}
	fprintf(out, "]}");
	return 0;
}

/*
 * The sites the page's tables show: the top SITES_PER_METRIC of every
 * ranking (so each table, sorted by any column, starts right), each once.
 */
static int write_sites(const struct report_html_in *in, FILE *out)
{
	struct site_frame *f = NULL;
	uint8_t *taken = NULL;
	int err = -ENOMEM;
	bool first = true;

	fprintf(out, ",\"sites\":[");
	if (!in->st || !in->a->sites.nsites)
		goto done;
	f = calloc(SITE_MAX_FRAMES, sizeof(*f));
	taken = calloc(in->a->sites.nsites, 1);
	if (!f || !taken)
		goto out;
	for (int m = 0; m < SITE_NMETRICS; m++) {
		size_t k = 0;
		const struct site **v = callsites_ranked(in->a, m, SITES_PER_METRIC, &k);

		if (!v && errno == ENOMEM)
			goto out;
		for (size_t i = 0; v && i < k; i++) {
			size_t at = (size_t)(v[i] - in->a->sites.sites);

			if (taken[at])
				continue;
			taken[at] = 1;
			err = write_site(in, v[i], f, first, out);
			if (err) {
				free(v);
				goto out;
			}
			first = false;
		}
		free(v);
	}
done:
	fprintf(out, "]");
	err = 0;
out:
	free(taken);
	free(f);
	return err;
}

/* One function (functions.h) with its heaviest callers. */
static int write_function(const struct fn_entry *e, bool first, FILE *out)
{
	size_t k = 0;
	const struct fn_caller **c = fn_callers_ranked(e, SITE_PEAK, 0, &k);

	if (!c && errno == ENOMEM)
		return -ENOMEM;
	fprintf(out, "%s{\"name\":", first ? "" : ",\n");
	jstr(out, e->name);
	fprintf(out, ",\"file\":");
	jstr(out, e->file);
	fprintf(out, ",\"obj\":");
	jstr(out, e->obj ? path_base(e->obj->path) : "");
	write_cost(&e->cost, out);
	fprintf(out, ",\"nsites\":%" PRIu64 ",\"ncallers\":%" PRIu64 ",\"callers\":[", e->nsites,
		e->ncallers);
	for (size_t i = 0; c && i < k && i < CALLERS_SHOWN; i++) {
		fprintf(out, "%s{\"name\":", i ? "," : "");
		jstr(out, c[i]->name);
		write_cost(&c[i]->cost, out);
		fprintf(out, "}");
	}
	fprintf(out, "]}");
	free(c);
	return 0;
}

/* The top SITES_PER_METRIC functions of every ranking, each once. */
static int write_functions(const struct report_html_in *in, FILE *out)
{
	struct fn_table t;
	uint8_t *taken = NULL;
	bool first = true;
	int err;

	fprintf(out, ",\"functions\":[");
	if (!in->st) {
		fprintf(out, "]");
		return 0;
	}
	err = fn_table_build(&t, in->a, in->st, in->sym);
	if (!err && !(taken = calloc(t.nfns ? t.nfns : 1, 1)))
		err = -ENOMEM;
	for (int m = 0; !err && m < SITE_NMETRICS; m++) {
		size_t k = 0;
		const struct fn_entry **v = fn_ranked(&t, m, SITES_PER_METRIC, &k);

		if (!v && errno == ENOMEM)
			err = -ENOMEM;
		for (size_t i = 0; v && !err && i < k; i++) {
			size_t at = (size_t)(v[i] - t.fns);

			if (taken[at])
				continue;
			taken[at] = 1;
			err = write_function(v[i], first, out);
			first = false;
		}
		free(v);
	}
	fprintf(out, "]");
	free(taken);
	fn_table_release(&t);
	return err;
}

/* Pre-order [depth, name index, value] triples of the nodes under @n wide enough to keep. */
struct flame_out {
	const struct flame *f;
	FILE *out;
	uint64_t min;	    /* narrower nodes are left out */
	const char **names; /* names[i]: the i-th distinct name written */
	uint32_t *slot;	    /* open addressing: name pointer -> index + 1 */
	uint32_t nslots;    /* power of two */
	uint32_t nnames;
	bool first;
};

static uint32_t name_index(struct flame_out *o, const char *name)
{
	uint32_t h = (uint32_t)(((uintptr_t)name >> 3) * 2654435761u) & (o->nslots - 1);

	while (o->slot[h] && o->names[o->slot[h] - 1] != name)
		h = (h + 1) & (o->nslots - 1);
	if (!o->slot[h]) {
		o->names[o->nnames] = name;
		o->slot[h] = ++o->nnames;
	}
	return o->slot[h] - 1;
}

static void flame_nodes(struct flame_out *o, uint32_t n, uint32_t depth)
{
	const struct flame_node *node = &o->f->nodes[n];

	if (node->value < o->min)
		return;
	fprintf(o->out, "%s%u,%u,%" PRIu64, o->first ? "" : ",", depth, name_index(o, node->name),
		node->value);
	o->first = false;
	for (uint32_t k = node->first_child; k; k = o->f->nodes[k].next_sibling)
		flame_nodes(o, k, depth + 1);
}

/* "METRIC":{"names":[..],"nodes":[depth,name,value,...]} of one metric's tree. */
static int write_flame_metric(const struct report_html_in *in, enum site_metric m, FILE *out)
{
	struct flame f;
	struct flame_out o = { .f = &f, .out = out, .first = true };
	int err = flame_build(&f, in->a, in->st, in->sym, m);

	if (err)
		goto out;
	err = -ENOMEM;
	for (o.nslots = 16; o.nslots < 2 * f.nnodes; o.nslots *= 2)
		;
	o.slot = calloc(o.nslots, sizeof(*o.slot));
	o.names = calloc(f.nnodes + 1, sizeof(*o.names));
	if (!o.slot || !o.names)
		goto out;
	o.min = (uint64_t)(f.nodes[0].value * FLAME_MIN_SHARE);
	if (!o.min)
		o.min = 1;
	fprintf(out, "%s\"%s\":{\"nodes\":[", m ? ",\n" : "", site_metric_name(m));
	if (f.nodes[0].value)
		flame_nodes(&o, 0, 0);
	fprintf(out, "],\"names\":[");
	for (uint32_t i = 0; i < o.nnames; i++) {
		fprintf(out, "%s", i ? "," : "");
		jstr(out, o.names[i]);
	}
	fprintf(out, "]}");
	err = 0;
out:
	free(o.slot);
	free(o.names);
	flame_release(&f);
	return err;
}

static int write_flames(const struct report_html_in *in, FILE *out)
{
	int err = 0;

	fprintf(out, ",\"flame\":{");
	for (int m = 0; in->st && m < SITE_NMETRICS && !err; m++)
		err = write_flame_metric(in, m, out);
	fprintf(out, "}");
	return err;
}

/* The sections, each filled by the script from the data; the timeline is drawn here. */
static int write_body(const struct report_html_in *in, FILE *out)
{
	int err;

	fprintf(out,
		"<header id=\"top\"><div class=\"brand\">memtrack</div><div id=\"cmd\"></div>"
		"<div id=\"runinfo\"></div></header>\n"
		"<nav id=\"nav\"></nav>\n<main>\n"
		"<section id=\"summary\"><div id=\"cards\"></div><div id=\"topsite\"></div></section>\n"
		"<section id=\"timeline-section\"><h2>Memory over time</h2>\n");
	err = timeline_write_html_section(in->tl, in->meta, out);
	if (err)
		return err;
	fprintf(out,
		"</section>\n"
		"<section id=\"functions\"><h2>Top functions</h2><div class=\"body\"></div></section>\n"
		"<section id=\"sites\"><h2>Call sites</h2><div class=\"body\"></div></section>\n"
		"<section id=\"flame\"><h2>Flame graph</h2><div class=\"body\"></div></section>\n"
		"<section id=\"leaks\"><h2>Leaks</h2><div class=\"body\"></div></section>\n"
		"<section id=\"temporary\"><h2>Temporary allocations</h2><div class=\"body\"></div></section>\n"
		"<section id=\"sizes\"><h2>Allocation sizes</h2><div class=\"body\"></div></section>\n"
		"<section id=\"processes\"><h2>Processes</h2><div class=\"body\"></div></section>\n"
		"<section id=\"details\"><h2>Details</h2><div class=\"body\"></div></section>\n"
		"</main>\n<div id=\"ftip\"></div>\n");
	return 0;
}

int report_html_write(const struct report_html_in *in, FILE *out)
{
	int err;

	/* the title names the command once the script ran (it escapes nothing by hand) */
	fprintf(out,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		"<meta name=\"viewport\" content=\"width=device-width\">\n<title>memtrack report</title>\n"
		"<style>\n%s</style>\n</head><body>\n",
		mt_report_page_css);
	err = write_body(in, out);
	if (err)
		return err;
	fprintf(out, "<script type=\"application/json\" id=\"mt-data\">{");
	write_summary(in, out);
	write_processes(in->a, out);
	err = write_sites(in, out);
	if (!err)
		err = write_functions(in, out);
	if (!err)
		err = write_flames(in, out);
	if (err)
		return err;
	fprintf(out, "}</script>\n<script>\n%s</script>\n</body></html>\n", mt_report_page_js);
	return 0;
}
