// SPDX-License-Identifier: MIT
/*
 * export.c - Trace Event Format and CSV writers; see export.h.
 *
 * Trace Event Format (the JSON object form Perfetto's UI and chrome://tracing
 * open): timestamps in microseconds since the recording started.  Per
 * process, counter tracks "heap" (args.bytes), "mapped" (args.bytes: its own
 * mapped memory, docs/METRICS.md) and "rss" (args anon, file, shmem: drawn
 * stacked); "physical" (args.bytes) is the tree's and sits on
 * the tree's first process; fork, exec and exit are process-scoped instant
 * events; process names are metadata ("M") events written at the end, when
 * every process's last command is known.
 */
#include <inttypes.h>
#include "analyze/export.h"
#include "format/json.h"
#include "format/schema.h"

static double usec(const struct exporter *x, uint64_t ts)
{
	return ts > x->start_ns ? (double)(ts - x->start_ns) / 1e3 : 0;
}

void export_begin(struct exporter *x)
{
	x->rows = 0;
	if (x->format == EXPORT_PERFETTO)
		fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", x->out);
	else
		fputs("time_s,pid,command,event,heap_bytes,rss_anon_bytes,rss_file_bytes,"
		      "rss_shmem_bytes,rss_bytes,tree_heap_bytes,tree_rss_bytes,physical_bytes,"
		      "mapped_bytes,tree_mapped_bytes\n",
		      x->out);
}

static void te_open(struct exporter *x, const char *name, char ph, uint64_t ts, uint32_t pid)
{
	fprintf(x->out, "%s{\"name\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%" PRIu32,
		x->rows++ ? ",\n" : "", name, ph, usec(x, ts), pid);
}

static void te_heap(struct exporter *x, uint64_t ts, const struct proc_summary *p)
{
	/* --sample-bytes: the track says its bytes are estimates */
	te_open(x, x->a->sample_period ? "heap (estimated)" : "heap", 'C', ts, p->pid);
	fprintf(x->out, ",\"args\":{\"bytes\":%" PRIu64 "}}", p->live_bytes);
}

static void te_mapped(struct exporter *x, uint64_t ts, const struct proc_summary *p)
{
	te_open(x, "mapped", 'C', ts, p->pid);
	fprintf(x->out, ",\"args\":{\"bytes\":%" PRIu64 "}}", p->mapped.bytes);
}

static void te_rss(struct exporter *x, uint64_t ts, const struct proc_summary *p)
{
	te_open(x, "rss", 'C', ts, p->pid);
	fprintf(x->out,
		",\"args\":{\"anon\":%" PRIu64 ",\"file\":%" PRIu64 ",\"shmem\":%" PRIu64 "}}",
		p->rss_anon, p->rss_file, p->rss_shmem);
}

static void te_instant(struct exporter *x, const struct mt_event *ev)
{
	te_open(x, mt_type_def(ev->h.type)->name, 'i', ev->h.ts, ev->h.pid);
	fprintf(x->out, ",\"tid\":%" PRIu32 ",\"s\":\"p\",\"args\":{", ev->h.tid);
	if (ev->h.type == MT_FORK)
		fprintf(x->out, "\"child\":%" PRIu64 "}}", (uint64_t)ev->f[1]);
	else if (ev->h.type == MT_EXIT)
		fprintf(x->out, "\"code\":%" PRId64 ",\"signal\":%" PRIu64 "}}", (int64_t)ev->f[0],
			(uint64_t)ev->f[1]);
	else {
		fputs("\"path\":", x->out);
		json_print_string(x->out, ev->str);
		fputs("}}", x->out);
	}
}

static void perfetto_event(struct exporter *x, const struct mt_event *ev,
			   const struct proc_summary *p)
{
	switch (ev->h.type) {
	case MT_MALLOC:
	case MT_CALLOC:
	case MT_REALLOC:
	case MT_ALIGNED_ALLOC:
	case MT_FREE: te_heap(x, ev->h.ts, p); break;
	case MT_MMAP:
	case MT_MUNMAP:
	case MT_MREMAP:
	case MT_MPROTECT:
	case MT_BRK: te_mapped(x, ev->h.ts, p); break;
	case MT_RSS:
		if (!p->exited)
			te_rss(x, ev->h.ts, p);
		break;
	case MT_FORK:
		if (!(ev->f[2] & MT_FORK_THREAD))
			te_instant(x, ev);
		break;
	case MT_EXEC:
	case MT_EXIT:
		te_instant(x, ev);
		te_heap(x, ev->h.ts, p);
		te_mapped(x, ev->h.ts, p);
		if (ev->h.type == MT_EXIT)
			te_rss(x, ev->h.ts, p);
		break;
	case MT_PHYSICAL:
		te_open(x, "physical", 'C', ev->h.ts,
			x->a->nprocs ? x->a->procs[0].pid : ev->h.pid);
		fprintf(x->out, ",\"args\":{\"bytes\":%" PRIu64 "}}", x->a->physical_bytes);
		break;
	default: break;
	}
}

/* RFC 4180: a field in double quotes, a quote doubled. */
static void csv_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void csv_row(struct exporter *x, const struct mt_event *ev, const struct proc_summary *p)
{
	const struct analysis *a = x->a;

	fprintf(x->out, "%.9f,%" PRIu32 ",", usec(x, ev->h.ts) / 1e6, ev->h.pid);
	if (p)
		csv_string(x->out, p->command);
	fprintf(x->out, ",%s,", mt_type_def(ev->h.type)->name);
	if (p)
		fprintf(x->out, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64,
			p->live_bytes, p->rss_anon, p->rss_file, p->rss_shmem, p->rss_bytes);
	else
		fputs(",,,,", x->out);
	fprintf(x->out, ",%" PRIu64 ",%" PRIu64 ",", a->live_bytes, a->tree_rss_bytes);
	if (x->physical || a->has_physical)
		fprintf(x->out, "%" PRIu64, a->physical_bytes);
	fputc(',', x->out);
	if (p)
		fprintf(x->out, "%" PRIu64, p->mapped.bytes);
	fprintf(x->out, ",%" PRIu64 "\n", a->mapped_bytes);
	x->rows++;
}

void export_observe(void *ctx, const struct mt_event *ev, const struct proc_summary *p)
{
	struct exporter *x = ctx;

	if (ev->h.type == 0 || ev->h.type >= MT_TYPE_MAX)
		return;
	if (!p && ev->h.type != MT_PHYSICAL)
		return;
	if (x->format == EXPORT_PERFETTO)
		perfetto_event(x, ev, p);
	else if (ev->h.type != MT_FORK || !(ev->f[2] & MT_FORK_THREAD))
		csv_row(x, ev, p);
}

void export_end(struct exporter *x)
{
	char note[256];

	if (x->format != EXPORT_PERFETTO)
		return;
	for (unsigned i = 0; i < x->a->nprocs; i++) {
		const struct proc_summary *p = &x->a->procs[i];
		char name[96];

		snprintf(name, sizeof(name), "%s", p->command[0] ? p->command : "?");
		fprintf(x->out,
			"%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
			",\"args\":{\"name\":",
			x->rows++ ? ",\n" : "", p->pid);
		json_print_string(x->out, name);
		fputs("}}", x->out);
	}
	fputs("\n]", x->out);
	if (analysis_sampling_note(x->a, note, sizeof(note))) {
		fputs(",\"otherData\":{\"sampling\":", x->out);
		json_print_string(x->out, note);
		fputc('}', x->out);
	}
	fputs("}\n", x->out);
}
