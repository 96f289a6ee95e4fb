/* SPDX-License-Identifier: MIT */
/*
 * analysis.h - offline aggregation of an artifact's event stream: counts,
 * heap totals and peaks, leaks, per-process RSS.  Used by report, diff,
 * export and the timeline.  docs/METRICS.md defines every number.
 *
 * Cost: constant per event.  Processes are found through a pid hash; each
 * process owns the table of its live heap blocks, so an exit or exec sweeps
 * that process's table only.  Memory grows with live allocations and
 * processes, never with the file's length.
 */
#ifndef MEMTRACK_ANALYSIS_H
#define MEMTRACK_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "format/artifact.h"
#include "analyze/mapped.h"
#include "analyze/sites.h"
#include "util/hash_index.h"

/*
 * Live heap blocks of one process: open addressing on the address, at most
 * half full; sized by the most blocks the process ever had live.
 */
struct live_table {
	struct live_slot *slots; /* owned; NULL until the first block */
	uint64_t nslots;	 /* power of two, or 0 */
	uint64_t nlive;		 /* occupied slots: live blocks */
};

struct proc_summary {
	/* the fields every heap record touches come first: one cache line */
	uint32_t pid;
	uint32_t ppid;		  /* 0 for the root or unknown */
	struct live_table live;	  /* this process's live blocks */
	uint64_t allocs;	  /* heap allocations */
	uint64_t allocated_bytes; /* bytes requested by them */
	uint64_t frees;		  /* free records (known or not) */
	uint64_t live_bytes;	  /* heap bytes allocated and not freed */
	uint64_t peak_heap_bytes; /* the most live_bytes ever was */
	uint64_t leaked_count;	  /* never freed before exit/exec/end */
	uint64_t leaked_bytes;
	uint64_t temporary;	 /* temporary allocations (METRICS.md "Temporary allocations") */
	uint64_t live_end_count; /* blocks still held at the end of an attach, alive then */
	uint64_t live_end_bytes;
	uint64_t rss_anon, rss_file, rss_shmem; /* bytes, last rss record */
	uint64_t rss_bytes;			/* anon + file + shmem now */
	uint64_t peak_rss_bytes;		/* the most it ever was */
	bool exited;
	uint32_t left;	   /* MT_LEFT_* when it left an attach made under sudo, else 0 */
	bool fast_heap;	   /* its current image records heap calls in-process (--fast) */
	bool fast_stacks;  /* ... and unwinds their stacks in-process (FAST's `stacks`) */
	int64_t exit_code; /* -1 when killed */
	uint32_t exit_signal;
	char command[64];     /* basename of the last exec'd path */
	uint64_t bad_records; /* records its --fast ring lied with, refused (REFUSED) */
	/* mapped memory: its own anonymous private mappings (METRICS.md) */
	struct mapped_set mapped;     /* its pages; mapped.bytes: mapped now */
	uint64_t peak_mapped_bytes;   /* the most mapped.bytes ever was */
	uint64_t peak_memory_bytes;   /* the most live_bytes + mapped.bytes ever was */
	uint64_t mapped_count;	      /* mmaps of its own counted */
	uint64_t leaked_mapped_bytes; /* still mapped at exit/exec/end */
	uint64_t brk;		      /* the program break, page aligned */
	bool brk_known;		      /* a brk record of this image was seen */
	/* --sample-bytes: its COUNTS record's exact totals (has_counts) */
	bool has_counts;
	uint64_t exact_allocs, exact_alloc_bytes, exact_frees;
	uint64_t sampled, unmatched; /* allocations recorded; sampled but not followable */
	/* heap records naming a stack: unwound by the kernel (an image on the
	 * uprobes) or in the process (an image on the in-process path); mmap
	 * records naming one (the kernel unwinds every syscall's) */
	uint64_t stacked_kernel, stacked_inprocess, stacked_mmap;
	/* the kernel's OOM killer chose it (OOM record, at its exit): its heap
	 * then, the blocks it held when it was killed */
	bool oom_killed;
	int64_t oom_score_adj;
	uint64_t oom_ts; /* ns */
	uint64_t oom_live_bytes, oom_live_count;
};

/*
 * Which unwinder gave @p's stacks: that of its heap records ("kernel" or
 * "in-process"; the one that gave more, for a process whose images ran on
 * both paths); without heap stacks "kernel" if its mmap records have some
 * (the kernel unwinds at the syscall), else "none".
 */
const char *proc_unwinder(const struct proc_summary *p);

/* Why @p left the recording (p->left set): "privileged exec" or "undumpable". */
const char *proc_left_reason(const struct proc_summary *p);

/* A `mark` record (control socket). */
struct mark_event {
	uint64_t ts;  /* ns, CLOCK_MONOTONIC */
	uint32_t pid; /* the client that sent it */
	char name[MT_PATH_MAX];
};

/* A stretch of time with heap recording on. */
struct enabled_window {
	uint64_t start_ns; /* the enable's ts; 0: since the run started */
	uint64_t end_ns;   /* the disable's ts; 0: until the run ended */
};

/*
 * Called after every event that was folded in, with the process it concerns
 * (NULL for tree-wide events: physical, unknown types).  Timeline and export
 * read the analysis state from there.  Borrowed: must not keep @p.
 */
typedef void analysis_observer(void *ctx, const struct mt_event *ev, const struct proc_summary *p);

/*
 * Allocation sizes by power of two: bucket 0 holds size 0, bucket k (1..64)
 * the sizes from 2^(k-1) to 2^k - 1 (heaptrack -H's histogram, in buckets).
 */
#define SIZE_BUCKETS 65

struct size_histogram {
	uint64_t count[SIZE_BUCKETS]; /* allocations */
	uint64_t bytes[SIZE_BUCKETS]; /* bytes they requested (saturated) */
};

/* The bucket of an allocation of @size bytes. */
static inline unsigned size_bucket(uint64_t size)
{
	return size ? 64 - (unsigned)__builtin_clzll(size) : 0;
}

/* The smallest and largest size bucket @b holds. */
static inline uint64_t size_bucket_min(unsigned b)
{
	return b ? 1ull << (b - 1) : 0;
}

static inline uint64_t size_bucket_max(unsigned b)
{
	return b ? (b == 64 ? UINT64_MAX : (1ull << b) - 1) : 0;
}

/* Each thread's last allocation: what makes a free "temporary". */
struct thread_last {
	uint32_t tid;
	uint32_t pid;
	uint64_t addr; /* its last allocation, 0: a free came after it */
};

struct analysis {
	uint64_t events[MT_TYPE_MAX];	/* records per type */
	uint64_t unknown_events;	/* records of types this reader lacks */
	uint64_t first_ts, last_ts;	/* ns, 0 when no event */
	uint64_t alloc_count;		/* malloc + calloc + realloc + aligned */
	uint64_t total_allocated_bytes; /* bytes those requested */
	uint64_t free_count;		/* free records */
	uint64_t unknown_free_count;	/* frees (and realloc moves) of no live block */
	uint64_t live_bytes;		/* heap bytes allocated and not freed */
	uint64_t peak_live_bytes;
	uint64_t peak_live_ts; /* ns, when peak_live_bytes was first reached */
	uint64_t leaked_count, leaked_bytes;
	uint64_t temporary_count; /* METRICS.md "Temporary allocations" */
	/* an attach: blocks of processes still alive at the end, not leaked */
	bool attached; /* set by the caller (analysis_set_attached) */
	/* set by the caller when a filter (filter.h) drops records: a kept fork
	 * of a dropped parent adds the child only */
	bool filtered;
	uint64_t live_end_count;     /* blocks */
	uint64_t live_end_bytes;     /* their bytes */
	unsigned live_end_procs;     /* processes holding them */
	struct size_histogram sizes; /* every allocation's size */
	/* mapped memory (METRICS.md "Mapped memory"), sums over processes */
	uint64_t mapped_bytes, peak_mapped_bytes, peak_mapped_ts;
	uint64_t peak_memory_bytes, peak_memory_ts; /* heap + mapped at one instant */
	uint64_t mapped_count, leaked_mapped_bytes;
	uint64_t page_size;   /* bytes; 0: 4096 (the artifact header's, when the caller sets it) */
	uint64_t bad_records; /* ring records refused, all processes (REFUSED) */
	unsigned cut_rings;   /* rings cut off (REFUSED cut): their later heap calls lost */
	unsigned bad_procs;   /* processes with any */
	unsigned left_procs;  /* processes that left an attach made under sudo (LEFT) */
	unsigned oom_procs;   /* processes the kernel's OOM killer chose (OOM) */
	bool counts_exact; /* --sample-bytes, and the totals are exact (COUNTS of every process) */
	/*
	 * --sample-bytes N (the SAMPLING record), 0: every call was recorded.
	 * Then every heap figure (live, peaks, leaks, sites) is an unbiased
	 * estimate: a sampled block of s bytes counts as s / (1 - exp(-s/N))
	 * bytes and 1 / (1 - exp(-s/N)) blocks (rounded at random, per block);
	 * alloc_count, total_allocated_bytes and free_count are the COUNTS
	 * records' exact totals (by analysis_finish) when every process has one.
	 */
	uint64_t sample_period;
	uint64_t sampled, unmatched;		   /* sums of the COUNTS records */
	uint64_t tree_anon, tree_file, tree_shmem; /* sums over live processes */
	uint64_t tree_rss_bytes;		   /* sum of live processes' RSS */
	uint64_t peak_rss_bytes;		   /* peak of that sum */
	uint64_t peak_rss_ts;
	uint64_t physical_bytes, peak_physical_bytes;
	uint64_t peak_physical_ts;
	bool has_rss, has_physical;
	/* CPython interpreters (PYTHON records): the first ANALYSIS_PYTHON_MAX distinct ones */
	struct {
		uint32_t version; /* PY_VERSION_HEX, 0: unread */
		uint32_t verdict; /* enum mt_py_verdict */
	} python[8];
	unsigned npython;

	struct proc_summary *procs; /* owned, nprocs of them, in first-seen order */
	unsigned nprocs, procs_cap;
	struct hash_index pid_index; /* owned: procs by pid */
	unsigned last_proc;	     /* procs index + 1 of the last lookup, 0 = none */

	/* control records: marks and heap recording windows, in stream order */
	bool has_control;	  /* a mark, enable or disable was seen */
	bool heap_off;		  /* a disable is in effect */
	uint64_t on_since;	  /* ts of the enable that opened the window */
	struct mark_event *marks; /* owned, nmarks of them */
	unsigned nmarks;
	struct enabled_window *windows; /* owned; the open one is added by finish */
	unsigned nwindows;

	struct site_table sites; /* per call site (stack id); settled by analysis_finish */

	struct thread_last *threads; /* owned, nthreads of them: the temporary test */
	uint64_t nthreads, threads_cap;
	struct hash_index tid_index; /* owned: threads by tid */
	uint64_t last_thread;	     /* threads index + 1 of the last lookup, 0 = none */

	analysis_observer *observer; /* NULL: none */
	void *observer_ctx;
};

void analysis_init(struct analysis *a);

/*
 * The page size mapped memory rounds to: the artifact header's @bytes when
 * it is a power of two from 4096 to 1 MiB (anything else, a crafted
 * header's, leaves 4096).
 */
void analysis_set_page_size(struct analysis *a, uint64_t bytes);

/*
 * The run attached to running processes (header flag MT_HDR_ATTACHED): at
 * the end, what a process still alive then holds is "live at end", not
 * leaked (the program goes on and may free it).  Call before the first event.
 */
void analysis_set_attached(struct analysis *a, bool attached);

/* Folds one event in.  Returns 0 or -ENOMEM (the event is then lost). */
int analysis_add(struct analysis *a, const struct mt_event *ev);

/*
 * Closes the books at the end of the stream: what is still live is leaked
 * (also counted in each process's leaked_*), except, in an attached run,
 * the blocks of the processes still alive: those are live_end_*.
 */
void analysis_finish(struct analysis *a);

/*
 * --sample-bytes: the line every output shows of a sampled recording
 * (without "memtrack: " or "\n"), in @buf; NULL for a recording of every
 * call.  Say it wherever a heap figure is shown: they are estimates.
 */
const char *analysis_sampling_note(const struct analysis *a, char *buf, size_t len);

/*
 * ,"sampling":{...} of a sampled recording for a JSON object (nothing
 * otherwise): period_bytes, estimated (true), exact_counts, sampled, unmatched.
 */
void analysis_sampling_json(const struct analysis *a, FILE *out);

/* The process @pid, or NULL when no event named it. */
const struct proc_summary *analysis_proc(const struct analysis *a, uint32_t pid);

/* Frees what analysis_init/_add allocated; @a can be initialised again. */
void analysis_release(struct analysis *a);

/*
 * `report --between FROM TO`: the same analysis restricted to the records
 * after the first mark named @from and before the first mark named @to that
 * follows it.  Only allocations made inside count; what they still hold at
 * @to is the section's leak.  Likewise mapped memory: the mappings made (and
 * the break grown) inside, followed to @to; pages mapped before it are not
 * the section's, whatever happens to them inside.
 */
struct section {
	const char *from, *to;	   /* mark names (borrowed) */
	int state;		   /* SECTION_BEFORE, _INSIDE, _DONE */
	uint64_t start_ns, end_ns; /* the two marks' ts */
	bool started_off;	   /* heap recording was off at the first mark */
	struct analysis a;	   /* the records inside */
};

enum { SECTION_BEFORE = 0, SECTION_INSIDE = 1, SECTION_DONE = 2 };

void section_init(struct section *s, const char *from, const char *to);

/*
 * Folds one event in (ignored outside the section).  @whole is the whole
 * run's analysis just before @ev (borrowed): whether heap recording is off,
 * and the program break a process had when the section first sees it move
 * (its growth inside the section is the section's mapped memory).
 * Returns 0 or -ENOMEM.
 */
int section_add(struct section *s, const struct mt_event *ev, const struct analysis *whole);

/* Whether heap recording was on for the whole section. */
bool section_complete(const struct section *s);

void section_release(struct section *s);

#endif /* MEMTRACK_ANALYSIS_H */
