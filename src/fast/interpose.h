/* SPDX-License-Identifier: MIT */
/*
 * interpose.h - what the hand-over (handover.c) asks of the allocator
 * entry points (interpose.c), which record into the ring (ring.h).
 *
 * THREAD NOTES: interpose_resolve is idempotent and safe from any thread
 * (an entry point calls it when it comes first); interpose_patch_exe and
 * interpose_owns_malloc run single-threaded, in the hand-over.
 */
#ifndef MEMTRACK_FAST_INTERPOSE_H
#define MEMTRACK_FAST_INTERPOSE_H

#include <stdbool.h>
#include "fast/fast_lib.h"

/* Resolves the functions interposed (the next definitions); idempotent. */
void interpose_resolve(void) HIDDEN;

/*
 * Redirects the executable's own operator delete forms to hooks of the
 * library; call once memtrack accepted the process, before the marker.
 */
void interpose_patch_exe(void) HIDDEN;

/*
 * Where every thread's allocator-call depth (nonzero inside a malloc,
 * free ... of ours, the delegate's own work included) lies: bytes from the
 * thread pointer, the same for every thread (initial-exec TLS).  The
 * marker hands it to fast.bpf.c, so vm.bpf.c can tell the allocator's
 * mappings from the program's (MT_REC_ALLOCATOR).
 */
long interpose_depth_offset(void) HIDDEN;

/*
 * @len bytes of zeroed memory for the library's own use, mapped with the
 * depth raised: vm.bpf.c marks the mapping the allocator's, so the
 * program's mapped memory does not count it (a large .bss would: ld.so
 * maps it as an anonymous mapping memtrack cannot tell from the
 * program's).  NULL on failure.  Never unmapped.
 */
void *interpose_own_map(size_t len) HIDDEN;

/* interpose_own_map() of @len bytes of file @fd, read-only and shared. */
void *interpose_own_map_fd(size_t len, int fd) HIDDEN;

/* Whether this process's malloc is ours, then libc's (no other allocator linked). */
bool interpose_owns_malloc(void) HIDDEN;

#endif /* MEMTRACK_FAST_INTERPOSE_H */
