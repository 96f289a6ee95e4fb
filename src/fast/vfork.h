/* SPDX-License-Identifier: MIT */
/*
 * vfork.h - libmemtrack-fast.so's vfork entry point (vfork.c).
 *
 * vfork(): the child runs on this process's memory, library included, but
 * is a process of its own that never announced: its calls belong to the
 * uprobes (attached to it when it was parked at vfork).  Our vfork raises
 * the calling thread's fast_vfork_flag (ring.h: thread-local, as the child
 * runs on that thread's TLS) and jumps to libc's (a jump, not a call: the
 * child must return straight to the program).  posix_spawn's
 * child (glibc's own clone) does not allocate.
 */
#ifndef MEMTRACK_FAST_VFORK_H
#define MEMTRACK_FAST_VFORK_H

#include "fast/fast_lib.h"

/* Finds the vfork jumped to (the next definition); call once, before any vfork (the constructor). */
void vfork_resolve(void) HIDDEN;

#endif /* MEMTRACK_FAST_VFORK_H */
