/* SPDX-License-Identifier: MIT */
/*
 * ring.h - the producer side of this process's ring (fast_ring.h): the
 * heap records the allocator entry points append for memtrack to drain,
 * and the state those entry points test on every call.  Uses the link
 * (link.h) to wake memtrack and to see that it is gone; knows nothing of
 * allocator functions.
 *
 * Nothing here allocates or takes a lock: it runs before the program's
 * constructors, inside malloc, in fork children and in signal handlers.
 * THREAD NOTES: fast_record() is called by any thread (the ring is
 * multi-producer, fast_ring.h); ring_create, ring_start and ring_drop run
 * single-threaded (the constructor, the fork child's handler: handover.c).
 */
#ifndef MEMTRACK_FAST_RING_LIB_H
#define MEMTRACK_FAST_RING_LIB_H

#include <stdbool.h>
#include <stdint.h>
#include "fast/fast_lib.h"

/*
 * 1 once this process announced (ring_start): its outermost heap calls
 * are ours to record.  Back to 0 when memtrack is gone (fast_record) or
 * the ring is dropped.
 */
extern volatile int fast_recording HIDDEN;

/* memtrack's heap-recording switch (0: off), shared with the BPF side; always on until ring_start. */
extern const volatile uint32_t *fast_heap_switch HIDDEN;

/*
 * Raised by the vfork entry point (vfork.c) for the calling thread: a
 * vfork child runs on that thread's TLS (and memory), so while it is up, a
 * record of that thread whose getpid() is not this ring's process is the
 * vfork child's and is dropped (the uprobes record that child); the
 * thread's first record of ours, once the child exec'd or exited, lowers
 * it.  Other threads of the process, allocating meanwhile, never see it.
 */
extern __thread uint32_t fast_vfork_flag HIDDEN TLS_IE;

/*
 * Appends one heap record (type, fn, fields, its stack id or 0) for the calling thread.  Waits
 * while the ring is full; gives up for good (fast_recording = 0) when
 * memtrack is gone.  Async-signal-safe; never allocates.
 */
void fast_record(uint16_t type, uint16_t fn, uint32_t nfields, uint64_t a, uint64_t b, uint64_t c,
		 uint64_t stack) HIDDEN;

struct fast_stack;

/*
 * Appends a STACK record (a head and its frame slots, fast_ring.h) of the
 * unwound @st, before the heap record that names it.  As fast_record();
 * returns whether it was written (not: a vfork child's, recording off,
 * memtrack gone).
 */
bool fast_record_stack(const struct fast_stack *st) HIDDEN;

struct mt_rec_pycode;

/*
 * Appends a PYCODE record (a head, f[0] the bytes that follow: @c's fields
 * and its blob, in data slots) before the STACK record whose frames name
 * it.  As fast_record_stack().
 */
bool fast_record_pycode(const struct mt_rec_pycode *c) HIDDEN;

/* The process the ring is of (its keys of Python code objects: py_key.h). */
uint32_t fast_ring_pid(void) HIDDEN;

/*
 * Makes this process's ring: a memfd sealed at its size (memtrack maps no
 * other), mapped here, its header filled.  Returns the memfd (the caller
 * closes it once it is handed over), or -1 with no ring.
 */
int ring_create(void) HIDDEN;

/*
 * Notes in the ring's header that this process exec'd a program without
 * memtrack's entries (exec.c: env_overflow, fast_ring.h).  Async-signal-safe.
 */
void ring_note_env_overflow(void) HIDDEN;

/* Starts recording into the ring, with memtrack's switch @heap_switch (borrowed, mapped by the link). */
void ring_start(const volatile uint32_t *heap_switch) HIDDEN;

/*
 * Stops recording and forgets the ring and this process's state (the
 * switch, the thread id, the vfork flag): a fork child inherits its
 * parent's and starts afresh.  Call before link_drop() (it unmaps the switch).
 */
void ring_drop(void) HIDDEN;

#endif /* MEMTRACK_FAST_RING_LIB_H */
