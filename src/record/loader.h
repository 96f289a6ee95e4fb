/* SPDX-License-Identifier: MIT */
/*
 * loader.h - open, configure, load and attach the BPF side.
 */
#ifndef MEMTRACK_LOADER_H
#define MEMTRACK_LOADER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "event.h"
#include "compiler.h"

struct memtrack_bpf;
struct kernel_features;

/* The step of loader_open() that failed: the command layer words the message. */
enum loader_step {
	LOADER_BTF,    /* the kernel has no /sys/kernel/btf/vmlinux */
	LOADER_OPEN,   /* opening the BPF object */
	LOADER_LOAD,   /* loading it (permissions, the verifier) */
	LOADER_ATTACH, /* attaching the tracepoints */
};

struct loader_opts {
	uint64_t ring_bytes;	     /* ring buffer size, a power of two >= page size */
	uint64_t wakeup_bytes;	     /* wake the poller at this much unread data */
	bool allocators;	     /* load the allocator uprobes */
	unsigned uprobe_attach_type; /* their expected_attach_type (struct attach_ops) */
	bool physical;		     /* count the tree's physical pages (may be turned off) */
	bool verbose;		     /* let libbpf's debug output through */
	bool heap_disabled;	     /* start with heap recording off (--start-disabled) */
	bool stacks;		     /* unwind call stacks (--stacks) */
	uint32_t unwind_rows; /* --stacks: rows of the unwind table (MT_UNWIND_ROWS_DEFAULT) */
	bool fast;	      /* --fast: load the in-process heap path's programs */
	bool adopt_running;   /* memtrack attach: processes found running (rss.bpf.c) */
	bool owner_only;      /* attach under sudo: only processes owner_uid may trace */
	uint32_t owner_uid;   /* the invoking user's uid and gid (owner_only) */
	uint32_t owner_gid;
	/* --sample-bytes N (sample.h), 0: every heap call */
	uint64_t sample_bytes;
	const struct kernel_features *kf; /* the mechanisms to load (borrowed) */
	/* out: why physical was turned off (-errno and step), 0 if it was not */
	int physical_err;
	enum loader_step physical_step;
};

/*
 * Opens, configures and loads the skeleton and attaches the tracepoints
 * (not the uprobes: those are per process, see probes.c) into *@skel, owned
 * by the caller (loader_close).  When the physical-page programs cannot be
 * loaded or attached, clears o->physical, records why in o->physical_err
 * and o->physical_step, and goes on without them.  Only BTF raw tracepoints
 * are used, so tracefs need not be mounted.  Returns 0, or -errno with
 * *@step saying what failed (*@skel is then NULL).  Prints nothing.
 */
MT_MUST_CHECK int loader_open(struct loader_opts *o, struct memtrack_bpf **skel,
			      enum loader_step *step);

/* Adds @pid (the root of the tree) to the tracked set. */
MT_MUST_CHECK int loader_track_root(struct memtrack_bpf *skel, pid_t pid);

/*
 * Adds @pid, a process found running (memtrack attach), to the tracked set,
 * its mm to be adopted at its next RSS change, its heap calls ignored until
 * loader_heap_armed() (its probes go in while it runs).  Returns 0, -EEXIST
 * when the BPF side has tracked it already (a child forked since, parked),
 * or -errno.
 */
MT_MUST_CHECK int loader_track_running(struct memtrack_bpf *skel, pid_t pid);

/* @pid's allocator probes are all in (or it is gone): its heap calls are recorded from now on. */
void loader_heap_armed(struct memtrack_bpf *skel, pid_t pid);

/* Leaves the future children of @pid (another memtrack) out of the tree. */
MT_MUST_CHECK int loader_untrack_children(struct memtrack_bpf *skel, pid_t pid);

/*
 * Resumes @pid, parked by the BPF side (SIGCONT), and forgets it.  The
 * signal goes first: should memtrack die in between, the BPF side still
 * sees the entry and resumes the process once more (harmless).
 */
void loader_resume(struct memtrack_bpf *skel, pid_t pid);

/*
 * Stops parking new processes and resumes every process still parked, so
 * nothing depends on memtrack any more.  Called as memtrack finishes; when
 * memtrack is killed, the BPF side does the same (proc.bpf.c handle_exit).
 * Returns the number of processes resumed.
 */
int loader_stop_parking(struct memtrack_bpf *skel);

/*
 * The fds of the `parked` and `session` maps (borrowed), for the reaper to
 * resume what is parked should memtrack be killed on a kernel whose BPF
 * side cannot (KF_RESUME's fallback).  Returns 0 or -EBADF.
 */
MT_MUST_CHECK int loader_parked_fds(struct memtrack_bpf *skel, int *parked_fd, int *session_fd);

/*
 * Empties the tracked set, so BPF neither records nor parks any process
 * from now on.  It sends no signal: loader_stop_parking(), called first,
 * resumed whatever memtrack parked (park_process() in common.bpf.h
 * resumes a process parked after the flag), and a process stopped by
 * someone else (a target of `attach` stopped by its user or a debugger)
 * stays as it was.  Returns how many it removed.
 */
int loader_untrack_all(struct memtrack_bpf *skel);

/* Returns true while some process of the tree is alive. */
bool loader_tree_alive(struct memtrack_bpf *skel);

/*
 * Sums the per-CPU drop counters into @drops[MT_DROP_SLOTS].  Returns 0, or
 * -errno when a counter could not be read (it reads as 0; the others are
 * still summed).
 */
MT_MUST_CHECK int loader_read_drops(struct memtrack_bpf *skel, uint64_t drops[MT_DROP_SLOTS]);

/*
 * The BPF side's heap-recording switch (1 on, 0 off), in the skeleton's
 * mmaped .data: a store takes effect for every probe that runs after it.
 */
volatile __u32 *loader_heap_switch(struct memtrack_bpf *skel);

/*
 * Makes a loaded BPF side as it was after loader_open(), for the next
 * session of the daemon (daemon/pool.h): both rings drained, every hash
 * emptied (tracked, parked, the mms, the stacks seen ...; the unwinder's
 * outer maps keep their chunks, which the slot's stacks registry keeps
 * using: stacks_next_session()), every array zeroed (the drop counters, the
 * parking flag), heap recording on.  The caller has ended the session
 * (loader_stop_parking, loader_untrack_all) and no other thread uses
 * @skel.  A map kind it does not know fails the reset.  Returns 0 or
 * -errno (then the skeleton must be closed, not reused).
 */
MT_MUST_CHECK int loader_reset(struct memtrack_bpf *skel);

/* Detaches and unloads everything (NULL is fine). */
void loader_close(struct memtrack_bpf *skel);

#endif /* MEMTRACK_LOADER_H */
