// SPDX-License-Identifier: MIT
/*
 * cmd_diff.c - `memtrack diff BASE NEW [--json] [--fail-above PCT]
 * [--metric NAME]...`: metric by metric, tree and matched processes; exit 1
 * when a gated metric grew beyond PCT, so a CI job can gate on memory.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "analyze/diff.h"
#include "cli/help.h"
#include "format/json.h"
#include "analyze/load.h"

#define DIFF_USAGE \
	"usage: memtrack diff BASE NEW [--json] [--fail-above PCT] [--metric NAME]...; see memtrack help diff"

struct diff_opts {
	const char *base, *new;
	bool json;
	bool gate;		    /* --fail-above given */
	double fail_above;	    /* percent */
	bool chosen[DIFF_NMETRICS]; /* --metric; none given: all */
	bool any_chosen;
};

static int parse_args(int argc, char **argv, struct diff_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		char *end;
		int m;

		if (!strcmp(arg, "--json")) {
			o->json = true;
		} else if (!strcmp(arg, "--fail-above") || !strcmp(arg, "--metric")) {
			if (i + 1 == argc) {
				die_msg("%s needs a value; " DIFF_USAGE, arg);
				return -EINVAL;
			}
			if (!strcmp(arg, "--metric")) {
				m = diff_metric_lookup(argv[++i]);
				if (m < 0) {
					die_msg("unknown metric '%s'; use peak_heap_bytes, total_allocated_bytes, alloc_count, leaked_bytes, peak_rss_bytes, peak_physical_bytes, peak_mapped_bytes, peak_memory_bytes, mapped_count or leaked_mapped_bytes",
						argv[i]);
					return -EINVAL;
				}
				o->chosen[m] = o->any_chosen = true;
				continue;
			}
			o->fail_above = strtod(argv[++i], &end);
			if (end == argv[i] || *end || !isfinite(o->fail_above) ||
			    o->fail_above < 0) {
				die_msg("--fail-above takes a percentage >= 0 (e.g. 5 or 2.5), not '%s'",
					argv[i]);
				return -EINVAL;
			}
			o->gate = true;
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
	return 0;
}

static void print_value_json(const struct diff_value *v)
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

static void print_value_text(const char *name, const struct diff_value *v, const char *verdict)
{
	char pct[32];

	if (!v->known) {
		printf("  %-22s %14s %14s  (not recorded in both)\n", name, "-", "-");
		return;
	}
	if (v->pct_valid)
		snprintf(pct, sizeof(pct), "%+.1f%%", v->pct);
	else
		snprintf(pct, sizeof(pct), "new");
	printf("  %-22s %14llu %14llu %+14lld %8s%s\n", name, (unsigned long long)v->base,
	       (unsigned long long)v->new, (long long)v->change, pct, verdict);
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
			print_value_json(&v);
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
			print_value_json(&v);
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

int cmd_diff(int argc, char **argv)
{
	struct diff_opts o = { .base = NULL };
	struct loaded *b = calloc(1, sizeof(*b)), *n = calloc(1, sizeof(*n));
	bool regressed;
	int ret = 2;

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
	if (load_artifact(o.base, b, NULL)) {
		die_msg("cannot read '%s': %s", o.base, b->error);
		goto out;
	}
	if (load_artifact(o.new, n, NULL)) {
		die_msg("cannot read '%s': %s", o.new, n->error);
		goto out;
	}
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
	} else {
		/* the commands are the artifacts' (anyone's bytes), the paths the user's own */
		printf("base: %s (", o.base);
		fputs_printable(b->hdr.command, stdout);
		printf(")\nnew:  %s (", o.new);
		fputs_printable(n->hdr.command, stdout);
		printf(")\n");
	}
	regressed = tree_rows(&o, b, n);
	if (proc_rows(&o, b, n)) {
		die_msg("out of memory");
		ret = 1;
		goto out;
	}
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
	free(b);
	free(n);
	return ret;
}
