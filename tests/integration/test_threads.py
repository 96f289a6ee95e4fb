# SPDX-License-Identifier: MIT
"""Four threads allocating at once: every record carries its thread's tid."""
from mtlib import (check_eq, count, fixture, of_type, root_pid, track,
                   ts_window)

NTHREADS = 4
COUNT = 500


def test_threads_per_thread_counts_and_tids(tmp):
    t = track(tmp, [fixture("threads")])
    tids = {}
    for line in t.stdout.splitlines():
        _, i, tid = line.split()
        tids[int(i)] = int(tid)
    check_eq(sorted(tids), list(range(NTHREADS)), "thread indexes the fixture printed")
    pid = root_pid(t.events)
    win = ts_window(t.events, [pid], pid)

    # the 4 clone records: thread flag (1) and shared vm (2), child = tid
    clones = [e for e in of_type(win, "fork") if e["flags"] & 1]
    check_eq(sorted((e["parent"], e["child"], e["flags"]) for e in clones),
             sorted((pid, tid, 3) for tid in tids.values()),
             "thread records (parent, child tid, flags)")

    for i, tid in sorted(tids.items()):
        size = 2000 + i
        mine = [e for e in win if e["tid"] == tid]
        mallocs = of_type(mine, "malloc")
        check_eq(len(mallocs), COUNT, "mallocs of thread %d (tid %d)" % (i, tid))
        check_eq(sorted({e["size"] for e in mallocs}), [size],
                 "sizes the mallocs of thread %d record" % i)
        # every malloc of this size in the whole window is this thread's
        check_eq(count(win, type="malloc", size=size), COUNT,
                 "mallocs of %d bytes in the window (any thread)" % size)
        addrs = {e["addr"] for e in mallocs}
        check_eq(len(addrs), COUNT, "distinct addresses of thread %d" % i)
        # the thread frees exactly its own blocks (glibc may free its tcache
        # at thread exit too: that block is not one of these)
        freed = [e["addr"] for e in of_type(mine, "free") if e["addr"] in addrs]
        check_eq(sorted(freed), sorted(addrs), "frees of thread %d's blocks" % i)
        # another thread frees one of these addresses only after it got the
        # block itself (glibc hands an exited thread's arena to the next)
        others = [e for e in win if e["tid"] != tid and e.get("addr") in addrs]
        own = {(m["tid"], m["addr"]) for m in of_type(others, "malloc")}
        foreign = [e["addr"] for e in of_type(others, "free")
                   if (e["tid"], e["addr"]) not in own]
        check_eq(foreign, [], "frees of thread %d's blocks by a thread that did not allocate them" % i)
        check_eq({e["pid"] for e in mine}, {pid}, "pid of thread %d's records" % i)
