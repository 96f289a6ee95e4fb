/* SPDX-License-Identifier: MIT */
/*
 * filter.h - `--pid PID` and `--comm NAME` of the reading commands (report,
 * flamegraph, export, diff, dump, top): which records of an artifact belong
 * to the processes asked for.  The filter sits in front of the analysis:
 * everything downstream (totals, peaks, sites, functions, timeline) is then
 * that of the chosen processes alone, as if only they had been recorded.
 *
 * A record concerns the process named by its pid, except a fork's, which
 * concerns the child (so a kept child knows its parent).  --comm matches a
 * process's command (the basename of the program it runs, as the report's
 * process list shows it) at the time of the record: the fork child of a
 * shell that then execs python is the shell's until the exec, python's
 * after.  The records about no process (objects, mappings, stacks, marks,
 * enable/disable, physical, unknown types) are always kept.  Several
 * --pid and --comm: a record of any of them is kept.
 *
 * Ownership: the filter owns its pid list and its table of commands; the
 * --comm names are borrowed (argv).  THREAD NOTES: one thread.
 */
#ifndef MEMTRACK_FILTER_H
#define MEMTRACK_FILTER_H

#include <stdbool.h>
#include <stdint.h>
#include "format/artifact.h"
#include "util/hash_index.h"

#define FILTER_MAX 64 /* --pid and --comm options, each */

struct filter_proc {
	uint32_t pid;
	char command[64]; /* basename, as analysis.c's proc_summary.command */
};

struct proc_filter {
	uint32_t pids[FILTER_MAX]; /* --pid */
	unsigned npids;
	const char *comms[FILTER_MAX]; /* --comm, borrowed */
	unsigned ncomms;
	/* every process seen so far, and its command now (followed with --comm only) */
	struct filter_proc *procs; /* owned */
	uint64_t nprocs, cap;	   /* nprocs: processes the records named, kept or not */
	struct hash_index index;   /* owned: procs by pid */
	uint64_t kept, dropped;	   /* records so far */
};

void proc_filter_init(struct proc_filter *f);

/*
 * @f initialised with the --pid and --comm of @opts (the names borrowed as
 * @opts borrows them) and none of its state: the same filter for another
 * file (diff reads two).
 */
void proc_filter_init_like(struct proc_filter *f, const struct proc_filter *opts);

/* Whether any --pid or --comm was given. */
bool proc_filter_active(const struct proc_filter *f);

/* --pid @arg: 0, -EINVAL (not a pid from 1 to 2^31-1), -E2BIG (too many). */
int proc_filter_add_pid(struct proc_filter *f, const char *arg);

/* --comm @name (borrowed): 0, -EINVAL (empty or with a '/'), -E2BIG. */
int proc_filter_add_comm(struct proc_filter *f, const char *name);

/*
 * Whether @ev is to be read: 1 kept, 0 dropped, -ENOMEM (the filter can no
 * longer tell: the caller stops).  Every record goes through here, in
 * order, kept or not (a dropped exec still renames its process).
 */
int proc_filter_keep(struct proc_filter *f, const struct mt_event *ev);

/* The filter as the options gave it ("--pid 12 --comm python3"), in @buf. */
const char *proc_filter_describe(const struct proc_filter *f, char *buf, size_t len);

void proc_filter_release(struct proc_filter *f);

#endif /* MEMTRACK_FILTER_H */
