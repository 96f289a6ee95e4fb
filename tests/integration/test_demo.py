# SPDX-License-Identifier: MIT
"""`make demo`: track the demo fixture, then report on it."""
from mtlib import (MEMTRACK, Artifact, check_eq, check_true, fixture, heap, of_type,
                   proj, root_pid, run, window)


def test_demo_report(tmp):
    # what `make demo` runs (without -q: the summary line is part of it)
    out = tmp / "demo.mtrk"
    p = run([MEMTRACK, "track", "-o", out, "--", fixture("demo")])
    check_eq(p.rc, 0, "memtrack track exit status (stderr %r)" % p.stderr)
    check_true(p.stderr.startswith("memtrack: wrote %s: " % out), "summary line: %r" % p.stderr)
    r = run([MEMTRACK, "report", out])
    check_eq((r.rc, r.stderr), (0, ""), "report (rc, stderr)")
    for line in ("command:      %s" % fixture("demo"),
                 "leaked:       1 allocation, 1000 B never freed",
                 "dropped:      0 events",
                 "processes:    2, by peak RSS"):
        check_true(line in r.stdout.splitlines(), "report line %r in:\n%s" % (line, r.stdout))

    art = Artifact(out)
    evs = art.events
    root = root_pid(evs)
    win = window(evs, root)
    hp = [proj(e) for e in heap(win)]
    words = [e for e in hp if e["type"] == "malloc"]
    check_eq([e["size"] for e in words], list(range(32, 96)), "the 64 word mallocs' sizes")
    addrs = [e["addr"] for e in words]
    moved = [e for e in hp if e["type"] == "realloc"]
    check_eq([(e["old_addr"], e["size"]) for e in moved], [(addrs[0], 4096)] if addrs else [],
             "realloc of words[0] (old_addr, size)")
    check_eq([(e["type"], e["size"]) for e in hp if e["type"] == "calloc"], [("calloc", 1000)],
             "the leaked calloc")
    check_eq(len([e for e in hp if e["type"] == "free"]), 64, "frees in the window")
    check_eq([(e["len"]) for e in of_type(win, "munmap")], [1 << 20], "munmap of the 1 MiB map")
    forks = of_type(win, "fork")
    check_eq(len(forks), 1, "fork records in the window")
    if forks:
        child = forks[0]["child"]
        check_eq([(e["type"], e["size"]) for e in heap(evs)
                  if e["pid"] == child and e["type"] != "free"], [("malloc", 12345)],
                 "the child's allocations")
    rep = art.report
    check_eq((rep["leaked_count"], rep["leaked_bytes"], rep["dropped_events"], rep["truncated"]),
             (1, 1000, 0, False), "report --json (leaked_count, leaked_bytes, dropped, truncated)")
    check_eq(sorted((q["command"], q.get("exit_code")) for q in rep["processes"]),
             [("demo", 0), ("demo", 0)], "report --json processes (command, exit_code)")
    # per-process heap peaks: the child's one block; for the parent, the end
    # marker's block (987653) while the leaked calloc (1000) is live
    peaks = sorted(q["peak_heap_bytes"] for q in rep["processes"])
    check_eq(peaks, [12345, 987653 + 1000], "report --json processes[].peak_heap_bytes")
