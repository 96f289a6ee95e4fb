// SPDX-License-Identifier: MIT
/*
 * cmd_diff.c - `memtrack diff BASE NEW [--json] [--fail-above PCT]
 * [--metric NAME]... [--top N] [--by function|stack]`: metric by metric,
 * tree and matched processes, then (--top) the call sites that changed
 * most (diff_top.c); exit 1 when a gated metric, or a gated function's or
 * stack's metric, grew beyond PCT, so a CI job can gate on memory.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "analyze/diff.h"
#include "analyze/filter.h"
#include "cli/diff_top.h"
#include "cli/help.h"
#include "format/json.h"
#include "analyze/load.h"
#include "cli/report_top.h"

#define DIFF_USAGE                                                                                \
	"usage: memtrack diff BASE NEW [--json] [--fail-above PCT] [--metric NAME]... [--top N] " \
	"[--by function|stack] [--pid PID] [--comm NAME]; see memtrack help diff"

struct diff_opts {
	const char *base, *new;
	bool json;
	bool gate;		    /* --fail-above given */
	double fail_above;	    /* percent */
	bool chosen[DIFF_NMETRICS]; /* --metric; none given: all */
	bool any_chosen;
	struct diff_top_opts top;     /* --top, --by, --metric function:M / stack:M */
	struct proc_filter filter[2]; /* --pid, --comm: [0] parsed, [1] its copy for NEW */
};

static int parse_args(int argc, char **argv, struct diff_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		char *end;
		int m = cli_top_arg(argc, argv, &i, &o->top.top, &o->top.by_stack);

		if (!m)
			m = cli_filter_arg(&o->filter[0], argc, argv, &i);
		if (m < 0)
			return -EINVAL;
		if (m)
			continue;
		if (!strcmp(arg, "--json")) {
			o->json = o->top.json = true;
		} else if (!strcmp(arg, "--fail-above") || !strcmp(arg, "--metric")) {
			if (i + 1 == argc) {
				die_msg("%s needs a value; " DIFF_USAGE, arg);
				return -EINVAL;
			}
			if (!strcmp(arg, "--metric")) {
				m = diff_top_metric(&o->top, argv[++i]);
				if (!m)
					m = diff_metric_lookup(argv[i]) < 0 ? -EINVAL : 0;
				if (m < 0) {
					die_msg("unknown metric '%s'; use peak_heap_bytes, total_allocated_bytes, alloc_count, leaked_bytes, peak_rss_bytes, peak_physical_bytes, peak_mapped_bytes, peak_memory_bytes, mapped_count or leaked_mapped_bytes, or function:M or stack:M with M peak, allocations, allocated, leaked, memory, temporary or live_at_end",
						argv[i]);
					return -EINVAL;
				}
				if (!m)
					o->chosen[diff_metric_lookup(argv[i])] = true;
				o->any_chosen = true;
				continue;
			}
			o->fail_above = strtod(argv[++i], &end);
			if (end == argv[i] || *end || !isfinite(o->fail_above) ||
			    o->fail_above < 0) {
				die_msg("--fail-above takes a percentage >= 0 (e.g. 5 or 2.5), not '%s'",
					argv[i]);
				return -EINVAL;
			}
			o->gate = o->top.gate = true;
			o->top.fail_above = o->fail_above;
		} else if (arg[0] == '-' && arg[1]) {
			die_msg("unknown option '%s'; " DIFF_USAGE, arg);
			return -EINVAL;
		} else if (!o->base) {
			o->base = arg;
		} else if (!o->new) {
			o->new = arg;
		} else {
			die_msg("too many files ('%s'); " DIFF_USAGE, arg);
			return -EINVAL;
		}
	}
	if (!o->new) {
		die_msg("diff needs two artifacts; " DIFF_USAGE);
		return -EINVAL;
	}
	if (!o->any_chosen)
		for (int m = 0; m < DIFF_NMETRICS; m++)
			o->chosen[m] = true;
	proc_filter_init_like(&o->filter[1], &o->filter[0]);
	return 0;
}

/* One metric's row; byte counts in KiB/MiB as report prints them (JSON keeps bytes). */
static void print_value_text(const char *name, const struct diff_value *v, const char *verdict)
{
	size_t len = strlen(name);
	struct diff_cells c;

	if (!v->known) {
		printf("  %-22s %14s %14s  (not recorded in both)\n", name, "-", "-");
		return;
	}
	diff_value_cells(v, len > 6 && !strcmp(name + len - 6, "_bytes"), &c);
	printf("  %-22s %14s %14s %14s %8s%s\n", name, c.base, c.new, c.change, c.pct, verdict);
}

/* --sample-bytes: a sampled side's figures are estimates (its line says so). */
static void print_sampling_text(const char *side, const struct analysis *a)
{
	char note[256];

	if (analysis_sampling_note(a, note, sizeof(note)))
		printf("%s is %s\n", side, note);
}

/* ,"KEY":{...} (the side's "sampling" object of report --json) or ,"KEY":null */
static void print_sampling_json(const char *key, const struct analysis *a)
{
	if (!a->sample_period) {
		printf(",\"%s\":null", key);
		return;
	}
	/* analysis_sampling_json writes ,"sampling":{...}: the same object under KEY */
	printf(",\"%s\":{\"period_bytes\":%llu,\"estimated\":true,\"exact_counts\":%s}", key,
	       (unsigned long long)a->sample_period, a->counts_exact ? "true" : "false");
}

/* Tree metrics; returns whether a gated one exceeded the threshold. */
static bool tree_rows(const struct diff_opts *o, const struct loaded *b, const struct loaded *n)
{
	bool regressed = false;

	if (o->json)
		printf(",\"metrics\":{");
	else
		printf("%-24s %14s %14s %14s %8s\n", "metric", "base", "new", "change", "%");
	for (int m = 0; m < DIFF_NMETRICS; m++) {
		struct diff_value v = { .known = false };
		uint64_t x, y;
		bool over;

		if (diff_tree_metric(&b->a, b->physical, m, &x) &&
		    diff_tree_metric(&n->a, n->physical, m, &y))
			diff_value_set(&v, x, y);
		over = o->gate && o->chosen[m] && diff_exceeds(&v, o->fail_above);
		regressed |= over;
		if (o->json) {
			printf("%s\"%s\":", m ? "," : "", diff_metric_name(m));
			diff_value_print_json(&v);
		} else {
			print_value_text(diff_metric_name(m), &v, over ? "  REGRESSION" : "");
		}
	}
	if (o->json)
		printf("}");
	return regressed;
}

static void proc_row(const struct diff_opts *o, const struct loaded *b, const struct loaded *n,
		     const struct proc_summary *pb, const struct proc_summary *pn, bool first)
{
	const struct proc_summary *p = pb ? pb : pn;

	if (!p) /* a pair has at least one side */
		return;
	if (o->json) {
		printf("%s{\"command\":", first ? "" : ",");
		json_print_string(stdout, p->command);
		printf(pb ? ",\"base_pid\":%u" : ",\"base_pid\":null", pb ? pb->pid : 0);
		printf(pn ? ",\"new_pid\":%u" : ",\"new_pid\":null", pn ? pn->pid : 0);
		printf(",\"metrics\":{");
	} else {
		char pids[48], cmd[PRINTABLE_LEN(sizeof(p->command))];

		snprintf(pids, sizeof(pids), pb && pn ? "pid %u -> %u" : "pid %u", p->pid,
			 pn ? pn->pid : 0);
		printf("process %s (%s)%s\n",
		       p->command[0] ? printable(p->command, cmd, sizeof(cmd)) : "?", pids,
		       pb && pn ? ""
		       : pb	? ": only in BASE"
				: ": only in NEW");
	}
	for (int m = 0, k = 0; m < DIFF_NMETRICS; m++) {
		struct diff_value v = { .known = false };
		uint64_t x = 0, y = 0;
		bool hx = pb && diff_proc_metric(&b->a, pb, m, &x);
		bool hy = pn && diff_proc_metric(&n->a, pn, m, &y);

		if (m == DIFF_PEAK_PHYSICAL)
			continue;
		/* a process only one run has counts as 0 in the other */
		if ((hx || !pb) && (hy || !pn) && (pb || pn))
			diff_value_set(&v, x, y);
		if (o->json) {
			printf("%s\"%s\":", k++ ? "," : "", diff_metric_name(m));
			diff_value_print_json(&v);
		} else {
			print_value_text(diff_metric_name(m), &v, "");
		}
	}
	if (o->json)
		printf("}}");
}

static int proc_rows(const struct diff_opts *o, const struct loaded *b, const struct loaded *n)
{
	int *match = calloc(b->a.nprocs + 1, sizeof(*match));
	bool *matched = calloc(n->a.nprocs + 1, sizeof(*matched));
	bool first = true;

	if (!match || !matched || diff_match_procs(&b->a, &n->a, match, matched)) {
		free(match);
		free(matched);
		return -ENOMEM;
	}
	printf(o->json ? ",\"processes\":[" : "\n");
	for (unsigned i = 0; i < b->a.nprocs; i++, first = false)
		proc_row(o, b, n, &b->a.procs[i], match[i] >= 0 ? &n->a.procs[match[i]] : NULL,
			 first);
	for (unsigned j = 0; j < n->a.nprocs; j++)
		if (!matched[j]) {
			proc_row(o, b, n, NULL, &n->a.procs[j], first);
			first = false;
		}
	if (o->json)
		printf("]");
	free(match);
	free(matched);
	return 0;
}

/* A metric asked for by --metric must be in both runs. */
static int check_chosen(const struct diff_opts *o, const struct loaded *b, const struct loaded *n)
{
	for (int m = 0; o->any_chosen && m < DIFF_NMETRICS; m++) {
		uint64_t x;

		if (!o->chosen[m])
			continue;
		if (!diff_tree_metric(&b->a, b->physical, m, &x) ||
		    !diff_tree_metric(&n->a, n->physical, m, &x)) {
			die_msg("metric %s is not recorded in %s; record both runs with it (peak_physical_bytes needs track --physical)",
				diff_metric_name(m),
				diff_tree_metric(&b->a, b->physical, m, &x) ? o->new : o->base);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * Reads @path into @l through @filter, with its stacks into @st when the
 * @sites are wanted.  0, or 1 after one line.
 */
static int load_run(const char *path, bool sites, struct proc_filter *filter, struct loaded *l,
		    struct stack_table *st)
{
	struct load_hooks hooks = { .filter = filter };

	if (sites ? load_artifact_stacks(path, l, st, filter) : load_artifact(path, l, &hooks)) {
		die_msg("cannot read '%s': %s", path, l->error);
		return 1;
	}
	cli_filter_warn_unmatched(filter, path);
	if (sites && !(l->hdr.flags & MT_HDR_STACKS))
		return cli_no_stacks(path, &l->hdr);
	return 0;
}

/* The call sites (--top, site gates); 0, or 1 after one line.  *@regressed grows. */
static int sites(const struct diff_opts *o, const struct loaded *b, const struct loaded *n,
		 const struct stack_table st[2], bool *regressed)
{
	struct diff_top_runs in = { .run = { b, n }, .st = { &st[0], &st[1] } };
	bool over = false;
	int err;

	if (!diff_top_wanted(&o->top)) {
		if (o->json)
			printf(",\"top\":null,\"site_regressions\":[]");
		return 0;
	}
	in.sym = cli_symbolizer_new();
	err = in.sym ? diff_top_print(&in, &o->top, &over) : -ENOMEM;
	if (in.sym)
		symbolizer__save(in.sym);
	symbolizer__free(in.sym);
	if (err) {
		die_msg("out of memory");
		return 1;
	}
	*regressed |= over;
	return 0;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_opts o = { .base = NULL };
	struct loaded *b = calloc(1, sizeof(*b)), *n = calloc(1, sizeof(*n));
	struct stack_table st[2];
	bool regressed;
	int ret = 2;

	stack_table_init(&st[0]);
	stack_table_init(&st[1]);
	if (help_wanted(argc, argv)) {
		ret = help_show("diff");
		goto out;
	}
	if (!b || !n) {
		die_msg("out of memory");
		ret = 1;
		goto out;
	}
	if (parse_args(argc, argv, &o))
		goto out;
	ret = 1;
	if (load_run(o.base, diff_top_wanted(&o.top), &o.filter[0], b, &st[0]) ||
	    load_run(o.new, diff_top_wanted(&o.top), &o.filter[1], n, &st[1]))
		goto out;
	if (b->truncated || n->truncated)
		die_msg("warning: '%s' is truncated (%s); comparing what it holds",
			b->truncated ? o.base : o.new, b->truncated ? b->error : n->error);
	ret = 2;
	if (check_chosen(&o, b, n))
		goto out;
	if (o.json) {
		printf("{\"base\":");
		json_print_string(stdout, o.base);
		printf(",\"new\":");
		json_print_string(stdout, o.new);
		printf(o.gate ? ",\"fail_above_pct\":%g" : ",\"fail_above_pct\":null",
		       o.fail_above);
		print_sampling_json("base_sampling", &b->a);
		print_sampling_json("new_sampling", &n->a);
	} else {
		/* the commands are the artifacts' (anyone's bytes), the paths the user's own */
		printf("base: %s (", o.base);
		fputs_printable(b->hdr.command, stdout);
		printf(")\nnew:  %s (", o.new);
		fputs_printable(n->hdr.command, stdout);
		printf(")\n");
		print_sampling_text("base", &b->a);
		print_sampling_text("new", &n->a);
	}
	regressed = tree_rows(&o, b, n);
	ret = 1;
	if (proc_rows(&o, b, n)) {
		die_msg("out of memory");
		goto out;
	}
	if (sites(&o, b, n, st, &regressed))
		goto out;
	if (o.json)
		printf(",\"regression\":%s}\n", regressed ? "true" : "false");
	else if (o.gate)
		printf("\n%s\n", regressed ? "REGRESSION: a metric grew beyond the threshold"
					   : "ok: no metric grew beyond the threshold");
	ret = regressed ? 1 : 0;
out:
	if (b)
		analysis_release(&b->a);
	if (n)
		analysis_release(&n->a);
	stack_table_release(&st[0]);
	stack_table_release(&st[1]);
	proc_filter_release(&o.filter[0]);
	proc_filter_release(&o.filter[1]);
	free(b);
	free(n);
	return ret;
}
