/* SPDX-License-Identifier: MIT */
/*
 * link.h - libmemtrack-fast.so's connection to memtrack: the Unix socket
 * named by MEMTRACK_FAST_SOCKET, the hello that hands over the ring's
 * memfd, memtrack's answer (with its heap-recording switch), the wakeups,
 * and whether memtrack is gone.  The lowest layer of the library: it knows
 * nothing of rings or allocator calls.
 *
 * The socket is a number in the program's fd table: the program may close
 * every fd or dup2 over it.  Once it is not the socket made (fstat
 * identity), the link forgets it (never closes it: the number is the
 * program's now) and the process records on without it: memtrack reads the
 * ring while the image lives (fast_drain.c), so only the wakeups and the
 * end's notice are lost.
 *
 * Nothing here allocates.  THREAD NOTES: link_connect, link_hello and
 * link_drop run single-threaded with signals blocked (the constructor, a
 * fork child's handler); link_poke and link_peer_gone are called by any
 * thread (a producer waiting on a full ring) and are async-signal-safe.
 */
#ifndef MEMTRACK_FAST_LINK_H
#define MEMTRACK_FAST_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include "fast/fast_lib.h"

/*
 * Connects to memtrack's socket at @path, moved to a high fd number (out of
 * the way of a program that takes the lowest free ones).  Returns 0, or -1
 * with nothing left open.
 */
int link_connect(const char *path) HIDDEN;

/*
 * With --stacks, the answer's two more fds (fast_ring.h's struct
 * mt_fast_answer): the unwind tables and this process's mappings, and the
 * tables' geometry.  -1: none (the library takes no stacks).
 */
struct link_stacks {
	int tables_fd, maps_fd;
	uint64_t tables_bytes, index_off;
	uint32_t rows_cap, index_cap;
};

/*
 * Sends the hello with the ring's @memfd (borrowed) and waits (a few
 * seconds at most) for memtrack's answer.  Returns 0 when memtrack took the
 * process (a process of its tree), with *@heap_switch pointing at its
 * heap-recording switch (mapped until link_drop()) and @st filled (its
 * fds the caller's); -1 otherwise (no fd left in @st).
 */
int link_hello(int memfd, const volatile uint32_t **heap_switch, struct link_stacks *st) HIDDEN;

/*
 * Moves @fd to a high number (below the soft fd limit, at most 1024: the
 * fd table stays small), close-on-exec, out of the way of a program that
 * takes the lowest free numbers or dup2()s onto its own small ones.
 * Returns the fd to use (@fd when there is no room up there).
 */
int link_move_high(int fd) HIDDEN;

/* Closes the fds of @st (-1 after). */
void link_stacks_close(struct link_stacks *st) HIDDEN;

/* Tells memtrack's poller to drain now (a byte on the socket; never blocks). */
void link_poke(void) HIDDEN;

/*
 * Whether memtrack hung up: its end of the socket closed or, with the
 * socket lost, its process is gone.  A signal or a full buffer is no end.
 */
bool link_peer_gone(void) HIDDEN;

/* Closes the socket if it is still ours and unmaps the switch (a fork child inherits its parent's). */
void link_drop(void) HIDDEN;

#endif /* MEMTRACK_FAST_LINK_H */
