// SPDX-License-Identifier: MIT
/*
 * handover.c - how libmemtrack-fast.so takes a process over from the
 * uprobes (see fast_ring.h and fast.bpf.c): the top layer of the library.
 *
 * At load the library takes its two environment entries out of the
 * program's environment (env.h; its exec entry points, exec.h, put them
 * back for what the program execs).  At load and in a fork child (before
 * fork returns) it makes a ring (ring.h), sends it to memtrack over the
 * socket named by MEMTRACK_FAST_SOCKET (link.h), waits for memtrack to accept it (memtrack
 * says yes only for a process of its tree), and then announces with the
 * marker prctl: from that syscall on, this process's outermost heap calls
 * are recorded by the entry points (interpose.c) and the uprobes ignore
 * them.  Any failure before the announcement leaves the process to the
 * uprobes, which never stopped.
 *
 * Nothing here allocates or takes a lock.  THREAD NOTES: everything runs
 * single-threaded with signals blocked: the constructor, and the atfork
 * child handler (the child has one thread).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <linux/types.h>
#include "bpf_abi.h"
#include "fast/env.h"
#include "fast/exec.h"
#include "fast/fast_ring.h"
#include "fast/interpose.h"
#include "fast/link.h"
#include "fast/ring.h"
#include "fast/table_pages.h"
#include "fast/unwind.h"
#include "fast/vfork.h"

/* The unwinder's tables as read here (a fork child inherits its parent's). */
static struct {
	struct fast_table_pages tables;
	void *umaps;
} S = { .tables = { .fd = -1 } };

#define UMAPS_BYTES ((sizeof(struct mt_fast_umaps) + 4095) & ~(size_t)4095)

static void drop_stacks(void)
{
	fast_unwind_detach();
	fast_table_pages_close(&S.tables);
	if (S.umaps)
		munmap(S.umaps, UMAPS_BYTES);
	S.umaps = NULL;
}

/*
 * Takes memtrack's tables: their memfd, kept at a high number, for reading
 * them a page at a time into memory of the library's (table_pages.h: not
 * mapped, so the pages around each one read do not count in the process's
 * RSS), and this process's mappings, mapped.  After the marker: with the
 * depth raised, which vm.bpf.c reads from then on, the copy and the
 * mapping are the allocator's, not the program's.  Any failure: no stacks
 * (the heap records name none).
 */
static void map_stacks(struct link_stacks *st)
{
	int fd = st->tables_fd;

	if (fd < 0)
		return;
	st->tables_fd = -1; /* the table pages' from here on, closed by them */
	if (!fast_table_pages_open(&S.tables, link_move_high(fd), st->tables_bytes,
				   interpose_own_map))
		S.umaps = interpose_own_map_fd(UMAPS_BYTES, st->maps_fd);
	if (!S.umaps ||
	    !fast_unwind_attach(&S.tables, st->index_off, st->rows_cap, st->index_cap, S.umaps))
		drop_stacks();
	link_stacks_close(st);
}

/* Forgets the ring and connection (a fork child inherits its parent's). */
static void drop_session(void)
{
	drop_stacks();
	ring_drop(); /* first: it stops reading the switch link_drop() unmaps */
	link_drop();
}

/*
 * Makes a ring, hands it to memtrack and announces.  Any failure leaves the
 * process to the uprobes.
 */
static void start_session(void)
{
	const char *path = env_socket();
	const volatile uint32_t *heap_switch = NULL;
	struct link_stacks st = { .tables_fd = -1, .maps_fd = -1 };
	int memfd;

	if (!path || !*path || !interpose_owns_malloc())
		return;
	memfd = ring_create();
	if (memfd < 0)
		goto fail;
	if (link_connect(path) || link_hello(memfd, &heap_switch, &st))
		goto fail;
	close(memfd);
	interpose_patch_exe();
	/* the handover: fails with EINVAL, after fast.bpf.c has seen it; the
	 * 4th argument: whether this process unwinds its heap calls' stacks */
	prctl(MT_FAST_PRCTL, MT_FAST_VERSION, interpose_depth_offset(),
	      st.tables_fd >= 0 ? MT_FAST_UNWINDS : 0, 0);
	map_stacks(&st);
	ring_start(heap_switch);
	return;
fail:
	if (memfd >= 0)
		close(memfd);
	drop_session();
}

/*
 * start_session() with every signal blocked: the program's handlers (and
 * its timers) are already there in a fork child, and an interrupted
 * connect, send or wait for the answer would leave the process to the
 * uprobes for nothing.  Blocked signals wait until the handover is done.
 */
static void start_session_masked(void)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	start_session();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* In a fork child, before fork returns: a ring of its own. */
static void atfork_child(void)
{
	drop_session();
	start_session_masked();
}

__attribute__((constructor(101))) static void fast_init(void)
{
	interpose_resolve();
	vfork_resolve();
	exec_resolve();
	env_take(); /* before main: the program never sees memtrack's entries */
	start_session_masked();
	pthread_atfork(NULL, NULL, atfork_child);
}
