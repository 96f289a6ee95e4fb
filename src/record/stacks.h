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
 * The tables of the files the command will map are stored while the BPF
 * side loads (stacks_prebuild.h, stacks_prestore()): the registry exists
 * before the skeleton, its chunks are created then, and stacks__attach()
 * puts them into the skeleton's outer maps once it is loaded.
 *
 * THREAD NOTES: the poller thread (after stacks__attach() on main), and
 * the prebuild's threads in stacks_prestore(); the slices, the chunks and
 * the statistics they move are under the registry's store lock.
 * Ownership: stacks__new() returns a registry freed by stacks__free(); it
 * borrows the skeleton from stacks__attach() on, and owns the prebuild it
 * is handed (freed first: its threads store into the registry).
 */
#ifndef MEMTRACK_STACKS_H
#define MEMTRACK_STACKS_H

#include <stdbool.h>
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
struct unwind_table;

/*
 * Returns a registry that loads at most @rows_cap rows (--unwind-rows: an
 * object that does not fit is counted in no_room), or NULL with errno set.
 * Tables come from @cache (borrowed, may be NULL: inspect/unwind_cache.h)
 * when it holds them.  Before or after the BPF side loads.
 */
struct stacks *stacks__new(uint32_t rows_cap, struct unwind_cache *cache);

/*
 * Main, once the skeleton @skel is loaded (sized for the same ceiling):
 * puts the chunks created so far into its outer maps.  Returns 0 or -errno.
 */
int stacks__attach(struct stacks *s, struct memtrack_bpf *skel);

/* Where an object's rows and index are in the kernel's (and the share's) numbering. */
struct stacks_slice {
	uint32_t row_start, nrows;
	uint32_t index_start, nbuckets;
};

/*
 * Any thread: gives table @t (with rows) a slice and writes its rows and
 * index there, in the kernel and the share, before any process maps it.
 * Returns 0 with @slice set, or -errno (-ENOSPC: no room; the table is
 * then handled at its sync as any other).  Its rows stay @t's to drop.
 */
int stacks_prestore(struct stacks *s, const struct unwind_table *t, struct stacks_slice *slice);

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

/*
 * Whether the stacks of CPython interpreters carry Python frames (issue
 * 37; on unless --no-python-frames).  Before the first stacks_sync().
 */
void stacks__set_python(struct stacks *s, bool on);

/* Forgets @pid's mappings (it exec'd or exited). */
void stacks_forget(struct stacks *s, pid_t pid);

void stacks__stats(struct stacks *s, struct stacks_stats *st);

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

/* Slots of the outer map for a table of at most @total entries in chunks of @chunk. */
static inline uint32_t stacks_chunk_slots(uint32_t total, uint32_t chunk)
{
	return total ? (total + chunk - 1) / chunk : 1;
}

/* Frees the registry (NULL is fine). */
/*
 * Creates, and publishes once attached, the chunks of the first @rows rows
 * and index entries (at most the ceiling), which objects otherwise make as
 * they need them: the daemon does it as a slot loads, off the sessions'
 * path, so a short command's tables find their chunks made.  Returns 0 or
 * -errno.
 */
int stacks__reserve(struct stacks *s, uint32_t rows);

/*
 * The daemon (record/bpf_slot.h): @s, kept with its skeleton across
 * sessions, ready for the next one: the processes forgotten (the BPF side
 * is reset), the objects kept with their rows in the kernel but announced
 * anew (an OBJECT record in the next artifact at their next sight, once the
 * file is checked to be the same), the statistics zeroed; past 3/4 of the
 * ceiling, the objects forgotten too (their rows overwritten from the
 * start).  @cache is the next session's (borrowed, NULL: none).  Main,
 * between two sessions.
 */
void stacks_next_session(struct stacks *s, struct unwind_cache *cache);

void stacks__free(struct stacks *s);

#endif /* MEMTRACK_STACKS_H */
