/* SPDX-License-Identifier: MIT */
/*
 * stacks.h - what the kernel unwinder needs from userspace (--stacks): the
 * unwind rows of every executable object the tree maps, and each process's
 * executable mappings; and the OBJECT and MAPPING records that let a reader
 * name the frames of STACK records (docs/FORMAT.md §8.2).
 *
 * A process is parked (SIGSTOP) at exec, at fork and at each executable
 * file mmap until the poller has run the recorder (recorder.h): stacks_sync()
 * runs there, before the process executes code in the new object, so no
 * stack misses an object.  An object's rows are built once per run (cache
 * by device and inode) and live in the kernel's chunks until memtrack ends.
 *
 * THREAD NOTES: the poller thread only (after stacks__new() on main).
 * Ownership: stacks__new() returns a registry freed by stacks__free(); it
 * borrows @skel.
 */
#ifndef MEMTRACK_STACKS_H
#define MEMTRACK_STACKS_H

#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "compiler.h"

struct memtrack_bpf;
struct rec_out;
struct stacks;

struct stacks_stats {
	uint64_t objects;	/* distinct objects seen */
	uint64_t rows;		/* unwind rows loaded */
	uint64_t rows_cap;	/* rows the array holds */
	uint64_t no_room;	/* objects left without rows: the array was full */
	uint64_t no_cfi;	/* objects without usable .eh_frame */
	uint64_t build_ns;	/* time spent building tables */
	uint64_t sync_ns;	/* time spent in stacks_sync() in all */
	uint64_t syncs;		/* stacks_sync() calls */
	uint64_t too_many;	/* processes with more than MT_MAX_UMAPS mappings */
	uint64_t table_bytes;	/* kernel bytes of the tables: chunks created, outer maps */
	uint64_t index_entries; /* entries of the address index loaded */
	uint64_t cached;	/* objects whose table came from the unwind cache */
};

struct unwind_cache;

/*
 * Returns a registry that loads at most @rows_cap rows (--unwind-rows: an
 * object that does not fit is counted in no_room), or NULL with errno set.
 * Tables come from @cache (borrowed, may be NULL: inspect/unwind_cache.h)
 * when it holds them.
 */
struct stacks *stacks__new(struct memtrack_bpf *skel, uint32_t rows_cap,
			   struct unwind_cache *cache);

/*
 * Hands the tables built during the load (stacks_prebuild.h) to the
 * registry, which takes each when its file is first seen and frees the rest
 * with itself.  Called once, after stacks__new(), on main.
 */
struct stacks_prebuild;
void stacks__take_prebuild(struct stacks *s, struct stacks_prebuild *pb);

/*
 * Poller thread, for a parked process @pid: builds the rows of each object
 * it maps that is new to the run, puts OBJECT records for them and
 * MAPPING records for the process's new executable mappings (timestamped
 * @ts, right after the record that parked it) into @out (the pipeline
 * batches them), and gives the kernel its mapping table.  Returns 0 or
 * -errno (-ESRCH: the process is gone).
 */
MT_MUST_CHECK int stacks_sync(struct stacks *s, pid_t pid, uint64_t ts, struct rec_out *out);

/* Forgets @pid's mappings (it exec'd or exited). */
void stacks_forget(struct stacks *s, pid_t pid);

void stacks__stats(const struct stacks *s, struct stacks_stats *st);

struct stacks_share_info;

/*
 * Poller thread: the unwind tables and @pid's mappings for its
 * libmemtrack-fast.so (stacks_share.h).  Returns 0 with both fds set (the
 * caller closes them), or -errno (-ENOTSUP: no shared tables).
 */
MT_MUST_CHECK int stacks_fast_open(struct stacks *s, pid_t pid, int *tables_fd, int *maps_fd,
				   struct stacks_share_info *info);

/* OBJECT ids announced so far: a frame names 0 (no mapping) or one of 1 .. this. */
uint32_t stacks_objects(const struct stacks *s);

/*
 * Entries of one kernel chunk for a table of at most @total entries
 * (bpf_abi.h): the loader's inner template and stacks.c's chunks agree.
 */
static inline uint32_t stacks_chunk_entries(uint32_t total, uint32_t chunk)
{
	return total < chunk ? total : chunk;
}

/* Frees the registry (NULL is fine). */
void stacks__free(struct stacks *s);

#endif /* MEMTRACK_STACKS_H */
