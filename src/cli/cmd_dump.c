// SPDX-License-Identifier: MIT
/*
 * cmd_dump.c - `memtrack dump FILE`: every record as one JSON object per
 * line, keys from the schema table (schema.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "format/artifact.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "format/json.h"
#include "format/schema.h"

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
	if (def->has_string) {
		fprintf(out, ",\"%s\":", def->string_name);
		json_print_string(out, ev->str);
	}
	fputs("}\n", out);
}

int cmd_dump(int argc, char **argv)
{
	static char outbuf[1 << 16];
	struct mt_reader *r;
	struct mt_event ev;
	char err[512];
	int ret = 0;

	if (help_wanted(argc, argv))
		return help_show("dump");
	if (argc != 2 || argv[1][0] == '-') {
		die_msg("usage: memtrack dump FILE; see memtrack help dump");
		return 2;
	}
	r = mt_reader__open(argv[1], err, sizeof(err));
	if (!r) {
		die_msg("cannot read '%s': %s", argv[1], err);
		return 1;
	}
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	/* a failed write stops the loop: nothing more would reach the output */
	while (!ferror(stdout) && (ret = mt_reader__next(r, &ev)) == 1)
		print_event(stdout, &ev);
	if (close_stdout("events")) {
		mt_reader__free(r);
		return 1;
	}
	if (ret == -ENODATA)
		die_msg("%s: %s; every event before that point was printed", argv[1],
			mt_reader__error(r));
	else if (ret < 0)
		die_msg("%s: %s; the events before it were printed", argv[1], mt_reader__error(r));
	mt_reader__free(r);
	return ret < 0 && ret != -ENODATA ? 1 : 0;
}
