// SPDX-License-Identifier: MIT
/*
 * test_filter.c - `--pid` and `--comm` (filter.c) on synthetic records:
 * which are kept, and the analysis of the kept ones.
 */
#include <errno.h>
#include <string.h>
#include "analyze/filter.h"
#include "harness.h"
#include "synth.h"

static int keep(struct proc_filter *f, uint16_t type, uint32_t pid, uint64_t f0, uint64_t f1,
		const char *str)
{
	struct mt_event ev;

	memset(&ev.h, 0, sizeof(ev.h));
	ev.h.type = type;
	ev.h.pid = ev.h.tid = pid;
	ev.h.nfields = 3;
	ev.f[0] = f0;
	ev.f[1] = f1;
	ev.f[2] = 0;
	snprintf(ev.str, sizeof(ev.str), "%s", str ? str : "");
	return proc_filter_keep(f, &ev);
}

/* --pid 11: its records and the fork that made it; not its parent's, not a grandchild's. */
static void test_pid(void)
{
	struct proc_filter f;

	proc_filter_init(&f);
	CHECK(!proc_filter_active(&f));
	CHECK_EQ(keep(&f, MT_MALLOC, 10, 0x10, 5, NULL), 1); /* no filter: everything */
	CHECK_EQ(proc_filter_add_pid(&f, "11"), 0);
	CHECK_EQ(proc_filter_add_pid(&f, "0"), -EINVAL);
	CHECK_EQ(proc_filter_add_pid(&f, "-3"), -EINVAL);
	CHECK_EQ(proc_filter_add_pid(&f, "12x"), -EINVAL);
	CHECK_EQ(keep(&f, MT_MALLOC, 10, 0x10, 5, NULL), 0);
	CHECK_EQ(keep(&f, MT_FORK, 10, 10, 11, NULL), 1); /* about the child */
	CHECK_EQ(keep(&f, MT_MALLOC, 11, 0x20, 5, NULL), 1);
	CHECK_EQ(keep(&f, MT_FORK, 11, 11, 12, NULL), 0);
	CHECK_EQ(keep(&f, MT_MALLOC, 12, 0x30, 5, NULL), 0);
	CHECK_EQ(keep(&f, MT_STACK, 0, 0, 0, NULL), 1); /* vocabulary: always */
	CHECK_EQ(keep(&f, MT_MARK, 10, 0, 0, "m"), 1);
	CHECK_U64(f.kept, 2);
	CHECK_U64(f.dropped, 3);
	proc_filter_release(&f);
}

/*
 * --comm python3: bash 10 forks 11 (bash until its exec), which execs
 * /usr/bin/python3 and forks 12 (python3 by inheritance).
 */
static void test_comm(void)
{
	struct proc_filter f;
	char buf[64];

	proc_filter_init(&f);
	CHECK_EQ(proc_filter_add_comm(&f, "python3"), 0);
	CHECK_EQ(proc_filter_add_comm(&f, "a/b"), -EINVAL);
	CHECK_EQ(proc_filter_add_comm(&f, ""), -EINVAL);
	CHECK_EQ(keep(&f, MT_EXEC, 10, 10, 0, "/bin/bash"), 0);
	CHECK_EQ(keep(&f, MT_MALLOC, 10, 0x10, 5, NULL), 0);
	CHECK_EQ(keep(&f, MT_FORK, 10, 10, 11, NULL), 0);
	CHECK_EQ(keep(&f, MT_MALLOC, 11, 0x10, 5, NULL), 0); /* bash still */
	CHECK_EQ(keep(&f, MT_EXEC, 11, 11, 0, "/usr/bin/python3"), 1);
	CHECK_EQ(keep(&f, MT_MALLOC, 11, 0x20, 5, NULL), 1);
	CHECK_EQ(keep(&f, MT_FORK, 11, 11, 12, NULL), 1);
	CHECK_EQ(keep(&f, MT_MALLOC, 12, 0x30, 5, NULL), 1);
	CHECK_EQ(keep(&f, MT_MALLOC, 10, 0x40, 5, NULL), 0);
	CHECK_STR(proc_filter_describe(&f, buf, sizeof(buf)), "--comm python3");
	CHECK_EQ(proc_filter_add_pid(&f, "10"), 0);
	CHECK_EQ(keep(&f, MT_MALLOC, 10, 0x50, 5, NULL), 1); /* either one */
	CHECK_STR(proc_filter_describe(&f, buf, sizeof(buf)), "--pid 10 --comm python3");
	proc_filter_release(&f);
}

/* diff's second file: the same options, none of the first file's processes. */
static void test_init_like(void)
{
	struct proc_filter f, g;
	char buf[64];

	proc_filter_init(&f);
	CHECK_EQ(proc_filter_add_pid(&f, "12"), 0);
	CHECK_EQ(proc_filter_add_comm(&f, "python3"), 0);
	CHECK_EQ(keep(&f, MT_EXEC, 20, 20, 0, "/usr/bin/python3"), 1);
	proc_filter_init_like(&g, &f);
	CHECK_STR(proc_filter_describe(&g, buf, sizeof(buf)), "--pid 12 --comm python3");
	CHECK(g.nprocs == 0 && g.kept == 0 && g.procs == NULL);
	CHECK_EQ(keep(&g, MT_MALLOC, 20, 0x10, 5, NULL),
		 0); /* pid 20 runs python3 in f's file only */
	CHECK_EQ(keep(&g, MT_MALLOC, 12, 0x10, 5, NULL), 1);
	proc_filter_release(&g);
	proc_filter_release(&f);
}

int main(void)
{
	RUN(test_pid);
	RUN(test_comm);
	RUN(test_init_like);
	HARNESS_EXIT();
}
