// SPDX-License-Identifier: MIT
/*
 * cmd_export.c - `memtrack export --format=perfetto|csv|pprof FILE -o OUT`:
 * the memory time series for Perfetto, chrome://tracing, spreadsheets and
 * plotting libraries (export.c writes them while the file is read), or the
 * call sites as a pprof profile (pprof.c, after the whole file is read).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/report_top.h"
#include "analyze/export.h"
#include "analyze/filter.h"
#include "cli/help.h"
#include "analyze/load.h"
#include "analyze/pprof.h"

#define EXPORT_USAGE                                                                  \
	"usage: memtrack export --format=perfetto|csv|pprof FILE -o OUT [--pid PID] " \
	"[--comm NAME]; see memtrack help export"

struct export_opts {
	const char *in, *out;
	const char *format;
	struct proc_filter filter; /* --pid, --comm */
};

static int parse_args(int argc, char **argv, struct export_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		int k = cli_filter_arg(&o->filter, argc, argv, &i);

		if (k < 0)
			return -EINVAL;
		if (k)
			continue;
		if (!strncmp(arg, "--format=", 9)) {
			o->format = arg + 9;
		} else if (!strcmp(arg, "--format") || !strcmp(arg, "-o") ||
			   !strcmp(arg, "--output")) {
			if (i + 1 == argc) {
				die_msg("%s needs a value; " EXPORT_USAGE, arg);
				return -EINVAL;
			}
			if (!strcmp(arg, "--format"))
				o->format = argv[++i];
			else
				o->out = argv[++i];
		} else if (arg[0] == '-' && arg[1]) {
			die_msg("unknown option '%s'; " EXPORT_USAGE, arg);
			return -EINVAL;
		} else if (o->in) {
			die_msg("one artifact at a time ('%s' and '%s'); " EXPORT_USAGE, o->in,
				arg);
			return -EINVAL;
		} else {
			o->in = arg;
		}
	}
	if (!o->format || (strcmp(o->format, "perfetto") != 0 && strcmp(o->format, "csv") != 0 &&
			   strcmp(o->format, "pprof") != 0)) {
		die_msg("%s '%s'; use --format=perfetto, --format=csv or --format=pprof; see memtrack help export",
			o->format ? "unknown format" : "no format", o->format ? o->format : "");
		return -EINVAL;
	}
	if (!o->in || !o->out) {
		die_msg("%s; " EXPORT_USAGE,
			o->in ? "no output file (-o OUT)" : "no artifact given");
		return -EINVAL;
	}
	return 0;
}

/* The header is read: time 0 is known, the preamble can go out. */
static void on_header(void *ctx, const struct mt_header *h)
{
	struct exporter *x = ctx;

	x->start_ns = h->start_ns;
	x->physical = h->flags & MT_HDR_PHYSICAL;
	export_begin(x);
}

/* A sampled recording's exports hold estimates: one line says so. */
static void sampling_notice(const struct analysis *a)
{
	char note[256];

	if (analysis_sampling_note(a, note, sizeof(note)))
		die_msg("note: %s", note);
}

/* --format=pprof: the call sites, symbolized, as a gzipped profile.proto. */
static int export_pprof(struct export_opts *o)
{
	struct loaded *l = calloc(1, sizeof(*l));
	struct symbolizer *sym = cli_symbolizer_new();
	struct stack_table st;
	struct pprof_run run = { 0 };
	int ret = 1, err, fd;

	stack_table_init(&st);
	if (!l || !sym) {
		die_msg("out of memory");
		goto out;
	}
	if (load_artifact_stacks(o->in, l, &st, &o->filter)) {
		die_msg("cannot read '%s': %s", o->in, l->error);
		goto out;
	}
	cli_filter_warn_unmatched(&o->filter, o->in);
	if (!st.nstacks)
		die_msg("warning: '%s' has no call stacks (record with `memtrack track --stacks`)",
			o->in);
	run.start_wall_ns = l->hdr.start_ns + l->hdr.wall_offset_ns;
	run.duration_ns = loaded_duration_ns(l);
	fd = strcmp(o->out, "-") ? output_open(o->out, "-o") : dup(STDOUT_FILENO);
	if (fd < 0) {
		if (!strcmp(o->out, "-"))
			die_msg("cannot write to stdout: %s", strerror(errno));
		goto out; /* said why */
	}
	sampling_notice(&l->a);
	err = pprof_write(&l->a, &st, sym, &run, fd);
	if (err) {
		die_msg("cannot write '%s': %s", o->out, strerror(-err));
		goto out;
	}
	symbolizer__save(sym);
	if (l->truncated)
		die_msg("warning: '%s' is truncated: %s; exported what precedes it", o->in,
			l->error);
	if (strcmp(o->out, "-") != 0)
		die_msg("wrote %s", o->out);
	ret = 0;
out:
	symbolizer__free(sym);
	stack_table_release(&st);
	if (l)
		analysis_release(&l->a);
	free(l);
	return ret;
}

int cmd_export(int argc, char **argv)
{
	struct export_opts o = { .in = NULL };
	struct exporter x = { .out = NULL };
	struct load_hooks hooks = {
		.header = on_header, .observer = export_observe, .ctx = &x, .filter = &o.filter
	};
	struct loaded *l = NULL;
	int ret = 2;

	if (help_wanted(argc, argv))
		return help_show("export");
	if (parse_args(argc, argv, &o))
		goto out;
	if (!strcmp(o.format, "pprof")) {
		ret = export_pprof(&o);
		goto out;
	}
	ret = 1;
	l = calloc(1, sizeof(*l));
	if (!l) {
		die_msg("out of memory");
		goto out;
	}
	x.out = strcmp(o.out, "-") ? output_fopen(o.out, "-o") : stdout;
	if (!x.out)
		goto out; /* said why */
	x.format = strcmp(o.format, "csv") ? EXPORT_PERFETTO : EXPORT_CSV;
	x.a = &l->a;
	if (load_artifact(o.in, l, &hooks)) {
		die_msg("cannot read '%s': %s", o.in, l->error);
		goto out;
	}
	cli_filter_warn_unmatched(&o.filter, o.in);
	export_end(&x);
	sampling_notice(&l->a);
	if (fflush(x.out) || ferror(x.out)) {
		die_msg("cannot write '%s': %s", o.out, strerror(errno));
		goto out;
	}
	if (l->truncated)
		die_msg("warning: '%s' is truncated: %s; exported what precedes it", o.in,
			l->error);
	ret = 0;
out:
	if (x.out && x.out != stdout && fclose(x.out) && !ret) {
		die_msg("cannot write '%s': %s", o.out, strerror(errno));
		ret = 1;
	} else if (x.out && x.out != stdout && !ret)
		die_msg("wrote %s", o.out);
	if (l)
		analysis_release(&l->a);
	free(l);
	proc_filter_release(&o.filter);
	return ret;
}
