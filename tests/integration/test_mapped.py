# SPDX-License-Identifier: MIT
"""Mapped memory (docs/METRICS.md "Mapped memory"): the program's own
anonymous private mappings counted beside its heap blocks, the allocator's
mappings not, followed to the page through mprotect, munmap, mremap,
MAP_FIXED and brk.  Each run of fixtures/mapped is compared with the same
binary's run of mode `none` on the same path (what ld.so and libc map)."""
import csv
import os
import shutil
import subprocess
import json
import re

import pytest

from mtlib import (MEMTRACK, check_eq, check_true, fixture, of_type, require, root_pid,
                   run, shared_track, track)

MIB = 1024 * 1024
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's (python3 on PATH may be another build)
PG = 4096
PATHS = {"in-process": [], "uprobes": ["--no-fast"]}
KEYS = ("peak_heap_bytes", "peak_mapped_bytes", "peak_memory_bytes", "mapped_count",
        "leaked_mapped_bytes")


def mapped_run(binary, mode, path, opts=()):
    o = PATHS[path] + list(opts)
    return shared_track("mapped-%s-%s-%s-%s" % (binary, mode, path, ",".join(opts)),
                        [fixture(binary), mode], opts=o)


def numbers(t, path=None):
    r = t.report
    if path is not None:
        check_eq([p["heap_path"] for p in r["processes"]], [path], "heap path of the process")
    procs = r["processes"]
    require(len(procs) == 1, "one process, got %d" % len(procs))
    for k in KEYS:
        check_eq(procs[0][k], r[k], "the process's %s is the tree's" % k)
    return {k: r[k] for k in KEYS}


def delta(binary, mode, path, opts=(), expect_path=None):
    """The numbers of @mode's run, and of `none`'s; @expect_path: the heap
    path its process must have (default: @path; None: not checked)."""
    expect_path = path if expect_path is None else expect_path
    base = numbers(mapped_run(binary, "none", path, opts), expect_path or None)
    run = mapped_run(binary, mode, path, opts)
    return numbers(run, expect_path or None), base, run


@pytest.mark.parametrize("path", sorted(PATHS))
def test_mapped_glibc_heap_plus_own_mapping(tmp, path):
    n, base, _ = delta("mapped", "basic", path)
    check_eq(n["peak_heap_bytes"], 100 * MIB, "peak heap: the 100 MiB block")
    check_eq(n["peak_mapped_bytes"] - base["peak_mapped_bytes"], 64 * MIB,
             "peak mapped: the 64 MiB mapping, not glibc's mapping of the block")
    check_eq(n["peak_memory_bytes"] - base["leaked_mapped_bytes"], 164 * MIB,
             "peak memory: heap and mapped at one instant")
    check_eq(n["leaked_mapped_bytes"] - base["leaked_mapped_bytes"], 64 * MIB,
             "the mapping is still mapped at exit")
    check_eq(n["mapped_count"] - base["mapped_count"], 1, "mappings of its own")


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("alloc", ["jemalloc", "mimalloc"])
def test_mapped_other_allocators(tmp, path, alloc):
    """jemalloc and mimalloc map their extents and segments inside malloc;
    the library leaves such processes to the uprobes, whatever the path."""
    n, base, _ = delta("mapped_" + alloc, "basic", path, expect_path="uprobes")
    check_true(n["peak_heap_bytes"] >= 100 * MIB, "peak heap holds the 100 MiB block")
    check_eq(n["peak_mapped_bytes"] - base["peak_mapped_bytes"], 64 * MIB,
             "peak mapped: the 64 MiB mapping only")
    check_eq(n["peak_memory_bytes"], n["peak_heap_bytes"] + n["peak_mapped_bytes"],
             "peak memory: the heap peak with the mapping beside it")
    check_eq(n["leaked_mapped_bytes"] - base["leaked_mapped_bytes"], 64 * MIB,
             "the mapping is still mapped at exit")


# mode: (peak, left at exit) in pages of the fixture's own mappings
PAGES = {
    "mprotect": (10, 7),
    "munmap": (64, 40),
    "mremap": (48, 20),
    "fixed": (32, 23),
    "brk": (64, 64),
}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("mode", sorted(PAGES))
def test_mapped_pages(tmp, path, mode):
    n, base, _ = delta("mapped", mode, path)
    peak, left = PAGES[mode]
    check_eq((n["peak_mapped_bytes"] - base["peak_mapped_bytes"]) // PG, peak,
             "peak mapped pages")
    check_eq((n["leaked_mapped_bytes"] - base["leaked_mapped_bytes"]) % PG, 0,
             "whole pages")
    check_eq((n["leaked_mapped_bytes"] - base["leaked_mapped_bytes"]) // PG, left,
             "pages still mapped at exit")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_mapped_thread_arena_not_counted(tmp, path):
    n, base, t = delta("mapped", "arena", path)
    root = root_pid(t.events)
    # glibc reserved the thread's arena PROT_NONE, inside malloc
    resv = [e for e in of_type(t.events, "mmap")
            if e["pid"] == root and e["tid"] != root and e["prot"] == 0]
    check_eq([(e.get("allocator"), e["len"] >= 64 * MIB) for e in resv], [(True, True)],
             "the arena's reservation: one PROT_NONE mapping of 64 MiB or more, the allocator's")
    check_true(any(e["pid"] == root and e["tid"] != root and e["prot"] == 3
                   for e in of_type(t.events, "mprotect")),
               "glibc made part of the arena accessible")
    check_eq(n["peak_mapped_bytes"] - base["peak_mapped_bytes"], 1 * MIB,
             "peak mapped: the thread's 1 MiB stack, not the arena")


def test_mapped_no_allocators(tmp):
    """Without allocator probes every anonymous mapping is the program's:
    glibc's mapping of the block counts (nothing counts it as heap)."""
    opts = ("--no-allocators",)
    n, base, _ = delta("mapped", "basic", "uprobes", opts, expect_path="")
    check_eq(n["peak_heap_bytes"], 0, "no heap without the probes")
    check_eq(n["peak_mapped_bytes"] - base["leaked_mapped_bytes"], 64 * MIB + 100 * MIB + PG,
             "peak mapped: glibc's 100 MiB + 1 page mapping and the 64 MiB one")
    check_eq(n["leaked_mapped_bytes"] - base["leaked_mapped_bytes"], 64 * MIB,
             "left at exit: the 64 MiB mapping")


def require_python():
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        pytest.skip("no %s (Debian's python3 package)" % DEBIAN_PYTHON)


def peak_anon_rss(evs):
    """The tree's most anonymous resident bytes at once, from the rss records."""
    anon, peak = {}, 0
    for e in evs:
        if e["type"] == "rss":
            anon[e["pid"]] = e["anon"]
            peak = max(peak, sum(anon.values()))
        elif e["type"] == "exit":
            anon.pop(e["pid"], None)
    return peak


@pytest.mark.parametrize("path", sorted(PATHS))
def test_mapped_python3_objects(tmp, path):
    """CPython keeps its small objects in pymalloc arenas it maps itself:
    memory (heap + mapped) follows the anonymous RSS, the heap alone does
    not (docs/METRICS.md "Mapped memory"; measured: 1.005 to 1.02 of it)."""
    require_python()
    t = track(tmp, [DEBIAN_PYTHON, "-c", "x = [str(i) * 3 for i in range(1000000)]"],
              opts=PATHS[path])
    r = t.report
    rss = peak_anon_rss(t.events)
    require(rss > 50 * MIB, "python3's anonymous RSS peaked above 50 MiB (%d)" % rss)
    check_true(abs(r["peak_memory_bytes"] - rss) <= rss // 10,
               "peak memory %d within 10%% of the peak anonymous RSS %d"
               % (r["peak_memory_bytes"], rss))
    check_true(r["peak_heap_bytes"] < rss // 2, "the heap alone is a fraction of it")


def test_mapped_diff_and_text_report(tmp):
    """diff has the four metrics, tree and per process; the text report
    prints them."""
    base, new = (mapped_run("mapped", m, "in-process") for m in ("none", "basic"))
    p = run([MEMTRACK, "diff", "--json", base.artifact.path, new.artifact.path])
    check_eq((p.rc, p.stderr), (0, ""), "diff --json (rc, stderr)")
    d = json.loads(p.stdout)
    for key in ("peak_mapped_bytes", "peak_memory_bytes", "mapped_count",
                "leaked_mapped_bytes"):
        m = d["metrics"][key]
        check_eq((m["base"], m["new"]), (base.report[key], new.report[key]),
                 "diff's %s (base, new) are report's" % key)
        q = d["processes"][0]["metrics"][key]
        check_eq((q["base"], q["new"]), (m["base"], m["new"]), "the process's %s" % key)
    check_eq(d["metrics"]["leaked_mapped_bytes"]["change"], 64 * MIB,
             "leaked_mapped_bytes change: the 64 MiB mapping")
    p = run([MEMTRACK, "diff", base.artifact.path, new.artifact.path, "--fail-above", "50",
             "--metric", "peak_mapped_bytes"])
    check_eq(p.rc, 1, "diff --fail-above 50 --metric peak_mapped_bytes: a regression")
    p = run([MEMTRACK, "report", new.artifact.path])
    r = new.report
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("peak mapped:", "peak memory:"))]
    check_eq(len(lines), 2, "the text report's mapped and memory lines")
    check_true(lines and "%d mappings" % r["mapped_count"] in lines[0],
               "the mapped line counts the mappings: %r" % lines)


def test_mapped_exports_and_timeline(tmp):
    """CSV and Perfetto carry mapped memory; the timeline draws heap +
    mapped with its peak labelled."""
    t = mapped_run("mapped", "basic", "in-process")
    r = t.report
    out = tmp / "series.csv"
    p = run([MEMTRACK, "export", "--format=csv", t.artifact.path, "-o", out])
    require((p.rc, p.stderr) == (0, ""), "export csv: " + p.describe())
    rows = list(csv.DictReader(out.open()))
    check_eq(max(int(x["tree_mapped_bytes"]) for x in rows), r["peak_mapped_bytes"],
             "tree_mapped_bytes maximum == report's peak_mapped_bytes")
    check_eq(max(int(x["tree_mapped_bytes"]) + int(x["tree_heap_bytes"]) for x in rows),
             r["peak_memory_bytes"], "heap + mapped maximum == report's peak_memory_bytes")
    check_eq(int(rows[-1]["tree_mapped_bytes"]), 0, "nothing mapped after the exit")
    out = tmp / "trace.json"
    p = run([MEMTRACK, "export", "--format=perfetto", t.artifact.path, "-o", out])
    require((p.rc, p.stderr) == (0, ""), "export perfetto: " + p.describe())
    mapped = [e["args"]["bytes"] for e in json.loads(out.read_text())["traceEvents"]
              if e["ph"] == "C" and e["name"] == "mapped"]
    check_eq(max(mapped) if mapped else None, r["peak_mapped_bytes"],
             "the mapped counter track's maximum")
    page = tmp / "timeline.svg"
    p = run([MEMTRACK, "report", t.artifact.path, "--svg", page])
    require(p.rc == 0, "report --svg: " + p.describe())
    labels = dict(re.findall(r'<g class="peak-label" data-series="(\w+)" data-bytes="(\d+)"',
                             page.read_text()))
    check_eq(int(labels.get("memory", -1)), r["peak_memory_bytes"], "the memory peak label")
    check_true('data-series="memory"' in page.read_text().replace(
        'class="peak-label" data-series="memory"', ""), "the memory series is drawn")


def test_mapped_python3_top_memory_site(tmp):
    """report --top: the site holding the most memory at its peak is the
    pymalloc arena mapping made for the strings the program builds."""
    require_python()
    t = track(tmp, [DEBIAN_PYTHON, "-c", "x = [str(i) * 3 for i in range(1000000)]"],
              opts=["--stacks"])
    p = run([MEMTRACK, "report", t.artifact.path, "--top", "3", "--json"])
    require(p.rc == 0, "report --top: " + p.describe())
    d = json.loads(p.stdout)
    top = d["top"]["memory"]
    require(top, "no memory ranking")
    funcs = [f["function"] for f in top[0]["frames"]]
    # Debian's python3.11 keeps the names of its exported functions only:
    # the arena's mmap is called from inside the interpreter binary, under
    # the evaluation loop running the list comprehension
    check_true(top[0]["frames"] and (top[0]["frames"][0]["object"] or "").startswith(
        "/usr/bin/python3"), "the mapping is made by the interpreter: %r" % top[0]["frames"][:1])
    check_true("_PyEval_EvalFrameDefault" in funcs and "PyRun_SimpleStringFlags" in funcs,
               "the top memory site runs the -c program: %r" % funcs[:16])
    check_eq(top[0]["alloc_count"], 0, "it is a mapping site (no heap allocations)")
    check_true(top[0]["memory_bytes"] > d["peak_memory_bytes"] // 2,
               "it holds most of the memory at the peak (%d of %d)"
               % (top[0]["memory_bytes"], d["peak_memory_bytes"]))


GO_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "go",
                      "alloc200.go")


def test_mapped_go_slices(tmp):
    """A Go program's heap is mapped memory: no malloc, 200 MiB of slices."""
    go = shutil.which("go")
    if not go:
        pytest.skip("no go (Debian's golang-go; scripts/bootstrap.sh installs it)")
    exe = tmp / "alloc200"
    env = dict(os.environ, GOCACHE=str(tmp / "gocache"), GO111MODULE="off", HOME=str(tmp))
    b = subprocess.run([go, "build", "-o", str(exe), GO_SRC], env=env, capture_output=True,
                       text=True, timeout=300)
    require(b.returncode == 0, "go build: %s" % b.stderr)
    t = track(tmp, [exe])
    line = t.stdout.split()
    stats = dict(zip(line[0::2], (int(v) for v in line[1::2])))
    r = t.report
    check_eq(r["peak_heap_bytes"], 0, "no heap blocks: Go does not call malloc")
    check_true(r["peak_memory_bytes"] >= stats["HeapAlloc"] >= 200 * MIB,
               "peak memory %d holds the runtime's live heap %d"
               % (r["peak_memory_bytes"], stats["HeapAlloc"]))
    check_true(r["peak_memory_bytes"] <= 2 * stats["Sys"],
               "peak memory %d is of the order of the runtime's Sys %d"
               % (r["peak_memory_bytes"], stats["Sys"]))


MAPPED_KEYS = ("peak_mapped_bytes", "mapped_count", "leaked_mapped_bytes")


def test_mapped_library_adds_nothing(tmp):
    """The in-process library maps nothing that counts as the program's:
    its buffers are not a .bss ld.so would map anonymously (they are mapped
    with its depth raised, so they are the allocator's), so the default
    path's mapped memory is --no-fast's, process by process, for a plain
    process and for a tree that execs and spawns every way (popen's
    buffers included)."""
    plain = {path: numbers(mapped_run("mapped", "none", path)) for path in PATHS}
    check_eq({k: plain["in-process"][k] for k in MAPPED_KEYS},
             {k: plain["uprobes"][k] for k in MAPPED_KEYS}, "mapped numbers, default vs --no-fast")
    cmd = [fixture("exec_ways"), fixture("show_env"), "popen", "system", "posix_spawn", "execvp"]
    per_path = {}
    for path, opts in PATHS.items():
        r = track(tmp, cmd, opts=opts).report
        per_path[path] = sorted((p["command"], tuple(p[k] for k in MAPPED_KEYS))
                                for p in r["processes"])
    check_eq(per_path["in-process"], per_path["uprobes"],
             "per process (command, %s), default vs --no-fast" % ", ".join(MAPPED_KEYS))
