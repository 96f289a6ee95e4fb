/* SPDX-License-Identifier: MIT */
/*
 * env.h - the library's two environment entries (env.c): memtrack puts
 * the library first in LD_PRELOAD and names its socket in
 * MEMTRACK_FAST_SOCKET; the program must see neither (they change what it
 * allocates: python and perl copy their environment), and what it execs
 * must get both back (so the tree stays on the in-process path).
 *
 * env_take() keeps both (in static buffers) and edits them out of
 * `environ` in place, before main; the exec entry points (exec.c) pass
 * env_build()'s envp, the program's with both put back.
 *
 * Nothing here allocates: env_build() runs in vfork children, on their
 * parent's memory, and fills the caller's stack buffers (env_need() says
 * how big).  THREAD NOTES: env_take runs once, single-threaded (the
 * constructor); the rest only reads what it kept and is async-signal-safe.
 */
#ifndef MEMTRACK_FAST_ENV_H
#define MEMTRACK_FAST_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include "fast/fast_lib.h"


/*
 * Keeps the socket's entry and the library's LD_PRELOAD entry and removes
 * them from `environ` (LD_PRELOAD's other entries stay, as the user set
 * them).  Does nothing when MEMTRACK_FAST_SOCKET is not set (the library
 * was not put there by memtrack).
 */
void env_take(void) HIDDEN;

/* The socket's path as memtrack set it, or NULL. */
const char *env_socket(void) HIDDEN;

/* What env_build() needs for an envp: 0 slots when it passes it unchanged. */
struct env_need {
	size_t slots;	      /* pointers, the terminating NULL included */
	size_t preload_bytes; /* the LD_PRELOAD= entry written */
	long preload_at;      /* the envp's LD_PRELOAD entry, -1: none */
	bool overflow;	      /* beyond MT_FAST_ENV_MAX_* (fast_ring.h): passed as is */
};

/*
 * Sizes the envp @envp would become.  0 slots when there is nothing to put
 * back: memtrack's entries were never taken, @envp names a socket of its
 * own (the program set it).  A NULL @envp is an empty one (Linux execve;
 * clearenv() leaves `environ` NULL).  An @envp
 * beyond MT_FAST_ENV_MAX_* (fast_ring.h) is passed as is too: the image
 * records on the uprobes (exactly), and `overflow` says so.
 */
struct env_need env_need(char *const envp[]) HIDDEN;

/*
 * @envp with LD_PRELOAD (the library first, then the envp's own entries,
 * unless they have it already) and the socket's entry put back, built in
 * @slots and @preload as sized by @need; @envp itself when @need has 0 slots.
 */
char *const *env_build(char *const envp[], const struct env_need *need, char **slots,
		       char *preload) HIDDEN;

/*
 * Takes memtrack's two entries (as env_build() wrote them, its LD_PRELOAD
 * entry at @preload) out of the NULL-terminated array @env in place: the
 * LD_PRELOAD entry goes back to @orig_preload (NULL: none).  For a
 * swapped `environ` that a setenv() copied meanwhile (exec.c).
 */
void env_strip(char **env, const char *preload, char *orig_preload) HIDDEN;

#endif /* MEMTRACK_FAST_ENV_H */
