/* SPDX-License-Identifier: MIT */
/*
 * stacks_share.h - the kernel unwinder's tables, shared read-only with the
 * in-process unwinder of every libmemtrack-fast.so in the tree (issue 20;
 * src/fast/unwind.h, fast_ring.h's struct mt_fast_answer).
 *
 * A read-only BPF map fd cannot be mapped (the kernel drops VM_SHARED for a
 * file opened without write access, and bpf_map_mmap then refuses), so the
 * rows and the index are copied into a memfd memtrack writes through its
 * own mapping, sized to the BPF arrays' capacity (sparse: only written
 * pages cost memory) and sealed with F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_FUTURE_WRITE | F_SEAL_SEAL, so a library can only map it to read.
 * Rows are written once, before any mapping names them.
 *
 * Each process on the in-process path also gets its own executable
 * mappings (struct mt_fast_umaps) in a small memfd sealed the same way,
 * rewritten by stacks_sync() while the process is parked (a seqlock).
 *
 * THREAD NOTES: the poller thread only (stacks.c and fast_drain.c's answer
 * run there).  Ownership: stacks_share__new() returns what
 * stacks_share__free() frees; fds it returns are the caller's.
 */
#ifndef MEMTRACK_STACKS_SHARE_H
#define MEMTRACK_STACKS_SHARE_H

#include <stdint.h>
#include <sys/types.h>
#include "bpf_abi.h"
#include "compiler.h"

struct stacks_share;

/* What a library maps (fast_ring.h's answer fields). */
struct stacks_share_info {
	uint64_t tables_bytes, index_off;
	uint32_t rows_cap, index_cap;
};

/* For @rows_cap rows and @index_cap index entries; NULL with errno set. */
struct stacks_share *stacks_share__new(uint32_t rows_cap, uint32_t index_cap);

/* Copies @n rows from row @start (within the capacity, else nothing). */
void stacks_share_rows(struct stacks_share *sh, uint32_t start, const struct mt_unwind_row *rows,
		       uint32_t n);
void stacks_share_index(struct stacks_share *sh, uint32_t start, const uint64_t *index, uint32_t n);

/* The new mappings of @pid, for its library if it has one (stacks_share_open). */
void stacks_share_maps(struct stacks_share *sh, pid_t pid, const struct mt_umaps *um);

/*
 * For @pid's library, whose current mappings are @um: sets *@tables_fd and
 * *@maps_fd (the caller closes both) and @info.  Returns 0 or -errno.
 */
MT_MUST_CHECK int stacks_share_open(struct stacks_share *sh, pid_t pid, const struct mt_umaps *um,
				    int *tables_fd, int *maps_fd, struct stacks_share_info *info);

/* Forgets @pid's mappings (it exec'd or exited). */
void stacks_share_forget(struct stacks_share *sh, pid_t pid);

void stacks_share__free(struct stacks_share *sh);

#endif /* MEMTRACK_STACKS_SHARE_H */
