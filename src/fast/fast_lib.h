/* SPDX-License-Identifier: MIT */
/*
 * fast_lib.h - what the two halves of libmemtrack-fast.so share:
 * interpose.c (the allocator entry points) and session.c (the ring, the
 * socket to memtrack, the handover).  Everything here is hidden.
 */
#ifndef MEMTRACK_FAST_LIB_H
#define MEMTRACK_FAST_LIB_H

#include <stdbool.h>
#include <stdint.h>

#define HIDDEN __attribute__((visibility("hidden")))
#define TLS_IE __attribute__((tls_model("initial-exec")))

/* 1 once this process announced: its outermost heap calls are ours to record. */
extern volatile int fast_recording HIDDEN;

/* memtrack's heap-recording switch (0: off), shared with the BPF side. */
extern const volatile uint32_t *fast_heap_switch HIDDEN;

/*
 * Appends one heap record (type, fn, fields) for the calling thread.  Waits
 * while the ring is full; gives up for good (fast_recording = 0) when
 * memtrack is gone.  Async-signal-safe; never allocates.
 */
void fast_record(uint16_t type, uint16_t fn, uint32_t nfields, uint64_t a, uint64_t b,
		 uint64_t c) HIDDEN;

/* Resolves the functions interposed (interpose.c); idempotent. */
void interpose_resolve(void) HIDDEN;

/*
 * Redirects the executable's own operator delete forms to hooks of the
 * library (interpose.c); call once memtrack accepted the process, before
 * the marker.
 */
void interpose_patch_exe(void) HIDDEN;

/* Whether this process's malloc is ours, then libc's (no other allocator linked). */
bool interpose_owns_malloc(void) HIDDEN;

#endif /* MEMTRACK_FAST_LIB_H */
