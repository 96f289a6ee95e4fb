/* SPDX-License-Identifier: MIT */
/*
 * probes.h - the allocator uprobes of every process of the tree.
 *
 * Uprobes are attached per process (never for pid -1), so processes outside
 * the tree never trap.  A process gets its probes while it is parked (see
 * proc.bpf.c and vm.bpf.c): probes_sync() looks at its executable mappings
 * and attaches every allocator file it has not attached yet.
 *
 * THREAD NOTES: only the poller thread calls into this module once the
 * pipeline runs; main calls probes__new() before and probes__free() after,
 * and probes_preattach() while the tree is its root alone, parked before
 * its exec (nothing the poller could sync).
 * Links it lets go of are retired (retire.h): no call here waits for a
 * grace period, but probes_forget(..., true).
 */
#ifndef MEMTRACK_PROBES_H
#define MEMTRACK_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler.h"

struct attach_ops;
struct probes;
struct retire;

struct probes_stats {
	uint64_t syncs;	   /* probes_sync() calls */
	uint64_t links;	   /* uprobes attached in all */
	uint64_t failures; /* attach failures (process gone, ...) */
	uint64_t lost;	   /* live processes a sync left without (all) probes, once each */
	int last_error;	   /* errno of the last such sync, 0 if none */
	uint64_t sync_ns;  /* time spent attaching */
};

/*
 * Returns an empty registry, or NULL with errno set.  Its links are made
 * by @attach (attach.h, attach_select()) and retired through @retire
 * (borrowed; it outlives the registry).  Set the programs
 * (probes__set_progs) before attaching.
 */
struct probes *probes__new(struct retire *retire, const struct attach_ops *attach);

/*
 * Links made from now on run @enter_fd at entry sites and @exit_fd at
 * return sites (both borrowed): alloc_enter and alloc_exit, or the stubs
 * that stand in for them before the BPF side is loaded (heap_stub.h).
 */
void probes__set_progs(struct probes *p, int enter_fd, int exit_fd);

/*
 * Attaches the allocator probes @pid still lacks.  Returns the number of
 * probes attached, or -errno (-ESRCH when the process is gone; any other
 * error is counted in probes_stats.lost: the process runs on unprobed).
 */
MT_MUST_CHECK int probes_sync(struct probes *p, pid_t pid);

/*
 * For the root of the tree, parked before its exec (a fork of memtrack):
 * attaches the C library it maps, memtrack's own, which nearly every
 * command maps too.  A link is bound to the process and the file, and
 * stays through exec, so the sync after the exec finds libc attached and
 * the command waits for no link creation (a grace period, ~10 ms here);
 * a command that maps another libc, or none, just never triggers it.
 * Returns the sites attached or -errno (then nothing is attached).
 */
MT_MUST_CHECK int probes_preattach(struct probes *p, pid_t pid);

/*
 * Forgets everything attached for @pid.  Links of an exited process are
 * inert: they are retired (retire_fds(), no waiting for their grace
 * periods); @detach_now closes them here, for a process that lives on (an
 * exec by a non-leader thread: the kernel still runs links bound to the
 * old leader for the thread group).
 */
void probes_forget(struct probes *p, pid_t pid, bool detach_now);

/*
 * --fast: sites under the names libmemtrack-fast.so interposes carry
 * MT_COOKIE_INTERPOSED (alloc.bpf.c ignores them once the process has
 * announced) and get links of their own, which probes_fast() detaches.
 * Call before the first probes_sync().
 */
void probes__set_fast(struct probes *p, bool on);

/*
 * @pid announced the in-process path: detaches its interposed sites (their
 * calls stop trapping) and attaches none from now on; the other sites (a
 * vendor allocator's own API) stay.  Until its next exec.
 */
void probes_fast(struct probes *p, pid_t pid);

/*
 * Whether @pid's executable defines allocator functions of its own (a
 * linked-in allocator): calls inside the executable bind there, past
 * libmemtrack-fast.so, so such a process stays on the uprobes.  C++
 * operators alone (a statically linked C++ runtime, gcc's cc1) do not
 * count: the library recognises their calls of malloc and free.
 */
bool probes_exe_allocates(struct probes *p, pid_t pid);

/* Whether @pid announced the in-process path (and has not exec'd since). */
bool probes_is_fast(const struct probes *p, pid_t pid);

void probes__stats(const struct probes *p, struct probes_stats *st);

/* Retires every link and frees the registry (NULL is fine). */
void probes__free(struct probes *p);

#endif /* MEMTRACK_PROBES_H */
