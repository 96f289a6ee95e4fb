/* SPDX-License-Identifier: MIT */
/*
 * fast_lib.h - the attributes every file of libmemtrack-fast.so uses.
 *
 * The library's files depend one way (each includes only the headers of
 * the layers below it):
 *
 *   own_map.c    where the library's own mappings go (address hints)
 *   env.c        memtrack's two environment entries: out of `environ`, back for execs
 *   link.c       the socket to memtrack: connect, hello, answer, wakeups
 *   ring.c       the ring: the producer side of fast_ring.h (uses link)
 *   sampler.c    --sample-bytes: the draw, the exact totals, the live sampled blocks
 *   interpose.c  the allocator entry points (record into the ring)
 *   vfork.c      the vfork entry point (tells the ring whose calls are not ours)
 *   exec.c       the exec and spawn entry points (pass env.c's envp)
 *   handover.c   the constructor and fork handler: makes the ring, hands it
 *                to memtrack, announces (uses all of the above)
 *   next_sym.c   symbol lookup without allocating (used by interpose, vfork, exec)
 *   unwind.c     the in-process stack unwinder (the kernel's rules)
 *   stack.c      the unwinder wired to the ring: memtrack's tables, an allocator call's stack
 *
 * Everything is hidden but the entry points.
 */
#ifndef MEMTRACK_FAST_LIB_H
#define MEMTRACK_FAST_LIB_H

#define HIDDEN __attribute__((visibility("hidden")))
#define TLS_IE __attribute__((tls_model("initial-exec")))

#endif /* MEMTRACK_FAST_LIB_H */
