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
#include "analyze/filter.h"
#include "analyze/proc_groups.h"
#include "format/artifact.h"
#include "cli/cli.h"
#include "format/json.h"
#include "cli/help.h"
#include "cli/report_top.h"
#include "format/schema.h"
#include "analyze/report_html.h"
#include "analyze/timeline.h"

struct report {
	struct analysis a;
	const struct mt_header *hdr;
	const struct mt_trailer *trailer; /* NULL when truncated */
	bool truncated;
	bool physical; /* physical was recorded (maybe no change seen) */
	uint64_t dropped;
	const char *error;   /* reader's message, "" if none */
	size_t top;	     /* --top N: call sites per ranking, 0 = no rankings */
	size_t brief_top;    /* text, stacks recorded, no --top: this many sites by peak heap */
	bool by_stack;	     /* --by stack: text ranks whole stacks, not functions */
	bool sizes;	     /* --sizes: the size histogram in text */
	enum proc_sort sort; /* --sort: the process table's order */
	bool sort_given;
	struct proc_filter filter; /* --pid, --comm */
	bool html_stacks; /* --html of a run with stacks: the page's sites and flame graph */
	struct stack_table stacks;
	struct symbolizer *sym; /* owned; only with --top, brief_top or html_stacks */
};

/* Whether the call stacks are read (and a symbolizer is made). */
static bool wants_stacks(const struct report *r)
{
	return r->top || r->brief_top || r->html_stacks;
}

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

static const char *const py_verdicts[] = {
	[MT_PY_OFF] = "off (--no-python-frames)",
	[MT_PY_ON] = "Python frames in its stacks",
	[MT_PY_UNSUPPORTED] = "a version memtrack has no offsets for: native frames only",
	[MT_PY_UNREADABLE] = "its symbols or version could not be read: native frames only",
};

/* "3.11.2" of PY_VERSION_HEX @v in @buf. */
static const char *py_version(uint32_t v, char *buf, size_t len)
{
	if (!v)
		return "?";
	snprintf(buf, len, "%u.%u.%u", v >> 24, v >> 16 & 0xff, v >> 8 & 0xff);
	return buf;
}

/* The CPython interpreters the run had (PYTHON records) and whether their stacks show Python frames. */
static void print_python_text(const struct analysis *a)
{
	char v[32];

	for (unsigned i = 0; i < a->npython; i++)
		printf("python:       %s, %s\n", py_version(a->python[i].version, v, sizeof(v)),
		       a->python[i].verdict < 4 ? py_verdicts[a->python[i].verdict] : "unknown");
}

static void print_python_json(const struct analysis *a)
{
	char v[32];

	printf(",\"python\":[");
	for (unsigned i = 0; i < a->npython; i++)
		printf("%s{\"version\":\"%s\",\"frames\":%s}", i ? "," : "",
		       py_version(a->python[i].version, v, sizeof(v)),
		       a->python[i].verdict == MT_PY_ON ? "true" : "false");
	printf("]");
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

/* The machine the run was recorded on (the header's arch and kernel_release); nothing for a file older than arch. */
static void print_recorded_on(const struct mt_header *h)
{
	char arch[PRINTABLE_LEN(sizeof(h->arch))], kr[PRINTABLE_LEN(sizeof(h->kernel_release))];

	if (h->arch[0])
		printf("recorded on:  %s, Linux %s\n", printable(h->arch, arch, sizeof(arch)),
		       printable(h->kernel_release, kr, sizeof(kr)));
}

/* Seconds of the recording, for rates; 0 when it has no length. */
static double duration_s(const struct report *r)
{
	return duration_ns(r) / 1e9;
}

/* Temporary allocations (METRICS.md): how many, how often, what share. */
static void print_temporary_text(const struct report *r)
{
	const struct analysis *a = &r->a;

	printf("temporary:    %llu allocation%s freed before their thread allocated again",
	       (unsigned long long)a->temporary_count, plural(a->temporary_count));
	if (duration_s(r) > 0)
		printf(" (%.0f/s", a->temporary_count / duration_s(r));
	else
		printf(" (");
	if (a->alloc_count)
		printf("%s%.1f%% of allocations", duration_s(r) > 0 ? ", " : "",
		       100.0 * a->temporary_count / a->alloc_count);
	printf(")\n");
}

/* One row of the process table: a process, or a fold of several ("bash ×38"). */
static void print_proc_row(const struct report *r, const struct proc_group *g)
{
	const struct proc_summary *p = g->first;
	char b1[32], b2[32], cmd[PRINTABLE_LEN(sizeof(p->command))], who[64];

	printable(p->command[0] ? p->command : "?", cmd, sizeof(cmd));
	if (g->count == 1) {
		printf("  %-7u ppid %-7u %-16s", p->pid, p->ppid, cmd);
	} else { /* "bash ×38 (pids 120..161)": the first and the last seen */
		fputs("  ", stdout);
		fputs(cmd, stdout);
		snprintf(who, sizeof(who), " \u00d7%u (pids %u..%u)", g->count, p->pid,
			 g->last->pid);
		fputs(who, stdout);
	}
	printf(" %8llu alloc%s %10s", (unsigned long long)g->allocs, plural(g->allocs),
	       human_bytes(g->allocated_bytes, b1, sizeof(b1)));
	printf("  peak heap %s", human_bytes(g->peak_heap_bytes, b2, sizeof(b2)));
	if (g->peak_mapped_bytes)
		printf("  peak mapped %s", human_bytes(g->peak_mapped_bytes, b2, sizeof(b2)));
	if (r->a.has_rss)
		printf("  peak RSS %s", human_bytes(g->peak_rss_bytes, b2, sizeof(b2)));
	if (g->count > 1)
		printf(" (largest)");
	if (g->count == 1 && p->fast_heap)
		printf("  heap in-process");
	if (g->count == 1 && (r->hdr->flags & MT_HDR_STACKS))
		printf("  unwinder %s", proc_unwinder(p));
	if (g->count == 1 && p->left)
		printf("  left (%s)", proc_left_reason(p));
	printf("\n");
}

#define PROC_ROWS 20 /* rows of the text process table */

static const char *const sort_titles[PROC_SORT_N] = {
	"peak RSS",	"peak heap",   "allocations",		"allocated bytes",
	"leaked bytes", "peak memory", "temporary allocations", "pid",
};

/* The process table: ranked, short-lived twins folded (proc_groups.h). */
static int print_procs_text(const struct report *r)
{
	const struct analysis *a = &r->a;
	size_t n = 0, folded = 0, rows = 0;
	struct proc_group *g = proc_groups(a, r->sort, &n);
	char desc[256];

	if (!g && a->nprocs)
		return -ENOMEM;
	for (size_t i = 0; g && i < n; i++) {
		folded += g[i].count > 1 ? g[i].count : 0;
		rows += g[i].count > 1;
	}
	printf("processes:    %u", a->nprocs);
	if (proc_filter_active(&r->filter))
		printf(" of %llu (%s)", (unsigned long long)r->filter.nprocs,
		       proc_filter_describe(&r->filter, desc, sizeof(desc)));
	printf(", by %s", sort_titles[r->sort]);
	if (folded)
		printf("; %zu short-lived processes folded into %zu row%s by command", folded, rows,
		       plural(rows));
	if (n > PROC_ROWS)
		printf("; the first %d rows (report --json lists all)", PROC_ROWS);
	printf("\n");
	for (size_t i = 0; g && i < n && i < PROC_ROWS; i++)
		print_proc_row(r, &g[i]);
	free(g);
	return 0;
}

/* 2^@k bytes exactly: "512 B", "1 KiB", "16 EiB". */
static const char *pow2_text(unsigned k, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

	snprintf(buf, len, "%llu %s", 1ull << (k % 10), unit[k / 10]);
	return buf;
}

/* report --sizes: the power-of-two size histogram. */
static void print_sizes_text(const struct analysis *a)
{
	uint64_t most = 0;
	char b1[32], b2[32], range[80];

	for (unsigned b = 0; b < SIZE_BUCKETS; b++)
		if (a->sizes.count[b] > most)
			most = a->sizes.count[b];
	printf("\nallocation sizes (powers of two):\n");
	if (!most)
		printf("  (no allocation)\n");
	for (unsigned b = 0; b < SIZE_BUCKETS; b++) {
		uint64_t c = a->sizes.count[b];
		int bar;

		if (!c)
			continue;
		if (b <= 1)
			snprintf(range, sizeof(range), "%s", b ? "1 B" : "0 B");
		else
			snprintf(range, sizeof(range), "%s .. < %s",
				 pow2_text(b - 1, b1, sizeof(b1)), pow2_text(b, b2, sizeof(b2)));
		bar = (int)((c * 40 + most - 1) / most);
		printf("  %-22s %10llu allocation%s %10s  %.*s\n", range, (unsigned long long)c,
		       c == 1 ? " " : "s", human_bytes(a->sizes.bytes[b], b1, sizeof(b1)), bar,
		       "########################################");
	}
}

/*
 * The processes the kernel's OOM killer chose: when, what heap they held
 * then, their peak RSS (their RSS at the kill: the OOM reaper and their
 * exit unmapped it before the OOM record, see METRICS.md "OOM kills").
 */
static void print_oom_text(const struct report *r)
{
	const struct analysis *a = &r->a;
	char b1[32], b2[32], cmd[PRINTABLE_LEN(sizeof(a->procs[0].command))];

	for (unsigned i = 0; a->oom_procs && i < a->nprocs; i++) {
		const struct proc_summary *p = &a->procs[i];

		if (!p->oom_killed)
			continue;
		printf("oom kill:     %u (%s) killed by the kernel's OOM killer at %.3f s, holding %s of heap in %llu allocation%s",
		       p->pid, printable(p->command, cmd, sizeof(cmd)), rel_s(r, p->oom_ts),
		       human_bytes(p->oom_live_bytes, b1, sizeof(b1)),
		       (unsigned long long)p->oom_live_count, plural(p->oom_live_count));
		if (a->has_rss)
			printf(", peak RSS %s", human_bytes(p->peak_rss_bytes, b2, sizeof(b2)));
		printf(" (oom_score_adj %lld; memtrack report --pid %u --top 5 on this file: the functions that held it)\n",
		       (long long)p->oom_score_adj, p->pid);
	}
}

static int print_text(struct report *r)
{
	const struct analysis *a = &r->a;
	char b1[32], b2[32], b3[32], cmd[PRINTABLE_LEN(sizeof(r->hdr->command))], note[256];

	printf("command:      %s\n", printable(r->hdr->command, cmd, sizeof(cmd)));
	print_recorded_on(r->hdr);
	printf("duration:     %.3f s%s\n", duration_ns(r) / 1e9,
	       r->truncated ? " (file truncated)" : "");
	if (r->hdr->flags & MT_HDR_ATTACHED)
		printf("attached:     to a running process; %llu frees of blocks allocated before (not seen)\n",
		       (unsigned long long)a->unknown_free_count);
	else if (r->trailer)
		printf("exit:         %s %d\n", r->trailer->exit_signal ? "signal" : "code",
		       r->trailer->exit_signal ? r->trailer->exit_signal : r->trailer->exit_code);
	printf("allocations:  %llu (%s requested), %llu free%s\n",
	       (unsigned long long)a->alloc_count,
	       human_bytes(a->total_allocated_bytes, b1, sizeof(b1)),
	       (unsigned long long)a->free_count, plural(a->free_count));
	if (analysis_sampling_note(a, note, sizeof(note)))
		printf("sampling:     %s\n", note);
	printf("peak heap:    %s live\n", human_bytes(a->peak_live_bytes, b1, sizeof(b1)));
	printf("leaked:       %llu allocation%s, %s never freed\n",
	       (unsigned long long)a->leaked_count, plural(a->leaked_count),
	       human_bytes(a->leaked_bytes, b2, sizeof(b2)));
	if (a->attached)
		printf("live at end:  %llu allocation%s, %s held by %u process%s still running (not leaks: they may yet be freed)\n",
		       (unsigned long long)a->live_end_count, plural(a->live_end_count),
		       human_bytes(a->live_end_bytes, b2, sizeof(b2)), a->live_end_procs,
		       a->live_end_procs == 1 ? "" : "es");
	print_temporary_text(r);
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
	if (a->cut_rings)
		printf("lost:         the heap calls of %u processes after their in-process ring was cut off (ring_cut_off: the process broke the ring's protocol, nothing more of it was read)\n",
		       a->cut_rings);
	if (r->trailer && r->trailer->killed_in_call)
		printf("cut short:    %llu heap calls a killed process was inside (they never returned: not recorded)\n",
		       (unsigned long long)r->trailer->killed_in_call);
	if (r->trailer && r->trailer->env_overflow)
		printf("exec'd:       %llu processes exec'd a program on the uprobes (too large an environment to keep it in-process; recorded exactly there)\n",
		       (unsigned long long)r->trailer->env_overflow);
	if (a->bad_records)
		printf("refused:      %llu forged records of the in-process rings, from %u processes\n",
		       (unsigned long long)a->bad_records, a->bad_procs);
	print_oom_text(r);
	if (a->left_procs)
		printf("left:         %u processes left the recording: they exec'd a privileged program or made themselves undumpable, so the user who ran sudo may not trace them\n",
		       a->left_procs);
	print_stack_tables_text(r);
	print_python_text(&r->a);
	print_control_text(r);
	if (print_procs_text(r))
		return -ENOMEM;
	if (r->sizes)
		print_sizes_text(a);
	if (r->truncated)
		printf("warning:      %s\n", r->error);
	if (r->top)
		return report_top_print(
			&r->a, &r->stacks, r->sym,
			&(struct top_opts){ .n = r->top, .json = false, .by_stack = r->by_stack });
	if (!r->brief_top)
		return 0;
	return report_top_print_peak(
		&r->a, &r->stacks, r->sym,
		&(struct top_opts){ .n = r->brief_top, .json = false, .by_stack = r->by_stack });
}

/* Prints ,"key":value, or ,"key":null when the run did not record it. */
static void print_opt_u64(const char *key, bool recorded, uint64_t value)
{
	if (recorded)
		printf(",\"%s\":%llu", key, (unsigned long long)value);
	else
		printf(",\"%s\":null", key);
}

/* ,"oom_kills":[{pid, command, ts, heap_live_bytes, heap_live_count, peak_rss_bytes, oom_score_adj}] */
static void print_oom_json(const struct report *r)
{
	const struct analysis *a = &r->a;
	unsigned n = 0;

	printf(",\"oom_kills\":[");
	for (unsigned i = 0; i < a->nprocs; i++) {
		const struct proc_summary *p = &a->procs[i];

		if (!p->oom_killed)
			continue;
		printf("%s{\"pid\":%u,\"command\":", n++ ? "," : "", p->pid);
		json_print_string(stdout, p->command);
		printf(",\"ts\":%llu,\"heap_live_bytes\":%llu,\"heap_live_count\":%llu",
		       (unsigned long long)p->oom_ts, (unsigned long long)p->oom_live_bytes,
		       (unsigned long long)p->oom_live_count);
		print_opt_u64("peak_rss_bytes", a->has_rss, p->peak_rss_bytes);
		printf(",\"oom_score_adj\":%lld}", (long long)p->oom_score_adj);
	}
	printf("]");
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

/* ,"temporary_count":N,"temporary_per_s":R (null for a run of no length). */
static void print_temporary_json(const struct report *r)
{
	printf(",\"temporary_count\":%llu,\"temporary_per_s\":",
	       (unsigned long long)r->a.temporary_count);
	if (duration_s(r) > 0)
		printf("%.3f", r->a.temporary_count / duration_s(r));
	else
		printf("null");
}

/* ,"sizes":[{"min":..,"max":..,"count":..,"bytes":..}...]: the non-empty buckets. */
static void print_sizes_json(const struct analysis *a)
{
	bool first = true;

	printf(",\"sizes\":[");
	for (unsigned b = 0; b < SIZE_BUCKETS; b++) {
		if (!a->sizes.count[b])
			continue;
		printf("%s{\"min\":%llu,\"max\":%llu,\"count\":%llu,\"bytes\":%llu}",
		       first ? "" : ",", (unsigned long long)size_bucket_min(b),
		       (unsigned long long)size_bucket_max(b),
		       (unsigned long long)a->sizes.count[b],
		       (unsigned long long)a->sizes.bytes[b]);
		first = false;
	}
	printf("]");
}

/* ,"filter":{"pids":[..],"comms":[..],"processes_seen":N}, or null without one. */
static void print_filter_json(const struct report *r)
{
	const struct proc_filter *f = &r->filter;

	if (!proc_filter_active(f)) {
		printf(",\"filter\":null");
		return;
	}
	printf(",\"filter\":{\"pids\":[");
	for (unsigned i = 0; i < f->npids; i++)
		printf("%s%u", i ? "," : "", f->pids[i]);
	printf("],\"comms\":[");
	for (unsigned i = 0; i < f->ncomms; i++) {
		printf("%s", i ? "," : "");
		json_print_string(stdout, f->comms[i]);
	}
	printf("],\"processes_seen\":%llu}", (unsigned long long)f->nprocs);
}

static int print_json(struct report *r)
{
	const struct analysis *a = &r->a;
	uint64_t total = 0;

	for (unsigned t = 1; t < MT_TYPE_MAX; t++)
		total += a->events[t];
	printf("{\"command\":");
	json_print_string(stdout, r->hdr->command);
	printf(",\"arch\":"); /* null: an older writer did not say */
	if (r->hdr->arch[0])
		json_print_string(stdout, r->hdr->arch);
	else
		printf("null");
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
	printf(",\"bad_records\":%llu,\"left_processes\":%u", (unsigned long long)a->bad_records,
	       a->left_procs);
	/* what was lost, by cause: records, processes unprobed, rings cut off (calls unknown) */
	printf(",\"ring_cut_off\":%u,\"lost_by_cause\":{\"ring_buffer_full\":%llu,\"unprobed\":%llu,"
	       "\"ring_cut_off\":%u}",
	       a->cut_rings, (unsigned long long)r->dropped,
	       r->trailer ? (unsigned long long)r->trailer->unprobed : 0ull, a->cut_rings);
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
	print_temporary_json(r);
	printf(",\"live_at_end_count\":%llu,\"live_at_end_bytes\":%llu,\"live_at_end_processes\":%u",
	       (unsigned long long)a->live_end_count, (unsigned long long)a->live_end_bytes,
	       a->live_end_procs);
	print_oom_json(r);
	print_sizes_json(a);
	print_filter_json(r);
	analysis_sampling_json(a, stdout);
	print_stack_tables_json(r);
	print_python_json(&r->a);
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
		printf(",\"temporary_count\":%llu,\"live_at_end_count\":%llu,\"live_at_end_bytes\":%llu",
		       (unsigned long long)p->temporary, (unsigned long long)p->live_end_count,
		       (unsigned long long)p->live_end_bytes);
		printf(",\"heap_path\":\"%s\",\"unwinder\":\"%s\",\"bad_records\":%llu",
		       p->fast_heap ? "in-process" : "uprobes", proc_unwinder(p),
		       (unsigned long long)p->bad_records);
		if (p->exited)
			printf(",\"exit_code\":%lld,\"exit_signal\":%u", (long long)p->exit_code,
			       p->exit_signal);
		if (p->left)
			printf(",\"left\":\"%s\"", proc_left_reason(p));
		printf("}");
	}
	printf("]");
	if (r->top) {
		printf(",\"by\":\"%s\",\"top\":", r->by_stack ? "stack" : "function");
		if (report_top_print(&r->a, &r->stacks, r->sym,
				     &(struct top_opts){ .n = r->top, .json = true }))
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
	printf("allocations:  %llu (%s requested), %llu free%s\n",
	       (unsigned long long)a->alloc_count,
	       human_bytes(a->total_allocated_bytes, b1, sizeof(b1)),
	       (unsigned long long)a->free_count, plural(a->free_count));
	printf("peak heap:    %s live (of the section's allocations)\n",
	       human_bytes(a->peak_live_bytes, b1, sizeof(b1)));
	printf("leaked:       %llu allocation%s, %s not freed by the end of the section\n",
	       (unsigned long long)a->leaked_count, plural(a->leaked_count),
	       human_bytes(a->leaked_bytes, b2, sizeof(b2)));
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

/* The whole report as one page (report_html.h), its timeline drawn by @m. */
static int write_html(const struct report *r, const struct timeline *tl,
		      const struct timeline_meta *m, FILE *f)
{
	struct report_html_in in = {
		.command = r->hdr->command,
		.a = &r->a,
		.tl = tl,
		.meta = m,
		.st = r->html_stacks ? &r->stacks : NULL,
		.sym = r->sym,
		.start_ns = r->hdr->start_ns,
		.duration_ns = duration_ns(r),
		.dropped = r->dropped,
		.attached = r->hdr->flags & MT_HDR_ATTACHED,
		.has_exit = r->trailer && !(r->hdr->flags & MT_HDR_ATTACHED),
		.exit_code = r->trailer ? r->trailer->exit_code : 0,
		.exit_signal = r->trailer ? r->trailer->exit_signal : 0,
		.truncated = r->truncated,
		.kernel = r->hdr->kernel_release,
	};

	return report_html_write(&in, f);
}

/* Writes the report page (--html) or the timeline (--svg) to @path; returns 0 or 1 (after saying why). */
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
	err = html ? write_html(r, tl, &m, f) : timeline_write_svg(tl, &m, f);
	if (err || fflush(f) || ferror(f)) {
		die_msg("cannot write '%s': %s", path, strerror(err ? -err : errno));
		fclose(f);
		return 1;
	}
	if (fclose(f)) {
		die_msg("cannot write '%s': %s", path, strerror(errno));
		return 1;
	}
	die_msg("wrote %s", path);
	return 0;
}

#define REPORT_USAGE                                                                              \
	"usage: memtrack report FILE [--json] [--html OUT.html] [--svg OUT.svg] [--per-process] " \
	"[--between MARK_A MARK_B] [--top N] [--by function|stack] [--sizes] [--sort KEY] "       \
	"[--pid PID] [--comm NAME]; see memtrack help report"

/*
 * The options that choose what the report shows: --pid, --comm, --top,
 * --by, --sort, --sizes.  Returns 1 (taken, *@i at its last word), 0 (not one of
 * them) or -1 after one line saying what is wrong.
 */
static int parse_view_arg(struct report *r, int argc, char **argv, int *i)
{
	const char *opt = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
	int k = cli_filter_arg(&r->filter, argc, argv, i);

	if (k)
		return k;
	if (!strcmp(opt, "--sizes")) {
		r->sizes = true;
		return 1;
	}
	k = cli_top_arg(argc, argv, i, &r->top, &r->by_stack);
	if (k)
		return k;
	if (strcmp(opt, "--sort") != 0)
		return 0;
	++*i;
	if (val && !proc_sort_parse(val, &r->sort)) {
		r->sort_given = true;
		return 1;
	}
	die_msg("--sort takes rss, peak, allocations, allocated, leaked, memory, temporary or pid, not '%s'",
		val ? val : "");
	return -1;
}

/* Folds a kept record into the report (and the section, the stacks); 0 or -ENOMEM. */
static int read_event(struct report *r, struct section *sec, const char *from,
		      const struct mt_event *ev)
{
	if ((from && section_add(sec, ev, &r->a)) || analysis_add(&r->a, ev))
		return -ENOMEM;
	if (wants_stacks(r) && stack_table_add_event(&r->stacks, ev) == -ENOMEM)
		return -ENOMEM;
	return 0;
}

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
		int k = parse_view_arg(&r, argc, argv, &i);

		if (k < 0) {
			proc_filter_release(&r.filter);
			return 2;
		}
		if (k)
			continue;
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
		else if (!strcmp(argv[i], "--html") || !strcmp(argv[i], "--svg")) {
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
	r.html_stacks = html && (mt_reader__header(rd)->flags & MT_HDR_STACKS);
	analysis_init(&r.a);
	stack_table_init(&r.stacks);
	r.a.heap_off = mt_reader__header(rd)->flags & MT_HDR_START_DISABLED;
	analysis_set_attached(&r.a, mt_reader__header(rd)->flags & MT_HDR_ATTACHED);
	section_init(&sec, from, to);
	r.a.filtered = sec.a.filtered = proc_filter_active(&r.filter);
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
	while ((ret = mt_reader__next(rd, &ev)) == 1) {
		int keep = proc_filter_keep(&r.filter, &ev);

		if (keep < 0 || (keep && read_event(&r, &sec, from, &ev))) {
			ret = -ENOMEM;
			break;
		}
	}
	/* a truncated file still ranks the call sites of the events before the cut */
	if (wants_stacks(&r) && (ret >= 0 || ret == -ENODATA) && !(r.sym = cli_symbolizer_new()))
		ret = -ENOMEM;
	analysis_finish(&r.a);
	if (!r.sort_given)
		r.sort = r.a.has_rss ? PROC_SORT_RSS : PROC_SORT_PEAK;
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
		if (tl)
			timeline_finish(tl, r.hdr->start_ns + duration_ns(&r));
		if (html && !ret)
			ret = write_picture(&r, tl, html, true, per_process);
		if (svg && !ret)
			ret = write_picture(&r, tl, svg, false, per_process);
		if (r.sym) /* after the page, which symbolizes its sites too */
			symbolizer__save(r.sym);
	}
	timeline__free(tl);
	symbolizer__free(r.sym);
	stack_table_release(&r.stacks);
	analysis_release(&r.a);
	section_release(&sec);
	proc_filter_release(&r.filter);
	mt_reader__free(rd);
	return ret;
}
