// SPDX-License-Identifier: MIT
/*
 * cmd_flamegraph.c - `memtrack flamegraph FILE -o OUT.svg [--metric M]
 * [--flame] [--folded]`: the call sites of a run recorded with stacks as an
 * interactive SVG icicle graph (root at the top; --flame: at the bottom),
 * or as folded stacks for other tools.  A run without stacks is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/report_top.h"
#include "analyze/filter.h"
#include "analyze/flamegraph.h"
#include "cli/help.h"
#include "analyze/load.h"

#define FLAME_USAGE \
	"usage: memtrack flamegraph FILE -o OUT.svg [--metric peak|allocations|allocated|leaked|memory] [--flame] [--folded] [--pid PID] [--comm NAME]; see memtrack help flamegraph"

struct flame_opts {
	const char *in, *out;
	enum site_metric metric;
	bool folded;
	bool flame;		   /* root at the bottom */
	struct proc_filter filter; /* --pid, --comm */
};

static int parse_args(int argc, char **argv, struct flame_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = NULL;
		int k = cli_filter_arg(&o->filter, argc, argv, &i);

		if (k < 0)
			return -EINVAL;
		if (k)
			continue;
		if (!strncmp(arg, "--metric=", 9))
			val = arg + 9;
		else if (!strcmp(arg, "--metric") || !strcmp(arg, "-o") ||
			 !strcmp(arg, "--output")) {
			if (i + 1 == argc) {
				die_msg("%s needs a value; " FLAME_USAGE, arg);
				return -EINVAL;
			}
			if (arg[1] != '-' || !strcmp(arg, "--output")) {
				o->out = argv[++i];
				continue;
			}
			val = argv[++i];
		} else if (!strcmp(arg, "--folded")) {
			o->folded = true;
			continue;
		} else if (!strcmp(arg, "--flame")) {
			o->flame = true;
			continue;
		} else if (arg[0] == '-' && arg[1]) {
			die_msg("unknown option '%s'; " FLAME_USAGE, arg);
			return -EINVAL;
		} else if (o->in) {
			die_msg("one artifact at a time ('%s' and '%s'); " FLAME_USAGE, o->in, arg);
			return -EINVAL;
		} else {
			o->in = arg;
			continue;
		}
		if (site_metric_parse(val, &o->metric)) {
			die_msg("unknown metric '%s'; use --metric peak, allocations, allocated, leaked or memory",
				val);
			return -EINVAL;
		}
	}
	if (!o->in) {
		die_msg("no artifact given; " FLAME_USAGE);
		return -EINVAL;
	}
	if (!o->out && !o->folded) {
		die_msg("no output file; add -o OUT.svg (or --folded for folded stacks on stdout)");
		return -EINVAL;
	}
	return 0;
}

static const char *const titles[SITE_NMETRICS] = {
	"Heap at its peak by call site (bytes live at the tree's heap peak)",
	"Heap allocations by call site",
	"Bytes allocated by call site",
	"Bytes leaked by call site",
	"Memory at its peak by call site (heap + mapped bytes at the tree's memory peak)",
	"Temporary allocations by call site (freed before their thread allocated again)",
	"Bytes live at the end of the attach by call site (processes still running)",
};

/* Writes the graph to @path ("-" or NULL: stdout).  Returns 0 or 1 after one line. */
static int write_out(const struct flame *f, const struct flame_opts *o, const char *cmd,
		     bool estimated)
{
	bool to_stdout = !o->out || !strcmp(o->out, "-");
	FILE *out = to_stdout ? stdout : output_fopen(o->out, "-o");
	char title[512];
	int err;

	if (!out)
		return 1; /* said why */
	/* --sample-bytes: the widths are estimates */
	snprintf(title, sizeof(title), "%s%s: %.300s", estimated ? "Estimated (sampled): " : "",
		 titles[o->metric], cmd);
	err = o->folded ? flame_write_folded(f, out) : flame_write_svg(f, title, o->flame, out);
	if (to_stdout)
		return err ? 1 : close_stdout("flame graph");
	if (err || fflush(out) || ferror(out)) {
		die_msg("cannot write '%s': %s", o->out, strerror(err == -ENOMEM ? ENOMEM : errno));
		fclose(out);
		return 1;
	}
	if (fclose(out)) {
		die_msg("cannot write '%s': %s", o->out, strerror(errno));
		return 1;
	}
	die_msg("wrote %s", o->out);
	return 0;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct flame_opts o = { .metric = SITE_PEAK };
	struct symbolizer *sym = NULL;
	struct flame f = { .nodes = NULL };
	struct loaded *l = NULL;
	struct stack_table st;
	int ret = 1;

	if (help_wanted(argc, argv))
		return help_show("flamegraph");
	stack_table_init(&st);
	if (parse_args(argc, argv, &o)) {
		ret = 2;
		goto out;
	}
	l = calloc(1, sizeof(*l));
	sym = cli_symbolizer_new();
	if (!l || !sym) {
		die_msg("out of memory");
		goto out;
	}
	if (load_artifact_stacks(o.in, l, &st, &o.filter)) {
		die_msg("cannot read '%s': %s", o.in, l->error);
		goto out;
	}
	cli_filter_warn_unmatched(&o.filter, o.in);
	if (!(l->hdr.flags & MT_HDR_STACKS)) {
		ret = cli_no_stacks(o.in, &l->hdr);
		goto out;
	}
	if (flame_build(&f, &l->a, &st, sym, o.metric)) {
		die_msg("out of memory");
		goto out;
	}
	ret = write_out(&f, &o, l->hdr.command, l->a.sample_period != 0);
	symbolizer__save(sym);
	if (l->truncated)
		die_msg("warning: '%s' is truncated: %s; drew what precedes it", o.in, l->error);
out:
	flame_release(&f);
	symbolizer__free(sym);
	stack_table_release(&st);
	proc_filter_release(&o.filter);
	if (l)
		analysis_release(&l->a);
	free(l);
	return ret;
}
