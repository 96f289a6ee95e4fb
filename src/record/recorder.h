/* SPDX-License-Identifier: MIT */
/*
 * recorder.h - what happens when a process of the tree parks, forks, execs,
 * announces the in-process path or exits: the one place of those rules.
 *
 * The BPF side parks (SIGSTOP) a process at fork, exec and each executable
 * file mmap (MT_REC_PARKED).  The recorder observes those records and the
 * EXIT and FAST ones (struct pipeline_observer): it attaches the allocator
 * probes the process lacks (probes.h), gives the unwinder its mappings
 * (stacks.h; their OBJECT and MAPPING records go back to the pipeline as
 * records to add, never by calling into it), and resumes the process.
 * Links are bound to the leader task: an exec by the leader keeps them
 * (they re-apply to the same files in the new image); an exec by another
 * thread makes that thread the leader, so the old links go first.
 *
 * THREAD NOTES: created and freed by main (session.c); recorder_observe()
 * runs on the poller thread only; the failures are read after
 * pipeline__stop().
 */
#ifndef MEMTRACK_RECORDER_H
#define MEMTRACK_RECORDER_H

#include <sys/types.h>
#include <linux/types.h>
#include "event.h"

struct memtrack_bpf;
struct pipeline_observer;
struct probes;
struct rec_out;
struct recorder;
struct stacks;

/* What the recorder could not do or follow: it cannot print (STYLE.md §5). */
struct recorder_failures {
	unsigned left;	 /* processes that left the recording (LEFT records: attach under sudo) */
	unsigned procs;	 /* processes it could not attach or untrack */
	int first_err;	 /* the first failure, -errno */
	pid_t first_pid; /* the process it concerned */
};

/*
 * Returns a recorder over @skel, @probes and @stacks (all borrowed; @stacks
 * NULL without --stacks), or NULL with errno set.
 */
struct recorder *recorder__new(struct memtrack_bpf *skel, struct probes *probes,
			       struct stacks *stacks);

/* Fills @obs with the records the recorder observes and its callback. */
void recorder_observer(struct recorder *r, struct pipeline_observer *obs);

/* Poller thread: the pipeline_observer callback (@ctx is the recorder). */
void recorder_observe(void *ctx, const struct mt_rec_hdr *h, const __u64 *f, struct rec_out *out);

void recorder__failures(const struct recorder *r, struct recorder_failures *out);

/* NULL is fine. */
void recorder__free(struct recorder *r);

#endif /* MEMTRACK_RECORDER_H */
