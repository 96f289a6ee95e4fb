// SPDX-License-Identifier: MIT
/*
 * cmd_flamegraph.c - `memtrack flamegraph FILE -o OUT.svg [--metric M]
 * [--folded]`: the call sites of a run (track --stacks) as an interactive
 * SVG flame graph, or as folded stacks for other tools.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/report_top.h"
#include "analyze/flamegraph.h"
#include "cli/help.h"
#include "analyze/load.h"

#define FLAME_USAGE \
	"usage: memtrack flamegraph FILE -o OUT.svg [--metric peak|allocations|allocated|leaked|memory] [--folded]; see memtrack help flamegraph"

struct flame_opts {
	const char *in, *out;
	enum site_metric metric;
	bool folded;
};

static int parse_args(int argc, char **argv, struct flame_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = NULL;

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
};

/* Writes the graph to @path ("-" or NULL: stdout).  Returns 0 or 1 after one line. */
static int write_out(const struct flame *f, const struct flame_opts *o, const char *cmd)
{
	bool to_stdout = !o->out || !strcmp(o->out, "-");
	FILE *out = to_stdout ? stdout : output_fopen(o->out, "-o");
	char title[512];
	int err;

	if (!out)
		return 1; /* said why */
	snprintf(title, sizeof(title), "%s: %.300s", titles[o->metric], cmd);
	err = o->folded ? flame_write_folded(f, out) : flame_write_svg(f, title, out);
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
	if (parse_args(argc, argv, &o))
		return 2;
	stack_table_init(&st);
	l = calloc(1, sizeof(*l));
	sym = cli_symbolizer_new();
	if (!l || !sym) {
		die_msg("out of memory");
		goto out;
	}
	if (load_artifact_stacks(o.in, l, &st)) {
		die_msg("cannot read '%s': %s", o.in, l->error);
		goto out;
	}
	if (!st.nstacks)
		die_msg("warning: '%s' has no call stacks (record with `memtrack track --stacks`)",
			o.in);
	if (flame_build(&f, &l->a, &st, sym, o.metric)) {
		die_msg("out of memory");
		goto out;
	}
	ret = write_out(&f, &o, l->hdr.command);
	symbolizer__save(sym);
	if (l->truncated)
		die_msg("warning: '%s' is truncated: %s; drew what precedes it", o.in, l->error);
out:
	flame_release(&f);
	symbolizer__free(sym);
	stack_table_release(&st);
	if (l)
		analysis_release(&l->a);
	free(l);
	return ret;
}
