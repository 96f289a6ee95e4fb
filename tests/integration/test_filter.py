# SPDX-License-Identifier: MIT
"""--pid PID and --comm NAME on every reading command (filter.h; report's
are tested in test_report_top.py): flamegraph, export (csv, perfetto,
pprof), diff, dump and top read only the records of the processes asked for.

The run: sh -c "sitediff 2 1; sitediff 5 3" (tests/fixtures/sitediff.c), so
the two sitediff processes' numbers are known from their arguments: 13 and
18 allocations; 2 and 5 blocks of 3072 held at the peak; 1 and 3 leaks of
111 bytes; 10 x 520 each, freed at once.  The shell's own allocations are
what the filters must leave out."""
import csv
import io
import json

from mtlib import MEMTRACK, check_eq, check_true, fixture, run, shared_track
from callsites import memtrack, own_cache
from test_diff_top import runs as sitediff_runs
from test_pprof import decode


def tracked():
    cmd = "%s 2 1; %s 5 3" % (fixture("sitediff"), fixture("sitediff"))
    # a small fixed environment: with a large one (make test's, ~50 names)
    # dash's forked child mallocs its exec's envp (728 bytes) before the
    # exec, an allocation of the process that becomes sitediff
    t = shared_track("sh-sitediff", ["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", cmd])
    procs = json.loads(memtrack("report", t.artifact.path, "--json").stdout)["processes"]
    check_eq([(p["command"], p["alloc_count"]) for p in procs][1:], [("sitediff", 13), ("sitediff", 18)],
             "the run's sitediff processes")
    check_true(procs[0]["command"] == "sh" and procs[0]["alloc_count"] > 0,
               "the shell allocates too: %s" % procs[0])
    return t.artifact.path, procs[0]["pid"], procs[1]["pid"], procs[2]["pid"]


def folded(path, *args):
    """flamegraph --folded: {leaf function: value}."""
    out = memtrack("flamegraph", path, "--folded", *args).stdout
    leaves = {}
    for line in out.splitlines():
        stack, value = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        leaves[leaf] = leaves.get(leaf, 0) + int(value)
    return leaves


def test_flamegraph_filter(tmp):
    own_cache(tmp)
    path, sh, first, second = tracked()
    check_eq(folded(path, "--metric", "allocations", "--comm", "sitediff"),
             {"grow": 7, "steady": 20, "leak": 4}, "--comm sitediff: both runs' sites, nothing of sh")
    check_eq(folded(path, "--metric", "allocations", "--pid", second),
             {"grow": 5, "steady": 10, "leak": 3}, "--pid: the second sitediff alone")
    check_eq(folded(path, "--metric", "leaked", "--pid", first, "--pid", second), {"leak": 444},
             "two --pid: both leaks")
    shell = folded(path, "--metric", "allocations", "--comm", "sh")
    check_true(not {"grow", "steady", "leak"} & set(shell) and sum(shell.values()) > 0,
               "--comm sh: the shell's sites only: %s" % shell)


def test_export_filter(tmp):
    own_cache(tmp)
    path, sh, first, second = tracked()
    rows = list(csv.DictReader(io.StringIO(
        memtrack("export", "--format=csv", path, "-o", "-", "--pid", second).stdout)))
    check_eq(sorted({r["pid"] for r in rows}), [str(second)], "csv --pid: its rows only")
    check_eq(sum(r["event"] == "malloc" for r in rows), 18, "csv --pid: its 18 mallocs")
    check_eq(max(int(r["tree_heap_bytes"]) for r in rows), 5 * 3072, "csv --pid: the tree is that process")
    doc = json.loads(memtrack("export", "--format=perfetto", path, "-o", "-", "--comm", "sitediff").stdout)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    check_eq(sorted({e["pid"] for e in events if "pid" in e}), sorted([first, second]),
             "perfetto --comm: the two sitediff processes")
    out = tmp / "p.pb.gz"
    memtrack("export", "--format=pprof", path, "-o", out, "--pid", first)
    types, samples, locs, maps, default = decode(out)
    heap = sorted((fns[0], vals[:4]) for vals, fns, _ in samples if vals[0])
    check_eq(heap, [("grow", [2, 6144, 6144, 0]), ("leak", [1, 111, 0, 111]), ("steady", [10, 5200, 0, 0])],
             "pprof --pid: the first sitediff's sites (alloc_objects, alloc_space, inuse_space, leaked)")


def test_diff_filter(tmp):
    """The base run alone against the two-run shell with --comm sitediff:
    the same filter reads both files."""
    own_cache(tmp)
    path, sh, first, second = tracked()
    base, _ = sitediff_runs()
    d = json.loads(memtrack("diff", base, path, "--json", "--comm", "sitediff").stdout)
    m = d["metrics"]
    check_eq((m["alloc_count"]["base"], m["alloc_count"]["new"]), (13, 31), "alloc_count: sh left out")
    check_eq((m["peak_heap_bytes"]["base"], m["peak_heap_bytes"]["new"]), (6144, 15360), "peak heap")
    check_eq((m["leaked_bytes"]["base"], m["leaked_bytes"]["new"]), (111, 444), "leaked")
    check_eq([(p["command"], p["base_pid"] is not None, p["new_pid"]) for p in d["processes"]],
             [("sitediff", True, first), ("sitediff", False, second)], "processes: no sh")
    t = json.loads(memtrack("diff", base, path, "--json", "--comm", "sitediff", "--top", 5).stdout)
    check_eq([(r["name"], r["metrics"]["allocations"]["base"], r["metrics"]["allocations"]["new"])
              for r in t["top"]["allocations"]], [("steady", 10, 20), ("grow", 2, 7), ("leak", 1, 4)],
             "--top: the functions' allocations, nothing of sh")
    # leak's leaked: 111 -> 444, +300%
    memtrack("diff", base, path, "--comm", "sitediff", "--metric", "function:leaked", "--fail-above", "299", rc=1)
    memtrack("diff", base, path, "--comm", "sitediff", "--metric", "function:leaked", "--fail-above", "300", rc=0)


def test_dump_filter(tmp):
    path, sh, first, second = tracked()
    lines = [json.loads(l) for l in memtrack("dump", path, "--pid", second).stdout.splitlines()]
    about = [r for r in lines if r["type"] not in ("object", "mapping", "stack", "fork")]
    check_eq(sorted({r["pid"] for r in about}), [second], "dump --pid: its records (and the shared ones)")
    check_eq([(r["pid"], r["child"]) for r in lines if r["type"] == "fork"], [(sh, second)],
             "the fork that made it is the child's record")
    check_eq(sum(r["type"] == "malloc" for r in lines), 18, "dump --pid: its 18 mallocs")
    comm = [json.loads(l) for l in memtrack("dump", path, "--comm", "sitediff").stdout.splitlines()]
    check_eq(sum(r["type"] == "malloc" for r in comm), 31, "dump --comm: 13 + 18 mallocs")
    p = memtrack("dump", path, "--comm", "nope")
    check_true(p.stderr.startswith("memtrack: warning: no record of") and p.stderr.count("\n") == 1,
               "a filter that matches nothing says so: %r" % p.stderr)
    check_eq({json.loads(l)["type"] for l in p.stdout.splitlines()} <= {"object", "mapping", "stack"}, True,
             "and prints only the records about no process")
    for args, msg in ((["--pid"], "--pid needs a value"), (["--bogus"], "unknown option '--bogus'"),
                      ([path], "one artifact at a time")):
        p = run([MEMTRACK, "dump", path] + args)
        check_true(p.rc == 2 and msg in p.stderr and p.stderr.count("\n") == 1, "%s: %r" % (args, p.stderr))


def test_top_filter(tmp):
    """top (stdout not a terminal: logfmt lines) of the finished file: its last line is that of
    the processes asked for."""
    path, sh, first, second = tracked()

    def last(*args):
        p = memtrack("top", path, *args)
        return dict(kv.split("=", 1) for kv in p.stdout.splitlines()[-1].split())

    v = last("--comm", "sitediff")
    check_eq((v["processes"], v["peak_heap_bytes"], v["leaked_bytes"], v["complete"]), ("2", "15360", "444", "1"),
             "top --comm sitediff")
    v = last("--pid", first)
    check_eq((v["processes"], v["peak_heap_bytes"], v["leaked_bytes"], v["busiest_pid"]),
             ("1", "6144", "111", str(first)), "top --pid")
