/* SPDX-License-Identifier: MIT */
/*
 * heap_stub.h - stand-ins for the heap programs, loaded before the BPF side.
 *
 * Creating a uprobe link waits for an RCU grace period (~10 ms here: the
 * kernel's uprobe registration takes a percpu rwsem for writing).  The
 * root's C library is attached before its exec (probes_preattach()), and
 * that wait can overlap the BPF side's load (~20 ms of CPU: BTF, the
 * verifier) if the links need not wait for alloc_enter and alloc_exit to
 * exist.  So they are made with two stubs of a few instructions, which
 * tail-call slot 0 (entries) or 1 (returns) of a program array; once the
 * BPF side is loaded, heap_stub_arm() puts alloc_enter and alloc_exit into
 * those slots.  A tail call keeps the context, and the attach cookie and
 * the probed address live in the task's run context, so alloc_enter runs
 * as if attached itself.  Until armed, a stub does nothing (the root is
 * parked before its exec then: nothing calls it).
 */
#ifndef MEMTRACK_HEAP_STUB_H
#define MEMTRACK_HEAP_STUB_H

#include "compiler.h"

struct heap_stub {
	int map_fd;   /* the program array, -1: none */
	int enter_fd; /* the stub for entry sites */
	int exit_fd;  /* the stub for return sites */
};

/*
 * Loads the array and both stubs into *@s (all -1 on failure), for links
 * of @attach_type (struct attach_ops.prog_attach_type).  Returns 0 or -errno.
 */
MT_MUST_CHECK int heap_stub_load(struct heap_stub *s, unsigned attach_type);

/* Makes the stubs run the programs @enter_fd and @exit_fd.  Returns 0 or -errno. */
MT_MUST_CHECK int heap_stub_arm(const struct heap_stub *s, int enter_fd, int exit_fd);

/*
 * Closes what heap_stub_load() made, at the end: the kernel empties a
 * program array once no fd refers to it, so the stubs would then do
 * nothing.  Accepts a stub never loaded (all fds -1).
 */
void heap_stub_close(struct heap_stub *s);

#endif /* MEMTRACK_HEAP_STUB_H */
