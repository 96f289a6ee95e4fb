// SPDX-License-Identifier: MIT
/*
 * recorder.c - the tree's process events; see recorder.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline/pipeline.h"
#include "record/loader.h"
#include "record/probes.h"
#include "record/recorder.h"
#include "record/stacks.h"

struct recorder {
	struct memtrack_bpf *skel; /* borrowed */
	struct probes *probes;	   /* borrowed */
	struct stacks *stacks;	   /* borrowed, NULL without --stacks */
	struct recorder_failures failures;
};

struct recorder *recorder__new(struct memtrack_bpf *skel, struct probes *probes,
			       struct stacks *stacks)
{
	struct recorder *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->skel = skel;
	r->probes = probes;
	r->stacks = stacks;
	return r;
}

void recorder_observer(struct recorder *r, struct pipeline_observer *obs)
{
	memset(obs, 0, sizeof(*obs));
	obs->observe = recorder_observe;
	obs->ctx = r;
	obs->fn_flags = MT_REC_PARKED;
	obs->types[MT_EXIT / 64] |= 1ull << (MT_EXIT % 64);
	obs->types[MT_LEFT / 64] |= 1ull << (MT_LEFT % 64);
	obs->types[MT_FAST / 64] |= 1ull << (MT_FAST % 64);
}

/* Whether an exec'd path is a memtrack (see MT_PROC_NO_CHILDREN). */
static bool is_memtrack(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, "memtrack");
}

/*
 * Remembers a failure for main to report once the pipeline is stopped.  A
 * process that is already gone (-ESRCH, -ENOENT) needs nothing and is not a
 * failure.
 */
static void note(struct recorder *r, pid_t pid, int err)
{
	if (err >= 0 || err == -ESRCH || err == -ENOENT)
		return;
	if (!r->failures.procs++) {
		r->failures.first_err = err;
		r->failures.first_pid = pid;
	}
}

/* An exited process's probes and mappings are forgotten (its links retired). */
static void exited(struct recorder *r, pid_t pid)
{
	probes_forget(r->probes, pid, false);
	if (r->stacks)
		stacks_forget(r->stacks, pid);
}

/* Before an exec'd image is synced: what the old image had that must go. */
static void exec_forget(struct recorder *r, const struct mt_rec_hdr *h, const __u64 *f)
{
	pid_t pid = h->pid;

	if (f[EXEC_OLD_PID] != h->pid) /* a non-leader's exec: the old links still run */
		probes_forget(r->probes, pid, true);
	else if (probes_is_fast(r->probes, pid))
		probes_forget(r->probes, pid, false); /* the new image starts on uprobes */
	if (r->stacks)
		stacks_forget(r->stacks, pid);
	if (is_memtrack((const char *)(f + EXEC_NFIELDS)))
		note(r, pid, loader_untrack_children(r->skel, pid));
}

void recorder_observe(void *ctx, const struct mt_rec_hdr *h, const __u64 *f, struct rec_out *out)
{
	struct recorder *r = ctx;
	pid_t pid = h->pid;

	/* gone, or no longer the user's to trace (untracked by the BPF side) */
	if (h->type == MT_EXIT || h->type == MT_LEFT) {
		r->failures.left += h->type == MT_LEFT;
		exited(r, pid);
		return;
	}
	if (h->type == MT_FAST) { /* its library records its heap calls from now on */
		probes_fast(r->probes, pid);
		return;
	}
	if (h->type == MT_EXEC)
		exec_forget(r, h, f);
	if (h->type == MT_FORK)
		pid = f[FORK_CHILD];
	note(r, pid, probes_sync(r->probes, pid));
	/* right after the record that parked it: before any stack through it */
	if (r->stacks)
		note(r, pid, stacks_sync(r->stacks, pid, h->ts + 1, out));
	loader_resume(r->skel, pid);
}

void recorder__failures(const struct recorder *r, struct recorder_failures *out)
{
	*out = r->failures;
}

void recorder__free(struct recorder *r)
{
	free(r);
}
