# SPDX-License-Identifier: MIT
"""`memtrack export`: the Trace Event Format for Perfetto / chrome://tracing
and CSV, from a real run of heap_grow, loaded back and checked."""
import csv
import json

from mtlib import MEMTRACK, check_eq, fixture, require_eq, run, shared_track


def grow():
    t = shared_track("grow_2M", [fixture("heap_grow"), "2000000", "1000"])
    return t, int(t.stdout.split()[0])


def export(tmp, fmt, name):
    t, child = grow()
    out = tmp / name
    p = run([MEMTRACK, "export", "--format=" + fmt, t.artifact.path, "-o", out])
    require_eq((p.rc, p.stderr), (0, "memtrack: wrote %s\n" % out), "export --format=%s (rc, stderr)" % fmt)
    return t, child, out


def test_export_perfetto(tmp):
    t, child, out = export(tmp, "perfetto", "trace.json")
    trace = json.loads(out.read_text())
    evs = trace["traceEvents"]
    parent = [e for e in t.events if e["type"] == "exec"][0]["pid"]
    names = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M"
             and e["name"] == "process_name"}
    check_eq(names, {parent: "heap_grow", child: "heap_grow"}, "process names")
    heap = {}
    for e in evs:
        if e["ph"] == "C" and e["name"] == "heap":
            heap[e["pid"]] = max(heap.get(e["pid"], 0), e["args"]["bytes"])
    check_eq(heap, {parent: 2000000, child: 1000000}, "heap counter track maxima per process")
    rss = [e for e in evs if e["ph"] == "C" and e["name"] == "rss"]
    check_eq(sorted(rss[0]["args"]), ["anon", "file", "shmem"], "rss counter series")
    peak = {}
    for e in rss:
        peak[e["pid"]] = max(peak.get(e["pid"], 0), sum(e["args"].values()))
    rep = {q["pid"]: q["peak_rss_bytes"] for q in t.report["processes"]}
    check_eq(peak, rep, "rss counter maxima == report's peak_rss_bytes per process")
    inst = [(e["name"], e["pid"], e["args"]) for e in evs if e["ph"] == "i"]
    check_eq([i for i in inst if i[0] == "fork"], [("fork", parent, {"child": child})], "fork instant")
    check_eq(sorted((i[1], i[2]["code"]) for i in inst if i[0] == "exit"),
             sorted([(parent, 0), (child, 3)]), "exit instants (pid, code)")
    check_eq([i[2]["path"] for i in inst if i[0] == "exec"], [fixture("heap_grow")], "exec instant path")
    ts = [e["ts"] for e in evs if "ts" in e]
    check_eq(all(0 <= a for a in ts), True, "timestamps are microseconds from start, >= 0")


def test_export_csv(tmp):
    t, child, out = export(tmp, "csv", "series.csv")
    rows = list(csv.DictReader(out.open()))
    check_eq(list(rows[0].keys()), ["time_s", "pid", "command", "event", "heap_bytes",
                                    "rss_anon_bytes", "rss_file_bytes", "rss_shmem_bytes",
                                    "rss_bytes", "tree_heap_bytes", "tree_rss_bytes",
                                    "physical_bytes", "mapped_bytes", "tree_mapped_bytes"],
             "CSV columns")
    heap_rows = [r for r in rows if r["event"] in ("malloc", "calloc", "realloc",
                                                   "aligned_alloc", "free")]
    check_eq(len(heap_rows), sum(1 for e in t.events if e["type"] in
                                 ("malloc", "calloc", "realloc", "aligned_alloc", "free")),
             "one row per heap event")
    check_eq(max(int(r["heap_bytes"]) for r in rows if int(r["pid"]) == child), 1000000,
             "child's heap_bytes maximum")
    check_eq(max(int(r["tree_heap_bytes"]) for r in rows), t.report["peak_heap_bytes"],
             "tree_heap_bytes maximum == report's peak_heap_bytes")
    check_eq(max(int(r["tree_rss_bytes"]) for r in rows), t.report["peak_rss_bytes"],
             "tree_rss_bytes maximum == report's peak_rss_bytes")
    times = [float(r["time_s"]) for r in rows]
    check_eq(times == sorted(times), True, "rows in time order")
    check_eq({r["physical_bytes"] for r in rows}, {""}, "physical_bytes empty (not recorded)")


def test_export_usage_errors(tmp):
    t, _ = grow()
    cases = [
        (["--format=xml", t.artifact.path, "-o", tmp / "x"], "unknown format 'xml'"),
        ([t.artifact.path, "-o", tmp / "x"], "no format"),
        (["--format=csv", t.artifact.path], "no output file (-o OUT)"),
        (["--format=csv", "-o", tmp / "x"], "no artifact given"),
        (["--format=csv", t.artifact.path, "-o"], "-o needs a value"),
    ]
    for args, msg in cases:
        p = run([MEMTRACK, "export"] + args)
        check_eq((p.rc, p.stderr.startswith("memtrack: " + msg), p.stderr.count("\n")),
                 (2, True, 1), "export %s (rc, message, lines): %r" % (args, p.stderr))
    p = run([MEMTRACK, "export", "--format=csv", t.artifact.path, "-o", tmp / "no" / "dir.csv"])
    check_eq((p.rc, "cannot write" in p.stderr), (1, True), "unwritable output: %r" % p.stderr)
