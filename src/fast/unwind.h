/* SPDX-License-Identifier: MIT */
/*
 * unwind.h - the in-process call-stack unwinder of libmemtrack-fast.so
 * (issue 20): the kernel unwinder's rules (src/bpf/unwind.bpf.c) run in the
 * process itself, over the same tables (struct mt_unwind_row, the address
 * index, struct mt_umaps: bpf_abi.h), so both paths give the same (object,
 * ELF address) frames, the same stack ids and the same truncation marks.
 *
 * The tables are memtrack's (read-only to the process); the stack is the
 * program's and trusted in nothing: every table index is bounded by the
 * tables' sizes, and every read of the stack stays inside the calling
 * thread's stack (its mapping, found by fast_thread_stack): a frame that
 * points elsewhere ends the stack, marked truncated, never a fault.  The
 * one difference from the kernel: a frame chain that leaves the stack for
 * other readable memory is followed by the kernel (bpf_probe_read_user
 * succeeds) and ends the stack here.  No legitimate chain leaves the
 * thread's stack (a signal handler on an alternate stack stops at the
 * signal frame, whose row is "unknown" on both paths).
 *
 * Wired (issue 20): with --stacks memtrack hands the tables (read-only
 * memfds, fast_ring.h's answer) to the library, and the entry points
 * (interpose.c) call fast_take_stack() at a thread's outermost allocator
 * call, from the caller's return-address slot: the frames the uprobe
 * sees at the allocator's entry.
 *
 * Nothing here allocates, takes a lock or calls a function that is not
 * async-signal-safe (open, read, close).  THREAD NOTES: any thread, and
 * signal handlers; the dedup set is shared by the process's threads
 * (atomic), the stack bounds cache is per thread.
 */
#ifndef MEMTRACK_FAST_UNWIND_H
#define MEMTRACK_FAST_UNWIND_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "event.h"
#include "fast/fast_lib.h"

/*
 * A process-wide cache of what a return address resolves to: the frame it
 * records and the row's rule, so that a hit reads one entry and neither the
 * mappings nor the rows (cc1's 10 MB of rows miss the CPU's caches).
 * FAST_CACHE_SLOTS entries shared by the threads without a lock: chk mixes
 * every field with the mappings' generation, so a torn entry (two threads
 * writing it at once) or one from older mappings is a miss.
 */
#define FAST_CACHE_SLOTS 4096u
struct fast_frame_cache {
	uint64_t key;	/* the pc */
	uint64_t frame; /* OBJECT id << 32 | the frame's ELF address (< 2^32: unwind.c) */
	uint64_t rule;	/* the row's rule and the mapping's index (unwind.c's pack_rule) */
	uint64_t chk;
} __attribute__((aligned(32))); /* one cache line holds whole entries */

struct fast_table_pages;

/* The shared tables, as the library sees them (all read-only). */
struct fast_unwind_tables {
	const struct mt_unwind_row *rows; /* unwind_rows */
	uint32_t nrows;			  /* elements of rows that may be read */
	const uint64_t *index;		  /* unwind_index */
	uint32_t nindex;		  /* elements of index that may be read */
	const struct mt_umaps *maps;	  /* this address space's mappings, NULL: none */
	struct fast_frame_cache *cache;	  /* FAST_CACHE_SLOTS, NULL: none */
	uint64_t gen;			  /* the mappings' generation the cache holds */
	/* rows and index live in this copy, each page read in as a walk of
	 * generation gen needs it (table_pages.h); NULL: in memory whole */
	struct fast_table_pages *pages;
};

/*
 * The bits of a return address that are its address: aarch64's pac-ret
 * signs return addresses in the bits above the 48-bit user address space
 * (unwind.bpf.h's UNWIND_RA_MASK), stripped without the key.
 */
#if defined(__aarch64__)
#define FAST_RA_MASK ((1ull << 48) - 1)
#else
#define FAST_RA_MASK (~0ull)
#endif

/* One unwound stack, as a STACK record carries it. */
struct fast_stack {
	uint64_t id;	    /* 0: no stack (the entry's return address unreadable) */
	uint32_t n;	    /* frames, innermost first */
	uint32_t truncated; /* 1: not unwound to the outermost frame */
	struct mt_rec_frame frames[MT_STACK_MAX];
};

/*
 * Unwinds the stack of an allocator call at its entry: @entry_sp points at
 * the return address (the caller's rsp before its call returns), @bp is
 * rbp at the entry.  aarch64: @entry_sp is sp at the entry (the caller's),
 * @bp the address of the entry point's frame record {x29, x30 at the
 * entry} (interpose.c's ENTRY_SP, ENTRY_BP).  Reads stay inside [@lo, @hi) (the thread's stack).
 * Fills @out and returns its id (unwind.bpf.h's take_stack with exact
 * false, and emit_stack's id).
 */
uint64_t fast_unwind(const struct fast_unwind_tables *t, uint64_t entry_sp, uint64_t bp,
		     uint64_t lo, uint64_t hi, struct fast_stack *out) HIDDEN;

/* fast_unwind(), leaving out the leading frames whose pc @skip names (at most 4). */
uint64_t fast_unwind_skip(const struct fast_unwind_tables *t, uint64_t entry_sp, uint64_t bp,
			  uint64_t lo, uint64_t hi, bool (*skip)(uint64_t pc),
			  struct fast_stack *out) HIDDEN;

struct mt_fast_umaps;

/*
 * The tables memtrack handed over (read in a page at a time through
 * @pages, handover.c's: @rows_cap rows from offset 0, @index_cap index
 * entries at @index_off, this process's mappings at @umaps, mapped
 * read-only).  Returns false for a geometry that does not fit the tables
 * (nothing is used).  Single-threaded (handover.c).
 */
bool fast_unwind_attach(struct fast_table_pages *pages, uint64_t index_off, uint32_t rows_cap,
			uint32_t index_cap, const struct mt_fast_umaps *umaps) HIDDEN;
void fast_unwind_detach(void) HIDDEN;
bool fast_unwinding(void) HIDDEN;

/*
 * The stack of the calling thread's outermost allocator call (@entry_sp:
 * its return-address slot, @bp: rbp at its entry), written to the ring
 * once per process (the dedup set), before the heap record naming it.
 * Returns its id, or 0 (no tables, no stack found, the mappings changed
 * meanwhile).  Call with the thread's allocator depth raised (a signal
 * handler's call in between is not outermost: the per-thread buffer is
 * safe).
 */
uint64_t fast_take_stack(uint64_t entry_sp, uint64_t bp, bool (*skip)(uint64_t pc)) HIDDEN;

/*
 * The readable, writable anonymous mapping holding @sp (the main thread's
 * [stack], a thread's stack block, an alternate signal stack), read from
 * /proc/self/maps with raw open/read.  Returns 0 and sets [@lo, @hi), or
 * -1 (no such mapping: the stack is not read).
 */
int fast_stack_bounds(uint64_t sp, uint64_t *lo, uint64_t *hi) HIDDEN;

/*
 * fast_stack_bounds() through a per-thread cache of two ranges (the
 * thread's stack and the last other one, e.g. an alternate signal stack):
 * /proc/self/maps is read once per thread and stack; a miss is remembered
 * for its MiB (no stack is taken there without another read).
 */
int fast_thread_stack(uint64_t sp, uint64_t *lo, uint64_t *hi) HIDDEN;

/*
 * The process's set of stack ids written to its ring (fixed size, no
 * allocation).  fast_stack_seen: whether @id was written; fast_stack_mark:
 * note it once written (a full neighbourhood forgets nothing and notes
 * nothing: the id is written again next time, and readers keep the first).
 * A fork child inherits its parent's set: the stacks it names were written
 * by the parent before the fork.
 */
#define FAST_SEEN_SLOTS 16384u
#define FAST_SEEN_PROBES 32u
bool fast_stack_seen(uint64_t id) HIDDEN;
void fast_stack_mark(uint64_t id) HIDDEN;
void fast_stack_forget_all(void) HIDDEN;

#endif /* MEMTRACK_FAST_UNWIND_H */
