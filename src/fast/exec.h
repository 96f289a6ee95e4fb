/* SPDX-License-Identifier: MIT */
/*
 * exec.h - libmemtrack-fast.so's exec and spawn entry points (exec.c).
 *
 * The program never sees memtrack's two environment entries (env.h); what
 * it execs gets them back, so each exec'd image loads the library again:
 * execve, execveat, fexecve, execv, execvp, execvpe, execl, execlp,
 * execle, posix_spawn and posix_spawnp pass env_build()'s envp (the one
 * the program passed, or `environ`, with both put back) to libc's.  glibc's
 * system() and popen() spawn inside libc (its internal __posix_spawn, past
 * the symbol table): system() is written here as glibc 2.36's is, over
 * posix_spawn; popen() calls libc's with `environ` swapped for the built
 * one while it spawns (another thread reading the environment in that
 * window sees memtrack's entries).
 *
 * A program that execs by a raw syscall (Go, static code) passes its own
 * envp: its image records on the uprobes, which follow the tree in the
 * kernel.  Nothing here allocates (a vfork child execs on its parent's
 * memory): envps are built on the exec'ing thread's stack.
 */
#ifndef MEMTRACK_FAST_EXEC_H
#define MEMTRACK_FAST_EXEC_H

#include "fast/fast_lib.h"

/* Finds libc's functions (the next definitions); call once, in the constructor, before any exec. */
void exec_resolve(void) HIDDEN;

#endif /* MEMTRACK_FAST_EXEC_H */
