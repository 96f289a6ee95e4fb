/* SPDX-License-Identifier: MIT */
/*
 * stacks_prebuild.h - the unwind tables (--stacks) of the files a command
 * will map, built by two threads of their own while the BPF side loads:
 * its executable, the C library and dynamic loader memtrack itself runs
 * on, libmemtrack-fast.so, and the libraries these need
 * (inspect/elf_needed.h).  cc1's 478K rows take ~50 ms, its libraries'
 * ~30 ms, and the command would otherwise wait parked for them at its exec
 * and at each library ld.so maps.
 *
 * A table is used only for the very file built: stacks_prebuild_take()
 * gives it for a path whose file has the device, inode, size, mtime and
 * ctime it had when listed, waiting for its build to end; any other object
 * is built at its sync as always.  A table built is also stored into the
 * kernel's chunks and the share right away, while the BPF side still
 * loads, so that a sync finds its rows in place.
 *
 * THREAD NOTES: stacks_prebuild_start() on main, before the BPF side
 * loads; then the registry (record/stacks.h, the poller thread) owns it:
 * stacks_prebuild_take() and stacks_prebuild_free() there.  The build
 * threads share the list under its lock.  Ownership: start() returns the
 * prebuild (NULL: no thread started, nothing to free), free() joins the
 * threads and frees the tables not taken; a table taken is the caller's.
 */
#ifndef MEMTRACK_STACKS_PREBUILD_H
#define MEMTRACK_STACKS_PREBUILD_H

struct stacks_prebuild;
struct unwind_table;

struct stacks;
struct stacks_slice;
struct unwind_cache;

/*
 * @exe (the command's path, resolved) and @fast_lib may be NULL; @cache
 * (borrowed, may be NULL: inspect/unwind_cache.h) gives the tables it
 * holds and keeps those built.  Each table built is stored at once into
 * @stacks (stacks_prestore(), borrowed: it outlives the threads).
 */
struct stacks_prebuild *stacks_prebuild_start(const char *exe, const char *fast_lib,
					      struct unwind_cache *cache, struct stacks *stacks);

/*
 * The table built for @full's file, or NULL; @slice is where it was
 * stored (nbuckets 0: not stored, its rows are in the table).
 */
struct unwind_table *stacks_prebuild_take(struct stacks_prebuild *pb, const char *full,
					  struct stacks_slice *slice);
void stacks_prebuild_free(struct stacks_prebuild *pb);

#endif /* MEMTRACK_STACKS_PREBUILD_H */
