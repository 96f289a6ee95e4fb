// SPDX-License-Identifier: MIT
/*
 * test_analysis.c - report's aggregation (analysis.c) on synthetic event
 * streams: heap totals and peaks, realloc, leaks at exit and exec, forks
 * and threads, RSS and physical peaks, unknown types.  Every expected value
 * is worked out by hand from the stream.
 */
#include <string.h>
#include "analyze/analysis.h"
#include "harness.h"

static uint64_t clock_ns = 1000;

static struct mt_event ev(unsigned type, uint32_t pid, unsigned nfields)
{
	struct mt_event e;

	memset(&e, 0, sizeof(e));
	e.h.type = type;
	e.h.pid = pid;
	e.h.tid = pid;
	e.h.nfields = nfields;
	e.h.ts = clock_ns += 10;
	return e;
}

static void add_alloc(struct analysis *a, unsigned type, uint32_t pid, uint64_t addr, uint64_t size)
{
	struct mt_event e = ev(type, pid, MALLOC_NFIELDS);

	e.f[MALLOC_ADDR] = addr;
	e.f[MALLOC_SIZE] = size;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_free(struct analysis *a, uint32_t pid, uint64_t addr)
{
	struct mt_event e = ev(MT_FREE, pid, FREE_NFIELDS);

	e.f[FREE_ADDR] = addr;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_realloc(struct analysis *a, uint32_t pid, uint64_t old, uint64_t addr,
			uint64_t size)
{
	struct mt_event e = ev(MT_REALLOC, pid, REALLOC_NFIELDS);

	e.f[REALLOC_ADDR] = addr;
	e.f[REALLOC_SIZE] = size;
	e.f[REALLOC_OLD_ADDR] = old;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_fork(struct analysis *a, uint32_t parent, uint32_t child, unsigned flags)
{
	struct mt_event e = ev(MT_FORK, parent, FORK_NFIELDS);

	e.f[FORK_PARENT] = parent;
	e.f[FORK_CHILD] = child;
	e.f[FORK_FLAGS] = flags;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_exec(struct analysis *a, uint32_t pid, const char *path)
{
	struct mt_event e = ev(MT_EXEC, pid, EXEC_NFIELDS);

	e.f[EXEC_OLD_PID] = pid;
	snprintf(e.str, sizeof(e.str), "%s", path);
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_exit(struct analysis *a, uint32_t pid, int64_t code, unsigned sig)
{
	struct mt_event e = ev(MT_EXIT, pid, EXIT_NFIELDS);

	e.f[EXIT_CODE] = (uint64_t)code;
	e.f[EXIT_SIGNAL] = sig;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static void add_rss(struct analysis *a, uint32_t pid, uint64_t anon, uint64_t file, uint64_t shmem,
		    uint64_t swap)
{
	struct mt_event e = ev(MT_RSS, pid, RSS_NFIELDS);

	e.f[RSS_ANON] = anon;
	e.f[RSS_FILE] = file;
	e.f[RSS_SHMEM] = shmem;
	e.f[RSS_SWAP] = swap;
	CHECK_EQ(analysis_add(a, &e), 0);
}

static const struct proc_summary *proc(const struct analysis *a, uint32_t pid)
{
	for (unsigned i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	return NULL;
}

static void test_heap_totals_and_peak(void)
{
	struct analysis a;

	analysis_init(&a);
	add_alloc(&a, MT_MALLOC, 100, 0x1000, 100);
	add_alloc(&a, MT_CALLOC, 100, 0x2000, 50);	  /* live 150 */
	add_free(&a, 100, 0x1000);			  /* live 50 */
	add_alloc(&a, MT_ALIGNED_ALLOC, 100, 0x3000, 30); /* live 80 */
	add_free(&a, 100, 0x9999);			  /* never allocated: counted, no effect */
	add_free(&a, 100, 0x2000);			  /* live 30 */
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 3);
	CHECK_U64(a.total_allocated_bytes, 180);
	CHECK_U64(a.free_count, 3);
	CHECK_U64(a.peak_live_bytes, 150);
	CHECK_U64(a.leaked_count, 1);
	CHECK_U64(a.leaked_bytes, 30);
	CHECK_U64(a.events[MT_MALLOC], 1);
	CHECK_U64(a.events[MT_FREE], 3);
	CHECK_U64(a.first_ts, 1010);
	CHECK_U64(a.last_ts, 1060);
	analysis_release(&a);
}

/* A realloc moves a block: one allocation, no free, the old size gone. */
static void test_realloc_moves(void)
{
	struct analysis a;
	const struct proc_summary *p;

	analysis_init(&a);
	add_alloc(&a, MT_MALLOC, 7, 0x1000, 64);
	add_realloc(&a, 7, 0x1000, 0x5000, 256); /* live 256 */
	add_free(&a, 7, 0x5000);
	analysis_finish(&a);
	CHECK_U64(a.alloc_count, 2);
	CHECK_U64(a.total_allocated_bytes, 320);
	CHECK_U64(a.free_count, 1);
	CHECK_U64(a.peak_live_bytes, 256);
	CHECK_U64(a.leaked_count, 0);
	p = proc(&a, 7);
	CHECK(p != NULL);
	if (p) {
		CHECK_U64(p->allocs, 2);
		CHECK_U64(p->peak_heap_bytes, 256);
		CHECK_U64(p->live_bytes, 0);
	}
	analysis_release(&a);
}

/* What a process holds at exit or exec is leaked, then and there. */
static void test_leaks_at_exit_and_exec(void)
{
	struct analysis a;
	const struct proc_summary *p, *c;

	analysis_init(&a);
	add_exec(&a, 10, "/usr/bin/parent");
	add_alloc(&a, MT_MALLOC, 10, 0x1000, 11);
	add_fork(&a, 10, 11, 0);
	add_alloc(&a, MT_MALLOC, 11, 0x1000, 22); /* same address, other process */
	add_exec(&a, 11, "/bin/child");		  /* 22 leaked by the old image */
	add_alloc(&a, MT_MALLOC, 11, 0x2000, 33);
	add_exit(&a, 11, -1, 9); /* 33 leaked */
	add_free(&a, 10, 0x1000);
	add_exit(&a, 10, 3, 0);
	analysis_finish(&a);
	CHECK_U64(a.leaked_count, 2);
	CHECK_U64(a.leaked_bytes, 55);
	CHECK_EQ(a.nprocs, 2);
	p = proc(&a, 10);
	c = proc(&a, 11);
	CHECK(p && c);
	if (!p || !c)
		goto out;
	CHECK_U64(p->leaked_bytes, 0);
	CHECK_U64(c->leaked_count, 2);
	CHECK_U64(c->leaked_bytes, 55);
	CHECK_EQ(c->ppid, 10);
	CHECK_STR(p->command, "parent");
	CHECK_STR(c->command, "child");
	CHECK(c->exited);
	CHECK_EQ(c->exit_code, -1);
	CHECK_EQ(c->exit_signal, 9);
	CHECK_EQ(p->exit_code, 3);
out:
	analysis_release(&a);
}

/* A thread is not a process; a fork child inherits the command name. */
static void test_threads_and_fork_command(void)
{
	struct analysis a;
	const struct proc_summary *c;

	analysis_init(&a);
	add_exec(&a, 20, "/opt/app");
	add_fork(&a, 20, 21, MT_FORK_THREAD | MT_FORK_VM);
	add_fork(&a, 20, 22, 0);
	analysis_finish(&a);
	CHECK_EQ(a.nprocs, 2);
	CHECK(proc(&a, 21) == NULL);
	c = proc(&a, 22);
	CHECK(c != NULL);
	if (c)
		CHECK_STR(c->command, "app");
	analysis_release(&a);
}

/* Tree RSS is the sum of live processes' anon+file+shmem (swap excluded). */
static void test_rss_peaks(void)
{
	struct analysis a;
	const struct proc_summary *p;

	analysis_init(&a);
	add_rss(&a, 30, 1000, 200, 30, 5000); /* 30: 1230, tree 1230 */
	add_fork(&a, 30, 31, 0);
	add_rss(&a, 31, 500, 0, 0, 0);	/* tree 1730 */
	add_rss(&a, 30, 100, 0, 0, 0);	/* 30: 100, tree 600 */
	add_exit(&a, 31, 0, 0);		/* tree 100 */
	add_rss(&a, 31, 9999, 0, 0, 0); /* after exit: ignored */
	analysis_finish(&a);
	CHECK(a.has_rss);
	CHECK_U64(a.peak_rss_bytes, 1730);
	CHECK_U64(a.tree_rss_bytes, 100);
	p = proc(&a, 30);
	CHECK(p != NULL);
	if (p)
		CHECK_U64(p->peak_rss_bytes, 1230);
	analysis_release(&a);
}

static void test_physical_and_unknown(void)
{
	struct analysis a;
	struct mt_event e;
	uint64_t bytes[] = { 4096, 65536, 8192 };

	analysis_init(&a);
	for (int i = 0; i < 3; i++) {
		e = ev(MT_PHYSICAL, 1, PHYSICAL_NFIELDS);
		e.f[PHYSICAL_BYTES] = bytes[i];
		CHECK_EQ(analysis_add(&a, &e), 0);
	}
	e = ev(MT_TYPE_MAX, 1, 0); /* a type from a newer writer */
	CHECK_EQ(analysis_add(&a, &e), 0);
	e = ev(0, 1, 0);
	CHECK_EQ(analysis_add(&a, &e), 0);
	analysis_finish(&a);
	CHECK(a.has_physical);
	CHECK_U64(a.physical_bytes, 8192);
	CHECK_U64(a.peak_physical_bytes, 65536);
	CHECK_U64(a.unknown_events, 2);
	CHECK_U64(a.events[MT_PHYSICAL], 3);
	CHECK_EQ(a.nprocs, 0); /* physical records are tree-wide */
	analysis_release(&a);
}

/* Enough live blocks to make the table grow, all found again. */
static void test_many_live_blocks(void)
{
	struct analysis a;
	const uint64_t n = 50000;

	analysis_init(&a);
	for (uint64_t i = 0; i < n; i++)
		add_alloc(&a, MT_MALLOC, 40 + (uint32_t)(i % 3), 0x100000 + 16 * i, 16);
	for (uint64_t i = 0; i < n; i += 2)
		add_free(&a, 40 + (uint32_t)(i % 3), 0x100000 + 16 * i);
	analysis_finish(&a);
	CHECK_U64(a.peak_live_bytes, 16 * n);
	CHECK_U64(a.leaked_count, n / 2);
	CHECK_U64(a.leaked_bytes, 16 * (n / 2));
	analysis_release(&a);
}

int main(void)
{
	RUN(test_heap_totals_and_peak);
	RUN(test_realloc_moves);
	RUN(test_leaks_at_exit_and_exec);
	RUN(test_threads_and_fork_command);
	RUN(test_rss_peaks);
	RUN(test_physical_and_unknown);
	RUN(test_many_live_blocks);
	HARNESS_EXIT();
}
