# SPDX-License-Identifier: MIT
"""The process tree: fork/exec/exit records, the shell form, a double-forking
daemon, exit codes and signals, and the state the command starts in."""
import signal
import subprocess

import pytest

from mtlib import (MEMTRACK, check_eq, check_true, fixture, heap, markers, of_type,
                   parse_dump, proj, require, require_eq, root_pid, run, signal_state, track,
                   track_argv, tree_pids, window)


def exec_child_window(evs, pid, k):
    """Checks the marker window of exec_child K in process pid."""
    win = [proj(e) for e in heap(window(evs, pid))]
    mallocs = [e for e in win if e["type"] == "malloc"]
    addrs = [e["addr"] for e in mallocs]
    calloc = [e for e in win if e["type"] == "calloc"]
    caddr = calloc[0]["addr"] if calloc else None
    expected = ([{"type": "malloc", "addr": a, "size": 3000 + k} for a in addrs]
                + [{"type": "free", "addr": a} for a in addrs]
                + [{"type": "calloc", "addr": caddr, "size": (k + 1) * 11},
                   {"type": "free", "addr": caddr}])
    check_eq(len(mallocs), k + 1, "mallocs of exec_child %d (pid %d)" % (k, pid))
    check_eq(win, expected, "heap records of exec_child %d (pid %d)" % (k, pid))


def exits_of(evs):
    """pid -> (code, signal) of its exit record; each pid must exit once."""
    d = {}
    for e in of_type(evs, "exit"):
        check_true(e["pid"] not in d, "one exit record for pid %d" % e["pid"])
        d[e["pid"]] = (e["code"], e["signal"])
    return d


def test_fork_then_exec(tmp):
    child_path = fixture("exec_child")
    t = track(tmp, [fixture("forkexec"), child_path, "4"])
    evs = t.events
    root = root_pid(evs)
    words = t.stdout.split()           # child PID status STATUS
    require_eq(words[0::2], ["child", "status"], "fixture output %r" % t.stdout)
    child = int(words[1])
    check_eq(int(words[3]), 4, "exit status the parent saw")

    forks = [proj(e, ("ts",)) for e in of_type(evs, "fork")]
    check_eq(forks, [{"type": "fork", "pid": root, "tid": root, "parent": root,
                      "child": child, "flags": 0}], "fork records")
    execs = [proj(e, ("ts",)) for e in of_type(evs, "exec")]
    check_eq(execs[1:], [{"type": "exec", "pid": child, "tid": child, "old_pid": child,
                          "path": child_path}], "exec records after the root's")
    check_eq(execs[0]["path"], fixture("forkexec"), "path of the root's exec record")
    check_eq(exits_of(evs), {child: (4, 0), root: (0, 0)}, "exit records {pid: (code, signal)}")
    # the exec'd child's allocations carry the child's pid
    exec_child_window(evs, child, 4)
    check_eq(tree_pids(evs), sorted({root, child}), "pids in the artifact")
    # ordering: fork, then the child's exec, its allocations, its exit
    ts = {(e["type"], e["pid"]): e["ts"] for e in evs if e["type"] in ("fork", "exec", "exit")}
    check_true(ts[("fork", root)] < ts[("exec", child)] < ts[("exit", child)]
               < ts[("exit", root)], "fork < child exec < child exit < root exit")


def test_shell_form_chain(tmp):
    """memtrack track -o F "A 1; A 2 | A 3" runs through /bin/sh -c."""
    a = fixture("exec_child")
    t = track(tmp, "%s 1; %s 2 | %s 3" % (a, a, a), expect_rc=3)
    evs = t.events
    root = root_pid(evs)
    execs = of_type(evs, "exec")
    check_eq(execs[0]["path"], "/bin/sh", "the root runs /bin/sh")
    kids = [e for e in execs if e["path"] == a]
    check_eq(len(kids), 3, "exec records of %s" % a)
    require(len({e["pid"] for e in kids}) == 3, "three distinct processes exec'd the fixture")
    exits = exits_of(evs)
    forks = [e for e in of_type(evs, "fork") if not e["flags"] & 1]
    ks = []
    for e in kids:
        pid = e["pid"]
        # the shell forked (or vforked: flags 2) each of them
        check_eq([(f["parent"], f["flags"] & 1) for f in forks if f["child"] == pid],
                 [(root, 0)], "fork records of child %d (parent, thread flag)" % pid)
        mallocs = [m for m in window(evs, pid) if m["type"] == "malloc"]
        k = mallocs[0]["size"] - 3000 if mallocs else -1
        ks.append(k)
        exec_child_window(evs, pid, k)
        check_eq(exits.get(pid), (k, 0), "exit record (code, signal) of exec_child %d" % k)
    check_eq(sorted(ks), [1, 2, 3], "the K of the three children")
    check_eq(exits.get(root), (3, 0), "exit record of the shell")
    check_eq(t.report["exit_code"], 3, "report --json exit_code")


def test_double_fork_daemon(tmp):
    t = track(tmp, [fixture("daemon")])
    evs = t.events
    root = root_pid(evs)
    forks = [e for e in of_type(evs, "fork") if not e["flags"] & 1]
    require_eq([(e["parent"], e["flags"]) for e in forks][:1], [(root, 0)],
               "first fork record: the root forks")
    child = forks[0]["child"]
    gc = [e["child"] for e in forks if e["parent"] == child]
    require_eq(len(gc), 1, "fork records of the child (the grandchild)")
    gc = gc[0]
    check_eq(len(forks), 2, "fork records")
    exits = exits_of(evs)
    check_eq(exits, {root: (0, 0), child: (0, 0), gc: (5, 0)}, "exit records {pid: (code, signal)}")
    ex = {e["pid"]: e["ts"] for e in of_type(evs, "exit")}
    heap_recs = [proj(e) for e in heap(window(evs, gc))]
    addrs = [e["addr"] for e in heap_recs if e["type"] == "malloc"]
    check_eq(len(addrs), 4, "grandchild's mallocs between its markers")
    check_eq(heap_recs, [{"type": "malloc", "addr": a, "size": 6007} for a in addrs]
             + [{"type": "free", "addr": a} for a in addrs], "grandchild's heap records")
    # it allocated after both its parent and the root had exited (the
    # fixture waits for that), and memtrack kept recording until it exited
    begin, _ = markers(evs, gc)
    require(root in ex and child in ex and gc in ex, "exit records of all three")
    check_true(ex[child] < begin["ts"] and ex[root] < begin["ts"],
               "grandchild allocated after the child and the root exited")
    check_true(ex[gc] > ex[root], "grandchild exited after the root")
    procs = {p["pid"]: p for p in t.report["processes"]}
    check_eq(procs.get(gc, {}).get("exit_code"), 5, "report --json: grandchild's exit_code")
    check_eq(procs.get(gc, {}).get("ppid"), child, "report --json: grandchild's ppid")
    check_eq(t.report["exit_code"], 0, "report --json exit_code (the root's)")


def test_exit_code_propagates(tmp):
    t = track(tmp, [fixture("exit_code"), "3"], expect_rc=3)
    root = root_pid(t.events)
    check_eq(exits_of(t.events), {root: (3, 0)}, "exit records {pid: (code, signal)}")
    check_eq((t.report["exit_code"], t.report["exit_signal"]), (3, 0),
             "report --json (exit_code, exit_signal)")


def test_killed_by_sigkill(tmp):
    t = track(tmp, [fixture("exit_code"), "kill"], expect_rc=137)
    root = root_pid(t.events)
    # a signal death: code -1, signal 9
    check_eq(exits_of(t.events), {root: (-1, 9)}, "exit records {pid: (code, signal)}")
    check_eq((t.report["exit_code"], t.report["exit_signal"]), (-1, 9),
             "report --json (exit_code, exit_signal)")


def _sigmask_output(argv, ignored):
    p = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       stdin=subprocess.DEVNULL, preexec_fn=signal_state(ignored), timeout=60)
    require_eq(p.returncode, 0, "%s: exit status (stderr: %s)" % (argv, p.stderr))
    return p.stdout


def test_command_starts_with_clean_signal_state(tmp):
    """The command must start with the signal mask and dispositions it would
    have without memtrack: from a clean state nothing blocked, nothing
    ignored (memtrack's own blocking of SIGINT/SIGTERM/SIGHUP/SIGCHLD must
    not leak into it, or the signals memtrack forwards never arrive); under
    nohup or in a background job, the signals ignored there ignored still
    (issue 35: memtrack's handlers made them default in the command, so
    nohup memtrack track -- CMD ended CMD at a hangup).  The test sets the
    state up itself: it passes under nohup, in a background job and in CI."""
    plain = fixture("sigmask")
    for ignored, want in (((), "blocked\nignored\n"),
                          ((signal.SIGHUP,), "blocked\nignored 1\n"),
                          ((signal.SIGINT, signal.SIGQUIT), "blocked\nignored 2 3\n")):
        direct = _sigmask_output([plain], ignored)
        check_eq(direct, want, "the fixture run directly, %s ignored" % (list(ignored) or "nothing"))
        tracked = _sigmask_output(track_argv([plain], tmp / "sig.mtrk"), ignored)
        check_eq(tracked, direct, "the fixture under memtrack, %s ignored (blocked/ignored signal numbers)"
                 % (list(ignored) or "nothing"))


def test_exit_code_above_127(tmp):
    t = track(tmp, [fixture("exit_code"), "200"], expect_rc=200)
    check_eq(exits_of(t.events), {root_pid(t.events): (200, 0)},
             "exit records {pid: (code, signal)}")


def test_exec_from_a_thread(tmp):
    """A non-leader thread execs exec_child 6: the kernel gives it the
    process's pid; the new program's allocations must be recorded like any
    other exec'd program's."""
    child_path = fixture("exec_child")
    t = track(tmp, [fixture("thread_exec"), child_path, "6"], expect_rc=6)
    evs = t.events
    root = root_pid(evs)
    words = t.stdout.split()
    require_eq(words[:1], ["tid"], "fixture output %r" % t.stdout)
    tid = int(words[1])
    execs = [proj(e, ("ts",)) for e in of_type(evs, "exec")]
    check_eq(execs[1:], [{"type": "exec", "pid": root, "tid": root, "old_pid": tid,
                          "path": child_path}], "exec records after the root's")
    check_eq(exits_of(evs), {root: (6, 0)}, "exit records {pid: (code, signal)}")
    ex = [e["ts"] for e in of_type(evs, "exec")]
    after = [e for e in heap(evs) if len(ex) > 1 and e["ts"] > ex[1]]
    check_eq(sum(1 for e in after if e["type"] == "malloc" and e["size"] == 3006), 7,
             "mallocs of 3006 bytes by the exec'd program")
    if after:
        exec_child_window(evs, root, 6)


def test_many_children_at_once(tmp):
    """100 forked children alive at once, each parked until its probes are
    attached: every child's malloc, free and exit is recorded."""
    n = 100
    t = track(tmp, [fixture("fork_many"), str(n)])
    check_eq(t.stdout, "ok\n", "fixture output")
    evs = t.events
    root = root_pid(evs)
    kids = [e["child"] for e in of_type(evs, "fork") if e["parent"] == root]
    check_eq(len(kids), n, "fork records of the root")
    check_eq(len(set(kids)), n, "distinct children")
    exits = exits_of(evs)
    seen = []
    for pid in kids:
        recs = [proj(e) for e in heap(evs) if e["pid"] == pid]
        i = recs[0]["size"] - 7000 if recs and recs[0]["type"] == "malloc" else -1
        seen.append(i)
        addr = recs[0]["addr"] if recs else None
        check_eq(recs, [{"type": "malloc", "addr": addr, "size": 7000 + i},
                        {"type": "free", "addr": addr}], "heap records of child %d" % pid)
        check_eq(exits.get(pid), (i, 0), "exit record of child %d (code, signal)" % pid)
    check_eq(sorted(seen), list(range(n)), "the children's indexes (from their malloc sizes)")
    check_eq(exits.get(root), (0, 0), "exit record of the root")


@pytest.mark.parametrize("path", ["in-process", "uprobes"])
def test_records_of_a_process_precede_its_exit(tmp, path):
    """In the artifact, no record of a process comes after its exit record,
    and one thread's records stay in time order across frames (README: the
    poller merges its sources by timestamp); the report then counts no leak
    for a program that frees everything.  spinner 8000 makes enough records
    that the ring is still being drained when the exit record arrives; 4 KiB
    frames put a frame boundary every ~100 records.  In-process, the heap
    records come from the library's ring and the mmap/rss ones from BPF:
    before the merge, a boundary between them sent the thread back in time
    by ~200 us."""
    opts = ["--batch-size", "4K"] + (["--no-fast"] if path == "uprobes" else [])
    t = track(tmp, [fixture("spinner"), "8000"], opts=opts)
    check_eq([p["heap_path"] for p in t.report["processes"]], [path], "heap_path")
    raw = parse_dump(run([MEMTRACK, "dump", t.artifact.path]).stdout, sort=False)
    root = root_pid(raw)
    mine = [e for e in raw if e["pid"] == root and e["tid"] == root]
    exit_at = [i for i, e in enumerate(mine) if e["type"] == "exit"]
    check_eq(exit_at, [len(mine) - 1], "position of the exit record among the root's %d "
             "records (file order)" % len(mine))
    backwards = [(i, mine[i]["type"], mine[i + 1]["type"], mine[i]["ts"] - mine[i + 1]["ts"])
                 for i in range(len(mine) - 1) if mine[i + 1]["ts"] < mine[i]["ts"]]
    check_eq(backwards[:5], [], "places where the root's records go back in time "
             "(index, type, next type, ns back)")
    rep = t.report
    check_eq((rep["leaked_count"], rep["leaked_bytes"]), (0, 0),
             "report --json (leaked_count, leaked_bytes): spinner frees every block")
    check_eq((rep["alloc_count"], rep["free_count"]), (8002, 8002),
             "report --json (alloc_count, free_count)")
