# SPDX-License-Identifier: MIT
"""Only the tracked tree is recorded: not a process running the same binary
outside it, and not the tree of another memtrack session."""
import os
import subprocess
from pathlib import Path

from mtlib import (MEMTRACK, check_eq, check_true, count, finish, fixture, of_type,
                   report_json, require_eq, root_pid, spawn_track, track, tree_pids, window)


def tree_of(evs):
    """The root and every process a fork record of the tree created."""
    tree = {root_pid(evs)}
    for e in sorted(of_type(evs, "fork"), key=lambda e: e["ts"]):
        if e["parent"] in tree and not e["flags"] & 1:
            tree.add(e["child"])
    return tree


def spinner_window_count(evs):
    """(pid, number of malloc(5001) in its window) of the spinner process."""
    sp = [e["pid"] for e in of_type(evs, "exec") if e["path"] == fixture("spinner")]
    require_eq(len(sp), 1, "exec records of the spinner")
    win = window(evs, sp[0])
    return sp[0], (count(win, type="malloc", size=5001), count(win, type="free"))


def test_untracked_process_not_recorded(tmp):
    outsider = subprocess.Popen([fixture("spinner"), "forever"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        require_eq(outsider.stdout.readline(), "ready\n", "the untracked spinner started")
        t = track(tmp, [fixture("spinner"), "20000"])
        check_eq(outsider.poll(), None, "the untracked spinner still ran at the end")
    finally:
        outsider.kill()
        outsider.wait()
    evs = t.events
    root = root_pid(evs)
    pids = set(tree_pids(evs))
    check_eq(outsider.pid in pids, False, "untracked pid %d in the artifact" % outsider.pid)
    check_eq(sorted(pids), [root], "pids in the artifact")
    check_eq(spinner_window_count(evs), (root, (20000, 20000)),
             "(spinner pid, (mallocs, frees) in its window)")
    check_eq(count(evs, type="malloc", size=5001), 20000, "malloc(5001) records in the artifact")


def test_two_sessions_at_once(tmp):
    """Two memtrack sessions whose commands meet at a FIFO rendezvous (so both
    trees are alive at once) and then allocate at the same time."""
    ab, ba = str(tmp / "ab"), str(tmp / "ba")
    os.mkfifo(ab)
    os.mkfifo(ba)
    sp = fixture("spinner")
    cmd_a = "echo a > %s && read x < %s && %s 20000" % (ab, ba, sp)
    cmd_b = "read x < %s && echo b > %s && %s 30000" % (ab, ba, sp)
    pa, art_a = spawn_track(tmp, cmd_a, name="a.mtrk")
    pb, art_b = spawn_track(tmp, cmd_b, name="b.mtrk")
    ra, rb = finish(pa, timeout=30), finish(pb, timeout=30)
    require_eq((ra.rc, rb.rc), (0, 0), "exit statuses of the two sessions:\n%s\n%s"
               % (ra.describe(), rb.describe()))
    ea, eb = art_a.events, art_b.events
    ta, tb = tree_of(ea), tree_of(eb)
    check_eq(ta & tb, set(), "pids in both trees")
    check_eq(set(tree_pids(ea)) - ta, set(), "pids in a.mtrk outside its tree")
    check_eq(set(tree_pids(eb)) - tb, set(), "pids in b.mtrk outside its tree")
    check_eq(spinner_window_count(ea)[1], (20000, 20000), "session a: (mallocs, frees)")
    check_eq(spinner_window_count(eb)[1], (30000, 30000), "session b: (mallocs, frees)")
    check_eq(count(ea, type="malloc", size=5001), 20000, "session a: malloc(5001) records")
    check_eq(count(eb, type="malloc", size=5001), 30000, "session b: malloc(5001) records")
    # the two trees overlapped in time: each root exec'd before the other's
    # root exited
    start = lambda evs: of_type(evs, "exec")[0]["ts"]
    end = lambda evs: max(e["ts"] for e in of_type(evs, "exit"))
    check_true(start(ea) < end(eb) and start(eb) < end(ea), "the two sessions overlapped")


def test_nested_session_leaves_workload_to_inner(tmp):
    """memtrack tracking memtrack: the outer session records the inner
    memtrack process itself, the inner one records the workload, exactly
    (were both to park the workload, either SIGCONT could resume it before
    the other session had attached its probes)."""
    n = 20000
    inner = Path(tmp) / "inner.mtrk"
    t = track(tmp, [MEMTRACK, "track", "-q", "-o", inner, "--", fixture("alloc_pairs"), n],
              name="outer.mtrk")
    outer_cmds = sorted(p["command"] for p in t.report["processes"])
    check_eq(outer_cmds, ["memtrack"], "processes the outer session recorded")
    r = report_json(inner)
    # n pairs plus the two marker blocks
    check_eq(r["events_by_type"]["malloc"], n + 2, "mallocs the inner session recorded")
    check_eq(r["events_by_type"]["free"], n + 2, "frees the inner session recorded")
    check_eq(r["dropped_events"], 0, "inner dropped events")
