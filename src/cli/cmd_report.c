// SPDX-License-Identifier: MIT
/*
 * cmd_report.c - `memtrack report FILE [--json] [--between MARK_A MARK_B]`:
 * the numbers a person looks for first, from analysis.c; with --between,
 * those of the section between two marks only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/analysis.h"
#include "format/artifact.h"
#include "cli/cli.h"
#include "format/json.h"
#include "cli/help.h"
#include "cli/report_top.h"
#include "format/schema.h"
#include "analyze/timeline.h"

struct report {
	struct analysis a;
	const struct mt_header *hdr;
	const struct mt_trailer *trailer; /* NULL when truncated */
	bool truncated;
	bool physical; /* physical was recorded (maybe no change seen) */
	uint64_t dropped;
	const char *error; /* reader's message, "" if none */
	size_t top;	   /* --top N: call sites per ranking, 0 = no rankings */
	size_t brief_top;  /* text, stacks recorded, no --top: this many sites by peak heap */
	struct stack_table stacks;
	struct symbolizer *sym; /* owned; only with --top or brief_top */
};

static uint64_t duration_ns(const struct report *r)
{
	if (r->trailer)
		return r->trailer->duration_ns;
	return r->a.last_ts > r->hdr->start_ns ? r->a.last_ts - r->hdr->start_ns : 0;
}

/* Seconds since the run started, for marks and windows. */
static double rel_s(const struct report *r, uint64_t ts)
{
	return ts > r->hdr->start_ns ? (ts - r->hdr->start_ns) / 1e9 : 0;
}

/* The end of the run, for a window still open at the end. */
static uint64_t end_ns(const struct report *r)
{
	return r->hdr->start_ns + duration_ns(r);
}

static uint64_t window_start(const struct report *r, const struct enabled_window *w)
{
	return w->start_ns ? w->start_ns : r->hdr->start_ns;
}

static uint64_t window_end(const struct report *r, const struct enabled_window *w)
{
	return w->end_ns ? w->end_ns : end_ns(r);
}

/* Markers and heap recording windows, when the run was controlled. */
static void print_control_text(const struct report *r)
{
	const struct analysis *a = &r->a;
	char name[PRINTABLE_LEN(sizeof(a->marks[0].name))];

	if (!a->has_control)
		return;
	printf("markers:      %u\n", a->nmarks);
	for (unsigned i = 0; i < a->nmarks; i++)
		printf("  +%.6f s  %s (pid %u)\n", rel_s(r, a->marks[i].ts),
		       printable(a->marks[i].name, name, sizeof(name)), a->marks[i].pid);
	printf("heap recording on: %u window%s\n", a->nwindows, a->nwindows == 1 ? "" : "s");
	for (unsigned i = 0; i < a->nwindows; i++) {
		uint64_t s = window_start(r, &a->windows[i]), e = window_end(r, &a->windows[i]);

		printf("  +%.6f s .. +%.6f s  (%.3f ms)\n", rel_s(r, s), rel_s(r, e),
		       e > s ? (e - s) / 1e6 : 0);
	}
}

/* The kernel unwinder's tables (--stacks), from the trailer. */
static void print_stack_tables_text(const struct report *r)
{
	const struct mt_trailer *t = r->trailer;
	char b1[32];

	if (!(r->hdr->flags & MT_HDR_STACKS) || !t)
		return;
	printf("unwind tables: %s of kernel memory, %llu rows of %llu at most, %llu objects (%llu without room, %llu without CFI)\n",
	       human_bytes(t->stack_table_bytes, b1, sizeof(b1)), (unsigned long long)t->stack_rows,
	       (unsigned long long)t->stack_rows_cap, (unsigned long long)t->stack_objects,
	       (unsigned long long)t->stack_no_room, (unsigned long long)t->stack_no_cfi);
}

/* The mapped-memory lines of @a (docs/METRICS.md "Mapped memory"); @end: when "still mapped". */
static void print_mapped_text(const struct analysis *a, const char *end)
{
	char b1[32], b2[32];

	printf("peak mapped:  %s (%llu mappings of the program's own, %s still mapped %s)\n",
	       human_bytes(a->peak_mapped_bytes, b1, sizeof(b1)),
	       (unsigned long long)a->mapped_count,
	       human_bytes(a->leaked_mapped_bytes, b2, sizeof(b2)), end);
	printf("peak memory:  %s (heap + mapped)\n",
	       human_bytes(a->peak_memory_bytes, b1, sizeof(b1)));
}

static int print_text(struct report *r)
{
	const struct analysis *a = &r->a;
	char b1[32], b2[32], b3[32], cmd[PRINTABLE_LEN(sizeof(r->hdr->command))];

	printf("command:      %s\n", printable(r->hdr->command, cmd, sizeof(cmd)));
	printf("duration:     %.3f s%s\n", duration_ns(r) / 1e9,
	       r->truncated ? " (file truncated)" : "");
	if (r->hdr->flags & MT_HDR_ATTACHED)
		printf("attached:     to a running process; %llu frees of blocks allocated before (not seen)\n",
		       (unsigned long long)a->unknown_free_count);
	else if (r->trailer)
		printf("exit:         %s %d\n", r->trailer->exit_signal ? "signal" : "code",
		       r->trailer->exit_signal ? r->trailer->exit_signal : r->trailer->exit_code);
	printf("allocations:  %llu (%s requested), %llu frees\n",
	       (unsigned long long)a->alloc_count,
	       human_bytes(a->total_allocated_bytes, b1, sizeof(b1)),
	       (unsigned long long)a->free_count);
	printf("peak heap:    %s live\n", human_bytes(a->peak_live_bytes, b1, sizeof(b1)));
	printf("leaked:       %llu allocations, %s never freed\n",
	       (unsigned long long)a->leaked_count, human_bytes(a->leaked_bytes, b2, sizeof(b2)));
	print_mapped_text(a, "at exit");
	if (a->has_rss)
		printf("peak RSS:     %s (tree)\n", human_bytes(a->peak_rss_bytes, b3, sizeof(b3)));
	if (r->physical)
		printf("peak physical: %s\n", human_bytes(a->peak_physical_bytes, b3, sizeof(b3)));
	printf("events:      ");
	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		if (a->events[t])
			printf(" %s=%llu", mt_type_def(t)->name, (unsigned long long)a->events[t]);
	printf("\ndropped:      %llu events%s\n", (unsigned long long)r->dropped,
	       r->trailer ? "" : " (unknown: no trailer)");
	if (r->trailer && r->trailer->unprobed)
		printf("unprobed:     %llu processes ran without allocator probes (their heap calls are missing)\n",
		       (unsigned long long)r->trailer->unprobed);
	if (r->trailer && r->trailer->killed_in_call)
		printf("cut short:    %llu heap calls a killed process was inside (they never returned: not recorded)\n",
		       (unsigned long long)r->trailer->killed_in_call);
	if (r->trailer && r->trailer->env_overflow)
		printf("exec'd:       %llu processes exec'd a program on the uprobes (too large an environment to keep it in-process; recorded exactly there)\n",
		       (unsigned long long)r->trailer->env_overflow);
	if (a->bad_records)
		printf("refused:      %llu forged records of the in-process rings, from %u processes\n",
		       (unsigned long long)a->bad_records, a->bad_procs);
	print_stack_tables_text(r);
	print_control_text(r);
	if (a->nprocs > 20)
		printf("processes:    %u (the first 20 listed; report --json lists all)\n",
		       a->nprocs);
	else
		printf("processes:    %u\n", a->nprocs);
	for (unsigned i = 0; i < a->nprocs && i < 20; i++) {
		const struct proc_summary *p = &a->procs[i];

		printf("  %-7u ppid %-7u %-16s %8llu allocs %10s", p->pid, p->ppid,
		       p->command[0] ? printable(p->command, cmd, sizeof(cmd)) : "?",
		       (unsigned long long)p->allocs,
		       human_bytes(p->allocated_bytes, b1, sizeof(b1)));
		if (p->peak_mapped_bytes)
			printf("  peak mapped %s",
			       human_bytes(p->peak_mapped_bytes, b2, sizeof(b2)));
		if (a->has_rss)
			printf("  peak RSS %s", human_bytes(p->peak_rss_bytes, b2, sizeof(b2)));
		if (p->fast_heap)
			printf("  heap in-process");
		if (r->hdr->flags & MT_HDR_STACKS)
			printf("  unwinder %s", proc_unwinder(p));
		printf("\n");
	}
	if (r->truncated)
		printf("warning:      %s\n", r->error);
	if (r->top)
		return report_top_print(&r->a, &r->stacks, r->sym, r->top, false);
	return r->brief_top ? report_top_print_peak(&r->a, &r->stacks, r->sym, r->brief_top) : 0;
}

/* Prints ,"key":value, or ,"key":null when the run did not record it. */
static void print_opt_u64(const char *key, bool recorded, uint64_t value)
{
	if (recorded)
		printf(",\"%s\":%llu", key, (unsigned long long)value);
	else
		printf(",\"%s\":null", key);
}

/*
 * ,"kernel":{"release":...,"park":"first-return",...}: the kernel the run
 * was recorded on and the mechanism of each facility (MT_KERNEL_FACILITIES,
 * the header's kernel_* keys); null for one a file does not say.
 */
static void print_kernel_json(const struct mt_header *h)
{
#define MT_X_NAME(N, name, best, fallback) name,
	static const char *const names[] = { MT_KERNEL_FACILITIES(MT_X_NAME) };
#undef MT_X_NAME

	printf(",\"kernel\":{\"release\":");
	json_print_string(stdout, h->kernel_release);
	for (unsigned i = 0; i < MT_KERNEL_NFACILITIES; i++) {
		printf(",\"%s\":", names[i]);
		if (h->kernel_mech[i][0])
			json_print_string(stdout, h->kernel_mech[i]);
		else
			printf("null");
	}
	printf("}");
}

/* The trailer's stack_* keys: null when stacks were not recorded (or no trailer). */
static void print_stack_tables_json(const struct report *r)
{
	const struct mt_trailer *t = r->trailer;
	bool on = (r->hdr->flags & MT_HDR_STACKS) && t;

	print_opt_u64("stack_table_bytes", on, on ? t->stack_table_bytes : 0);
	print_opt_u64("stack_rows", on, on ? t->stack_rows : 0);
	print_opt_u64("stack_index_entries", on, on ? t->stack_index_entries : 0);
	print_opt_u64("stack_rows_cap", on, on ? t->stack_rows_cap : 0);
	print_opt_u64("stack_objects", on, on ? t->stack_objects : 0);
	print_opt_u64("stack_no_room", on, on ? t->stack_no_room : 0);
	print_opt_u64("stack_no_cfi", on, on ? t->stack_no_cfi : 0);
}

static int print_json(struct report *r)
{
	const struct analysis *a = &r->a;
	uint64_t total = 0;

	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		total += a->events[t];
	printf("{\"command\":");
	json_print_string(stdout, r->hdr->command);
	printf(",\"attached\":%s", r->hdr->flags & MT_HDR_ATTACHED ? "true" : "false");
	print_opt_u64("attach_ns", r->hdr->flags & MT_HDR_ATTACHED, r->hdr->attach_ns);
	printf(",\"duration_ns\":%llu,\"events\":%llu,\"events_by_type\":{",
	       (unsigned long long)duration_ns(r), (unsigned long long)total);
	for (unsigned t = 1, first = 1; t < MT_TYPE_MAX; t++) {
		printf("%s\"%s\":%llu", first ? "" : ",", mt_type_def(t)->name,
		       (unsigned long long)a->events[t]);
		first = 0;
	}
	printf("},\"dropped_events\":%llu,\"dropped_by_type\":{", (unsigned long long)r->dropped);
	for (unsigned t = 0; r->trailer && t < MT_DROP_SLOTS; t++)
		printf("%s\"%s\":%llu", t ? "," : "", t ? mt_type_def(t)->name : "unknown",
		       (unsigned long long)r->trailer->dropped[t]);
	printf("},\"unprobed_processes\":%llu",
	       r->trailer ? (unsigned long long)r->trailer->unprobed : 0ull);
	printf(",\"killed_in_call\":%llu",
	       r->trailer ? (unsigned long long)r->trailer->killed_in_call : 0ull);
	printf(",\"env_overflow\":%llu",
	       r->trailer ? (unsigned long long)r->trailer->env_overflow : 0ull);
	printf(",\"bad_records\":%llu", (unsigned long long)a->bad_records);
	printf(",\"truncated\":%s", r->truncated ? "true" : "false");
	if (r->trailer)
		printf(",\"exit_code\":%d,\"exit_signal\":%d", r->trailer->exit_code,
		       r->trailer->exit_signal);
	printf(",\"alloc_count\":%llu,\"total_allocated_bytes\":%llu,\"free_count\":%llu"
	       ",\"unknown_free_count\":%llu"
	       ",\"peak_heap_bytes\":%llu,\"leaked_count\":%llu,\"leaked_bytes\":%llu",
	       (unsigned long long)a->alloc_count, (unsigned long long)a->total_allocated_bytes,
	       (unsigned long long)a->free_count, (unsigned long long)a->unknown_free_count,
	       (unsigned long long)a->peak_live_bytes, (unsigned long long)a->leaked_count,
	       (unsigned long long)a->leaked_bytes);
	printf(",\"peak_mapped_bytes\":%llu,\"peak_memory_bytes\":%llu,\"mapped_count\":%llu"
	       ",\"leaked_mapped_bytes\":%llu",
	       (unsigned long long)a->peak_mapped_bytes, (unsigned long long)a->peak_memory_bytes,
	       (unsigned long long)a->mapped_count, (unsigned long long)a->leaked_mapped_bytes);
	print_opt_u64("peak_rss_bytes", a->has_rss, a->peak_rss_bytes);
	print_opt_u64("peak_physical_bytes", r->physical, a->peak_physical_bytes);
	print_stack_tables_json(r);
	print_kernel_json(r->hdr);
	printf(",\"markers\":[");
	for (unsigned i = 0; i < a->nmarks; i++) {
		printf("%s{\"name\":", i ? "," : "");
		json_print_string(stdout, a->marks[i].name);
		printf(",\"ts\":%llu,\"pid\":%u}", (unsigned long long)a->marks[i].ts,
		       a->marks[i].pid);
	}
	printf("],\"enabled_windows\":[");
	for (unsigned i = 0; i < a->nwindows; i++)
		printf("%s{\"start_ns\":%llu,\"end_ns\":%llu}", i ? "," : "",
		       (unsigned long long)window_start(r, &a->windows[i]),
		       (unsigned long long)window_end(r, &a->windows[i]));
	printf("],\"processes\":[");
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct proc_summary *p = &a->procs[i];

		printf("%s{\"pid\":%u,\"ppid\":%u,\"command\":", i ? "," : "", p->pid, p->ppid);
		json_print_string(stdout, p->command);
		printf(",\"alloc_count\":%llu,\"allocated_bytes\":%llu,\"peak_heap_bytes\":%llu"
		       ",\"leaked_bytes\":%llu",
		       (unsigned long long)p->allocs, (unsigned long long)p->allocated_bytes,
		       (unsigned long long)p->peak_heap_bytes, (unsigned long long)p->leaked_bytes);
		printf(",\"peak_mapped_bytes\":%llu,\"peak_memory_bytes\":%llu,\"mapped_count\":%llu"
		       ",\"leaked_mapped_bytes\":%llu",
		       (unsigned long long)p->peak_mapped_bytes,
		       (unsigned long long)p->peak_memory_bytes,
		       (unsigned long long)p->mapped_count,
		       (unsigned long long)p->leaked_mapped_bytes);
		print_opt_u64("peak_rss_bytes", a->has_rss, p->peak_rss_bytes);
		printf(",\"heap_path\":\"%s\",\"unwinder\":\"%s\",\"bad_records\":%llu",
		       p->fast_heap ? "in-process" : "uprobes", proc_unwinder(p),
		       (unsigned long long)p->bad_records);
		if (p->exited)
			printf(",\"exit_code\":%lld,\"exit_signal\":%u", (long long)p->exit_code,
			       p->exit_signal);
		printf("}");
	}
	printf("]");
	if (r->top) {
		printf(",\"top\":");
		if (report_top_print(&r->a, &r->stacks, r->sym, r->top, true))
			return -ENOMEM;
	}
	printf("}\n");
	return 0;
}

/* ,"peak_mapped_bytes":..,"leaked_mapped_bytes":.. (METRICS.md "Mapped memory"). */
static void print_mapped_json(uint64_t peak, uint64_t memory, uint64_t count, uint64_t leaked)
{
	printf(",\"peak_mapped_bytes\":%llu,\"peak_memory_bytes\":%llu,\"mapped_count\":%llu"
	       ",\"leaked_mapped_bytes\":%llu",
	       (unsigned long long)peak, (unsigned long long)memory, (unsigned long long)count,
	       (unsigned long long)leaked);
}

/*
 * ,"processes":[..] of a section: each process a record inside it named,
 * with its command in the whole run.
 */
static void print_section_procs(const struct report *r, const struct analysis *a)
{
	printf(",\"processes\":[");
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct proc_summary *p = &a->procs[i];
		const struct proc_summary *w = analysis_proc(&r->a, p->pid);

		printf("%s{\"pid\":%u,\"command\":", i ? "," : "", p->pid);
		json_print_string(stdout, w ? w->command : p->command);
		printf(",\"alloc_count\":%llu,\"allocated_bytes\":%llu,\"peak_heap_bytes\":%llu"
		       ",\"leaked_bytes\":%llu",
		       (unsigned long long)p->allocs, (unsigned long long)p->allocated_bytes,
		       (unsigned long long)p->peak_heap_bytes, (unsigned long long)p->leaked_bytes);
		print_mapped_json(p->peak_mapped_bytes, p->peak_memory_bytes, p->mapped_count,
				  p->leaked_mapped_bytes);
		printf("}");
	}
	printf("]");
}

/* `--between`: the section's numbers only. */
static void print_section(const struct report *r, const struct section *s, bool json)
{
	const struct analysis *a = &s->a;
	uint64_t dur = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
	char b1[32], b2[32], cmd[PRINTABLE_LEN(sizeof(r->hdr->command))];

	if (json) {
		printf("{\"from\":");
		json_print_string(stdout, s->from);
		printf(",\"to\":");
		json_print_string(stdout, s->to);
		printf(",\"start_ns\":%llu,\"end_ns\":%llu,\"duration_ns\":%llu"
		       ",\"alloc_count\":%llu,\"total_allocated_bytes\":%llu,\"free_count\":%llu"
		       ",\"peak_heap_bytes\":%llu,\"leaked_count\":%llu,\"leaked_bytes\":%llu",
		       (unsigned long long)s->start_ns, (unsigned long long)s->end_ns,
		       (unsigned long long)dur, (unsigned long long)a->alloc_count,
		       (unsigned long long)a->total_allocated_bytes,
		       (unsigned long long)a->free_count, (unsigned long long)a->peak_live_bytes,
		       (unsigned long long)a->leaked_count, (unsigned long long)a->leaked_bytes);
		print_mapped_json(a->peak_mapped_bytes, a->peak_memory_bytes, a->mapped_count,
				  a->leaked_mapped_bytes);
		printf(",\"heap_recording_complete\":%s", section_complete(s) ? "true" : "false");
		print_section_procs(r, a);
		printf("}\n");
		return;
	}
	printf("command:      %s\n", printable(r->hdr->command, cmd, sizeof(cmd)));
	printf("section:      mark '%s' (+%.6f s) .. mark '%s' (+%.6f s): %.3f ms\n", s->from,
	       rel_s(r, s->start_ns), s->to, rel_s(r, s->end_ns), dur / 1e6);
	printf("allocations:  %llu (%s requested), %llu frees\n",
	       (unsigned long long)a->alloc_count,
	       human_bytes(a->total_allocated_bytes, b1, sizeof(b1)),
	       (unsigned long long)a->free_count);
	printf("peak heap:    %s live (of the section's allocations)\n",
	       human_bytes(a->peak_live_bytes, b1, sizeof(b1)));
	printf("leaked:       %llu allocations, %s not freed by the end of the section\n",
	       (unsigned long long)a->leaked_count, human_bytes(a->leaked_bytes, b2, sizeof(b2)));
	print_mapped_text(a, "at the end of the section");
	if (!section_complete(s))
		printf("note:         heap recording was off during part of the section; its allocations then are not counted\n");
}

/*
 * Says which mark of --between is missing and which marks there are.
 * Returns 1 (the exit status).
 */
static int section_missing(const char *path, const struct report *r, const struct section *s)
{
	char names[1024] = "", name[PRINTABLE_LEN(sizeof(r->a.marks[0].name))];
	size_t used = 0;

	for (unsigned i = 0; i < r->a.nmarks && used < sizeof(names); i++)
		used += snprintf(names + used, sizeof(names) - used, "%s'%s'", i ? ", " : "",
				 printable(r->a.marks[i].name, name, sizeof(name)));
	if (s->state == SECTION_BEFORE)
		die_msg("%s has no mark '%s'; its marks: %s (see memtrack report %s)", path,
			s->from, r->a.nmarks ? names : "none", path);
	else
		die_msg("%s has no mark '%s' after mark '%s'; its marks: %s (see memtrack report %s)",
			path, s->to, s->from, names, path);
	return 1;
}

/* Writes the timeline to @path as HTML or SVG; returns 0 or 1 (after saying why). */
static int write_picture(const struct report *r, const struct timeline *tl, const char *path,
			 bool html, bool per_process)
{
	struct timeline_meta m = {
		.command = r->hdr->command,
		.a = &r->a,
		.physical = r->physical,
		.per_process = per_process,
	};
	FILE *f = output_fopen(path, html ? "--html" : "--svg");
	int err;

	if (!f)
		return 1; /* said why */
	err = html ? timeline_write_html(tl, &m, f) : timeline_write_svg(tl, &m, f);
	if (err || fflush(f) || ferror(f)) {
		die_msg("cannot write '%s': %s", path, strerror(err ? -err : errno));
		fclose(f);
		return 1;
	}
	if (fclose(f)) {
		die_msg("cannot write '%s': %s", path, strerror(errno));
		return 1;
	}
	return 0;
}

/* --top N: a count of call sites, 1 or more. */
static int parse_top(const char *arg, size_t *n)
{
	char *end;
	unsigned long v;

	if (!arg) {
		die_msg("--top needs a number of call sites, e.g. --top 10");
		return -EINVAL;
	}
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (*end || end == arg || arg[0] == '-' || !v || errno || v > 1000000) {
		die_msg("--top takes a number of call sites from 1 to 1000000, not '%s'", arg);
		return -EINVAL;
	}
	*n = v;
	return 0;
}

#define REPORT_USAGE                                                                              \
	"usage: memtrack report FILE [--json] [--html OUT.html] [--svg OUT.svg] [--per-process] " \
	"[--between MARK_A MARK_B] [--top N]; see memtrack help report"

int cmd_report(int argc, char **argv)
{
	const char *html = NULL, *svg = NULL;
	bool per_process = false;
	struct timeline *tl = NULL;
	struct report r = { .error = "" };
	const char *path = NULL;
	bool json = false;
	const char *from = NULL, *to = NULL;
	struct section sec;
	struct mt_reader *rd;
	struct mt_event ev;
	char err[512];
	int ret;

	if (help_wanted(argc, argv))
		return help_show("report");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--between")) {
			if (i + 2 >= argc) {
				die_msg("--between needs two mark names; usage: memtrack report FILE --between MARK_A MARK_B; see memtrack help report");
				return 2;
			}
			from = argv[++i];
			to = argv[++i];
		} else if (!strcmp(argv[i], "--per-process"))
			per_process = true;
		else if (!strcmp(argv[i], "--top")) {
			if (parse_top(i + 1 < argc ? argv[i + 1] : NULL, &r.top))
				return 2;
			i++;
		} else if (!strcmp(argv[i], "--html") || !strcmp(argv[i], "--svg")) {
			if (i + 1 == argc) {
				die_msg("%s needs an output file; " REPORT_USAGE, argv[i]);
				return 2;
			}
			if (!strcmp(argv[i], "--html"))
				html = argv[++i];
			else
				svg = argv[++i];
		} else if (argv[i][0] == '-' || path) {
			die_msg("unknown argument '%s'; " REPORT_USAGE, argv[i]);
			return 2;
		} else
			path = argv[i];
	}
	if (!path) {
		die_msg("no file given; " REPORT_USAGE);
		return 2;
	}
	if (per_process && !html && !svg) {
		die_msg("--per-process shapes the timeline; add --html OUT.html or --svg OUT.svg");
		return 2;
	}
	rd = mt_reader__open(path, err, sizeof(err));
	if (!rd) {
		die_msg("cannot read '%s': %s", path, err);
		return 1;
	}
	if (r.top && from) {
		die_msg("--top ranks the call sites of the whole run; drop --between or --top");
		mt_reader__free(rd);
		return 2;
	}
	/* stacks recorded: the text report names the top sites by peak heap */
	if (!json && !r.top && !from && (mt_reader__header(rd)->flags & MT_HDR_STACKS))
		r.brief_top = 3;
	analysis_init(&r.a);
	stack_table_init(&r.stacks);
	r.a.heap_off = mt_reader__header(rd)->flags & MT_HDR_START_DISABLED;
	section_init(&sec, from, to);
	analysis_set_page_size(&r.a, mt_reader__header(rd)->page_size);
	analysis_set_page_size(&sec.a, mt_reader__header(rd)->page_size);
	if (html || svg) {
		tl = timeline__new(mt_reader__header(rd)->start_ns, per_process);
		if (!tl) {
			die_msg("out of memory");
			mt_reader__free(rd);
			return 1;
		}
		timeline_attach(tl, &r.a);
	}
	while ((ret = mt_reader__next(rd, &ev)) == 1)
		if ((from && section_add(&sec, &ev, &r.a)) || analysis_add(&r.a, &ev) ||
		    ((r.top || r.brief_top) && stack_table_add_event(&r.stacks, &ev) == -ENOMEM)) {
			ret = -ENOMEM;
			break;
		}
	/* a truncated file still ranks the call sites of the events before the cut */
	if ((r.top || r.brief_top) && (ret >= 0 || ret == -ENODATA) &&
	    !(r.sym = cli_symbolizer_new()))
		ret = -ENOMEM;
	analysis_finish(&r.a);
	r.hdr = mt_reader__header(rd);
	r.trailer = mt_reader__trailer(rd);
	r.truncated = ret == -ENODATA;
	r.physical = r.a.has_physical || (r.hdr->flags & MT_HDR_PHYSICAL);
	r.error = mt_reader__error(rd);
	if (r.trailer)
		for (int i = 0; i < MT_DROP_SLOTS; i++)
			r.dropped += r.trailer->dropped[i];
	if (ret < 0 && ret != -ENODATA) {
		die_msg("%s: %s", path, ret == -ENOMEM ? "out of memory" : mt_reader__error(rd));
		ret = 1;
	} else if (from && sec.state != SECTION_DONE) {
		ret = section_missing(path, &r, &sec);
	} else {
		/* --between summarises the section; a picture still shows the whole run */
		int perr = 0;

		if (from)
			print_section(&r, &sec, json);
		else
			perr = json ? print_json(&r) : print_text(&r);
		ret = close_stdout("report");
		if (perr) {
			die_msg("out of memory while printing the call sites");
			ret = 1;
		}
		if (r.sym)
			symbolizer__save(r.sym);
		if (tl)
			timeline_finish(tl, r.hdr->start_ns + duration_ns(&r));
		if (html && !ret)
			ret = write_picture(&r, tl, html, true, per_process);
		if (svg && !ret)
			ret = write_picture(&r, tl, svg, false, per_process);
	}
	timeline__free(tl);
	symbolizer__free(r.sym);
	stack_table_release(&r.stacks);
	analysis_release(&r.a);
	section_release(&sec);
	mt_reader__free(rd);
	return ret;
}
