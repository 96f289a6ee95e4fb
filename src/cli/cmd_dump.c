// SPDX-License-Identifier: MIT
/*
 * cmd_dump.c - `memtrack dump FILE [--pid PID] [--comm NAME]`: every record
 * (with a filter: those filter.h keeps) as one JSON object per line, keys
 * from the schema table (schema.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/artifact.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "analyze/filter.h"
#include "format/json.h"
#include "analyze/pycode.h"
#include "format/schema.h"

/* A PYCODE record's strings (FORMAT.md §8.3) as "name", "qualname" and "file", UTF-8. */
static void dump_pycode(FILE *out, const struct mt_event *ev)
{
	static const char *const keys[3] = { "name", "qualname", "file" };
	uint64_t str = ev->f[PYCODE_STRINGS];
	uint32_t at = 0;

	for (int i = 0; i < 3; i++) {
		uint32_t len = MT_PYCODE_STR_LEN(str, i);
		char *t = at + len <= ev->blob_len
				  ? py_text(ev->blob + at, len, MT_PYCODE_STR_KIND(str, i))
				  : NULL;

		fprintf(out, ",\"%s\":", keys[i]);
		json_print_string(out, t ? t : "");
		free(t);
		at += len;
	}
}

static void print_event(FILE *out, const struct mt_event *ev)
{
	const struct mt_type_def *def = mt_type_def(ev->h.type);
	unsigned nf = ev->h.nfields < def->nfields ? ev->h.nfields : def->nfields;

	fprintf(out, "{\"type\":\"%s\",\"ts\":%llu,\"pid\":%u,\"tid\":%u", def->name,
		(unsigned long long)ev->h.ts, ev->h.pid, ev->h.tid);
	if (ev->h.type <= MT_FREE && ev->h.fn != mt_natural_fn(ev->h.type) && mt_fn_name(ev->h.fn))
		fprintf(out, ",\"fn\":\"%s\"", mt_fn_name(ev->h.fn));
	if ((ev->h.type == MT_MMAP || ev->h.type == MT_BRK) && (ev->h.fn & MT_REC_ALLOCATOR))
		fputs(",\"allocator\":true", out); /* made inside an allocator call */
	for (unsigned i = 0; i < nf; i++) {
		if (def->fields[i].kind == MT_FK_SINT)
			fprintf(out, ",\"%s\":%lld", def->fields[i].name, (long long)ev->f[i]);
		else
			fprintf(out, ",\"%s\":%llu", def->fields[i].name,
				(unsigned long long)ev->f[i]);
	}
	if (ev->h.type == MT_OBJECT) {
		fputs(",\"build_id\":\"", out);
		for (unsigned i = 0; i < ev->build_id_len && i < MT_BUILD_ID_MAX; i++)
			fprintf(out, "%02x", ev->build_id[i]);
		fputc('"', out);
	}
	if (ev->h.type == MT_STACK) {
		fputs(",\"frames\":[", out);
		for (unsigned i = 0; i < ev->nframes && i < MT_STACK_MAX; i++)
			fprintf(out, "%s[%u,%llu]", i ? "," : "", ev->frames[i].object,
				(unsigned long long)ev->frames[i].addr);
		fputc(']', out);
	}
	if (ev->h.type == MT_PYCODE)
		dump_pycode(out, ev);
	if (def->has_string) {
		fprintf(out, ",\"%s\":", def->string_name);
		json_print_string(out, ev->str);
	}
	fputs("}\n", out);
}

#define DUMP_USAGE "usage: memtrack dump FILE [--pid PID] [--comm NAME]; see memtrack help dump"

/* FILE and the filter; 0, or 2 after one line. */
static int parse_args(int argc, char **argv, const char **path, struct proc_filter *f)
{
	for (int i = 1; i < argc; i++) {
		int k = cli_filter_arg(f, argc, argv, &i);

		if (k < 0)
			return 2;
		if (k)
			continue;
		if (argv[i][0] == '-' || *path) {
			die_msg(argv[i][0] == '-' ? "unknown option '%s'; " DUMP_USAGE
						  : "one artifact at a time ('%s'); " DUMP_USAGE,
				argv[i]);
			return 2;
		}
		*path = argv[i];
	}
	if (!*path) {
		die_msg("no artifact given; " DUMP_USAGE);
		return 2;
	}
	return 0;
}

/* Prints every record of @r that @f keeps: 1 at the end, or the reader's or the filter's error. */
static int dump_all(struct mt_reader *r, struct proc_filter *f)
{
	struct mt_event ev;
	int ret = 1, keep;

	/* a failed write stops the loop: nothing more would reach the output */
	while (!ferror(stdout) && (ret = mt_reader__next(r, &ev)) == 1) {
		keep = proc_filter_keep(f, &ev);
		if (keep < 0)
			return -ENOMEM;
		if (keep)
			print_event(stdout, &ev);
	}
	return ret;
}

int cmd_dump(int argc, char **argv)
{
	static char outbuf[1 << 16];
	struct proc_filter f;
	const char *path = NULL;
	struct mt_reader *r;
	char err[512];
	int ret;

	if (help_wanted(argc, argv))
		return help_show("dump");
	proc_filter_init(&f);
	ret = parse_args(argc, argv, &path, &f);
	if (ret)
		goto out_filter;
	r = mt_reader__open(path, err, sizeof(err));
	if (!r) {
		die_msg("cannot read '%s': %s", path, err);
		ret = 1;
		goto out_filter;
	}
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	ret = dump_all(r, &f);
	if (close_stdout("events")) {
		ret = 1;
		goto out_reader;
	}
	if (ret == -ENODATA)
		die_msg("%s: %s; every event before that point was printed", path,
			mt_reader__error(r));
	else if (ret == -ENOMEM)
		die_msg("%s: out of memory; the events before it were printed", path);
	else if (ret < 0)
		die_msg("%s: %s; the events before it were printed", path, mt_reader__error(r));
	else
		cli_filter_warn_unmatched(&f, path);
	ret = ret < 0 && ret != -ENODATA ? 1 : 0;
out_reader:
	mt_reader__free(r);
out_filter:
	proc_filter_release(&f);
	return ret;
}
