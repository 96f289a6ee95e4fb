/* SPDX-License-Identifier: MIT */
/*
 * fast_reader.h - memtrack's reading of one process's in-process heap ring
 * (src/fast/fast_ring.h): shared memory the process writes as it likes.
 *
 * Every value read from the ring is a claim of the process, checked before
 * it is used:
 *  - a slot is copied, then checked, then fed (the process cannot change
 *    it between the check and the use);
 *  - only the records a process may report about itself are fed: the
 *    heap calls the library makes (MALLOC, CALLOC, REALLOC, ALIGNED_ALLOC,
 *    FREE) with the fn values, field counts and values each can have
 *    (fast_reader.c's table), and, when memtrack gave it the unwinder's
 *    tables, STACK records (a head slot and frame slots: fast_ring.h)
 *    whose frames name announced objects and whose id is those frames';
 *    anything else, in particular a record that
 *    makes memtrack act (fork, exec, exit, parked, rss, control ...), is
 *    refused and counted;
 *  - the pid is the process's own (SO_PEERCRED), whatever it wrote;
 *  - a timestamp is held between the ring's acceptance and now;
 *  - a broken ring protocol (a slot's seq from another lap, a head behind
 *    the tail or further ahead than any process can be) is a lie: the ring
 *    is not read any more (fast_reader.lied), and counted as one refusal;
 *  - no loop runs on a value of the ring: one call reads at most
 *    FAST_READ_MAX positions, and a closed ring is read for one lap.
 *
 * Pure code (no BPF): the fuzz target tests/fuzz/fuzz_drain.c drives it.
 * THREAD NOTES: one thread (the poller) calls everything on a reader.
 */
#ifndef MEMTRACK_FAST_READER_H
#define MEMTRACK_FAST_READER_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "event.h"
#include "fast/fast_ring.h"

struct pipeline;

/* Positions one fast_reader_feed() reads at most: a full ring, and as much again written meanwhile. */
#define FAST_READ_MAX (2 * MT_FAST_SLOTS)
/* Clock skew allowed between the process's CLOCK_MONOTONIC stamps and memtrack's, ns. */
#define FAST_TS_SLACK_NS 1000000ull

struct fast_reader {
	void *ring;	     /* MT_FAST_RING_BYTES the process shares (borrowed) */
	uint32_t pid;	     /* the process (SO_PEERCRED): every record gets it */
	uint64_t opened_ns;  /* when memtrack accepted the ring: no record is older */
	uint64_t va_end;     /* no heap block reaches past this (fast_va_end()) */
	uint64_t tail;	     /* next position to read */
	bool closing;	     /* the process let go of the ring (fast_reader_close) */
	uint64_t end;	     /* closing: positions taken then (the head) */
	uint64_t last;	     /* closing: no position from here on can be written */
	bool lied;	     /* the ring broke its protocol: never read again */
	uint64_t records;    /* records fed */
	uint64_t refused;    /* records refused, and the lie */
	uint64_t lost;	     /* positions taken and never written (a thread killed in a call) */
	bool stacks;	     /* the library unwinds: STACK records and stack ids are its to write */
	uint32_t objects;    /* OBJECT ids announced (stacks.h), set before each feed */
	uint64_t stacks_fed; /* STACK records fed */
};

/*
 * The end of the user address space on this machine (4- or 5-level
 * paging): no allocation reaches past it.  Probes with one mmap.
 */
uint64_t fast_va_end(void);

/* Starts reading the ring @ring (borrowed) of process @pid, accepted at @opened_ns. */
void fast_reader__init(struct fast_reader *r, void *ring, uint32_t pid, uint64_t opened_ns,
		       uint64_t va_end);

/*
 * The process closed its end: what it wrote until now is read (one lap),
 * positions taken and not written count as lost.  A head that cannot be
 * (behind the tail, or more than MT_FAST_MAX_WAITERS past a full ring)
 * makes the ring a liar.
 */
void fast_reader_close(struct fast_reader *r);

/*
 * Feeds the ring's valid records stamped up to @until, at most
 * FAST_READ_MAX positions, refusing (and counting) the others.  *@next is
 * the timestamp of the first record left (0: the read stopped at its
 * bound, more may be ready), UINT64_MAX when none is written yet.  Returns
 * the records fed or the pipeline's -errno.
 */
int fast_reader_feed(struct fast_reader *r, struct pipeline *p, uint64_t until, uint64_t *next);

/* Whether nothing more will be read: a closed ring read to its end, or a liar. */
bool fast_reader_done(const struct fast_reader *r);

/*
 * Whether @h and @f (a copy of a slot) are a heap call the library can
 * have recorded for a process whose blocks lie below @va_end, with a
 * stack id (odd) when @stacks, else 0.  fast_record_valid: without stacks.
 */
bool fast_heap_valid(const struct mt_rec_hdr *h, const __u64 *f, uint64_t va_end, bool stacks);
bool fast_record_valid(const struct mt_rec_hdr *h, const __u64 *f, uint64_t va_end);

#endif /* MEMTRACK_FAST_READER_H */
