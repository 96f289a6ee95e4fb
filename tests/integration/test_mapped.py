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
import signal

import pytest

from mtlib import (MEMTRACK, Failure, check_eq, check_true, finish, fixture, kill_group, of_type,
                   proc_stats, require, root_pid, run, shared_track, spawn_track, track,
                   wait_until)

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
    require((p.rc, p.stderr) == (0, "memtrack: wrote %s\n" % out), "export csv: " + p.describe())
    rows = list(csv.DictReader(out.open()))
    check_eq(max(int(x["tree_mapped_bytes"]) for x in rows), r["peak_mapped_bytes"],
             "tree_mapped_bytes maximum == report's peak_mapped_bytes")
    check_eq(max(int(x["tree_mapped_bytes"]) + int(x["tree_heap_bytes"]) for x in rows),
             r["peak_memory_bytes"], "heap + mapped maximum == report's peak_memory_bytes")
    check_eq(int(rows[-1]["tree_mapped_bytes"]), 0, "nothing mapped after the exit")
    out = tmp / "trace.json"
    p = run([MEMTRACK, "export", "--format=perfetto", t.artifact.path, "-o", out])
    require((p.rc, p.stderr) == (0, "memtrack: wrote %s\n" % out), "export perfetto: " + p.describe())
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
    # the evaluation loop running the list comprehension, whose native frame
    # stands for the Python frames it runs (issue 37): <listcomp> in <module>
    check_true(top[0]["frames"] and (top[0]["frames"][0]["object"] or "").startswith(
        "/usr/bin/python3"), "the mapping is made by the interpreter: %r" % top[0]["frames"][:1])
    py = [i for i, f in enumerate(funcs) if f in ("<listcomp>", "<module>")]
    check_eq([funcs[i] for i in py], ["<listcomp>", "<module>"],
             "the Python frames of the top memory site (%r)" % funcs[:16])
    check_true("_PyEval_EvalFrameDefault" not in funcs and "PyRun_SimpleStringFlags" in funcs
               and py and py[-1] < funcs.index("PyRun_SimpleStringFlags"),
               "the top memory site runs the -c program, the eval loop replaced: %r" % funcs[:16])
    check_eq(top[0]["alloc_count"], 0, "it is a mapping site (no heap allocations)")
    check_true(top[0]["memory_bytes"] > d["peak_memory_bytes"] // 2,
               "it holds most of the memory at the peak (%d of %d)"
               % (top[0]["memory_bytes"], d["peak_memory_bytes"]))


GO_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "go",
                      "alloc200.go")
# Go's arena index on linux/amd64: 1 << (48 - 26) pointers, mapped read-write
# once and left to demand paging (runtime/malloc.go, mheap.sysAlloc: "there's
# no statistic we can comfortably account for this space in"), so it is in
# no MemStats figure and almost none of it is ever resident
GO_ARENA_INDEX = (1 << 22) * 8


def smaps_own_anon(text, exe, names=("",)):
    """(Size, Rss) of the private anonymous accessible mappings of a
    /proc/PID/smaps that the program made with mmap (or brk: @names with
    "[heap]"): others named ([stack], [vdso]) and the bss the kernel's ELF
    loader placed right after the executable's data segment at exec (no
    mmap record) are left out."""
    rows, cur = [], None
    for ln in text.splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ (\d+)\s*(.*)$", ln)
        if m:
            cur = {"start": int(m[1], 16), "end": int(m[2], 16), "perm": m[3],
                   "inode": int(m[4]), "name": m[5].strip()}
            rows.append(cur)
        elif cur is not None and ln.startswith(("Size:", "Rss:")):
            cur[ln.split(":")[0]] = int(ln.split()[1]) * 1024
    bss = {r["end"] for r in rows if r["name"] == str(exe) and r["perm"][1] == "w"}
    own = [r for r in rows if not r["inode"] and r["name"] in names and r["perm"][3] == "p"
           and r["perm"][:3] != "---" and r["start"] not in bss]
    return sum(r["Size"] for r in own), sum(r["Rss"] for r in own)


def test_mapped_go_slices(tmp):
    """A Go program's heap is mapped memory: no malloc, 200 MiB of slices.
    Peak memory is the kernel's own sum of the program's accessible anonymous
    mappings at the peak, to the page.  It is not within 15% of the peak
    anonymous RSS (measured: 1.21 of it): Go maps its 32 MiB arena index
    read-write and never touches most of it; without it, 1.05
    (docs/METRICS.md "Mapped memory", Go)."""
    go = shutil.which("go")
    if not go:
        pytest.skip("no go (Debian's golang-go; scripts/bootstrap.sh installs it)")
    exe = tmp / "alloc200"
    env = dict(os.environ, GOCACHE=str(tmp / "gocache"), GO111MODULE="off", HOME=str(tmp))
    b = subprocess.run([go, "build", "-o", str(exe), GO_SRC], env=env, capture_output=True,
                       text=True, timeout=300)
    require(b.returncode == 0, "go build: %s" % b.stderr)
    smaps = tmp / "smaps"
    t = track(tmp, [exe, smaps])
    line = t.stdout.split()
    stats = dict(zip(line[0::2], (int(v) for v in line[1::2])))
    r = t.report
    rss = peak_anon_rss(t.events)
    size, resident = smaps_own_anon(smaps.read_text(), exe)
    mem = r["peak_memory_bytes"]
    check_eq(r["peak_heap_bytes"], 0, "no heap blocks: Go does not call malloc")
    check_eq(mem, size, "peak memory: the accessible anonymous mappings /proc/PID/smaps lists "
             "at the peak (%d resident of them)" % resident)
    check_true(mem >= stats["HeapAlloc"] >= 200 * MIB,
               "peak memory %d holds the runtime's live heap %d" % (mem, stats["HeapAlloc"]))
    check_true(rss <= mem <= rss + rss * 15 // 100 + GO_ARENA_INDEX,
               "peak memory %d within 15%% of the peak anonymous RSS %d, beside the arena "
               "index's 32 MiB mapped and untouched (%.3f of the RSS)" % (mem, rss, mem / rss))
    check_true(0 <= mem - GO_ARENA_INDEX - stats["Sys"] <= MIB,
               "peak memory %d is the runtime's Sys %d and its arena index"
               % (mem, stats["Sys"]))


NODE_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "node",
                       "fill.js")


def require_node():
    node = shutil.which("node")
    if not node:
        pytest.skip("no node (Debian's nodejs; scripts/bootstrap.sh installs it)")
    return os.path.realpath(node)


def memory_usage(stdout):
    """fill.js's line: process.memoryUsage() and the array's length."""
    line = stdout.split()
    return dict(zip(line[0::2], (int(v) for v in line[1::2])))


@pytest.mark.parametrize("path", sorted(PATHS))
def test_mapped_node_array(tmp, path):
    """V8 keeps its heap in pages it maps itself (PROT_NONE reservations
    made accessible with mprotect): memory follows the anonymous RSS, the
    heap alone does not (measured: 1.03 to 1.08 of it)."""
    node = require_node()
    t = track(tmp, [node, NODE_JS], opts=PATHS[path])
    u = memory_usage(t.stdout)
    r = t.report
    rss = peak_anon_rss(t.events)
    mem = r["peak_memory_bytes"]
    check_eq(u["length"], 4000000, "the array was filled")
    require(u["heapUsed"] > 200 * MIB, "V8's heap holds the array (%d)" % u["heapUsed"])
    check_true(abs(mem - rss) <= rss * 15 // 100,
               "peak memory %d within 15%% of the peak anonymous RSS %d (%.3f; "
               "process.memoryUsage(): rss %d, heapTotal %d)"
               % (mem, rss, mem / rss, u["rss"], u["heapTotal"]))
    check_true(mem >= u["heapTotal"], "peak memory %d holds V8's heap %d" % (mem, u["heapTotal"]))
    check_true(r["peak_heap_bytes"] < rss // 4,
               "the heap alone is a fraction of it (%d)" % r["peak_heap_bytes"])


def test_mapped_node_pages_exact(tmp):
    """Every V8 reservation, mprotect, partial munmap and MAP_FIXED followed
    to the page: with --no-allocators every anonymous private mapping and
    the brk heap count, so what node has mapped when it is killed is what
    /proc/PID/smaps listed while it was stopped just before."""
    node = require_node()
    p, art = spawn_track(tmp, [node, NODE_JS, "stop"], opts=["--no-allocators"])
    try:
        u = memory_usage(p.stdout.readline())
        check_eq(u.get("length"), 4000000, "the array was filled")
        pid = u["pid"]
        wait_until(lambda: next((f[0] for q, _, f in proc_stats() if q == pid), "T") == "T",
                   "node stopped")
        with open("/proc/%d/smaps" % pid) as f:
            size, _ = smaps_own_anon(f.read(), node, names=("", "[heap]"))
        os.kill(pid, signal.SIGKILL)
    finally:
        done = finish(p)
    require(done.rc == 128 + 9, "memtrack exit status: " + done.describe())
    r = art.report
    check_eq(r["processes"][0]["exit_signal"], 9, "node was killed")
    check_eq(r["leaked_mapped_bytes"], size,
             "mapped at the kill: the accessible anonymous mappings smaps listed")


HEAP_RECORDS = ("malloc", "calloc", "realloc", "aligned_alloc", "free")
MAP_FIXED = 0x10
LDSO_SLACK = 3 * PG  # see own_mappings_by_image


def own_mappings_by_image(evs):
    """Per image (a process from its start or exec), sorted by its path:
    its own anonymous private mmaps (len, prot, flags) in three lists.
    Before the image's first heap record: "bss", the MAP_FIXED ones (ld.so
    extending a loaded object's data with its .bss), and "ldso", the others
    (ld.so's start-up allocator: link maps, names, the TLS block, in whole
    pages); after it, "program"."""
    images, cur = [], {}
    for e in sorted(evs, key=lambda e: e["ts"]):
        pid = e.get("pid")
        if e["type"] == "exec" or pid not in cur:
            cur[pid] = {"path": e.get("path", "(forked)"), "started": False,
                        "bss": [], "ldso": [], "program": []}
            images.append(cur[pid])
        im = cur[pid]
        if e["type"] in HEAP_RECORDS:
            im["started"] = True
        elif (e["type"] == "mmap" and e["flags"] & 0x20 and e["flags"] & 3 == 2
              and not e.get("allocator")):
            k = (e["len"], e["prot"], e["flags"])
            im["program" if im["started"] else "bss" if e["flags"] & MAP_FIXED else "ldso"].append(k)
    return sorted(images, key=lambda im: (im["path"], im["bss"], im["program"]))


def ldso_pages(im):
    return sum((n + PG - 1) // PG * PG for n, _, _ in im["ldso"])


def test_mapped_library_adds_nothing(tmp):
    """The in-process library maps nothing that counts as the program's:
    its buffers are not a .bss ld.so would map anonymously (they are mapped
    with its depth raised, so they are the allocator's), and it maps nothing
    of its own later, for a plain process and for a tree that execs and
    spawns every way (popen's buffers included): per image, the mappings
    after start-up and the .bss mappings are --no-fast's.  What ld.so's
    start-up allocator maps differs, because it loads one more object (its
    link map and name, its TLS in the static TLS block), in whole pages and
    either way (measured: the TLS block's mapping is 8 KiB with the library
    and 12 KiB without for these programs, python3 maps one 12 KiB mapping
    more): at most LDSO_SLACK more."""
    cmd = [fixture("exec_ways"), fixture("show_env"), "popen", "system", "posix_spawn", "execvp"]
    for what, runs in (("mapped none", {path: mapped_run("mapped", "none", path)
                                        for path in PATHS}),
                       ("exec_ways", {path: track(tmp, cmd, opts=opts, name=path + ".mtrk")
                                      for path, opts in PATHS.items()})):
        fast, slow = (own_mappings_by_image(runs[p].events) for p in ("in-process", "uprobes"))
        check_eq([(im["path"], im["bss"], im["program"]) for im in fast],
                 [(im["path"], im["bss"], im["program"]) for im in slow],
                 "%s: per image (path, .bss mappings, mappings after start-up), default vs "
                 "--no-fast" % what)
        extra = [ldso_pages(f) - ldso_pages(s) for f, s in zip(fast, slow)]
        check_true(all(x <= LDSO_SLACK for x in extra),
                   "%s: ld.so's start-up mappings, default minus --no-fast, per image: %r"
                   % (what, extra))


def marks_run(tmp):
    """mapped_marks under --control, with `memtrack top` following its
    artifact: (the finished track, top's lines while the fixture waited
    with everything mapped, top's last line)."""
    flag = tmp / "go"
    p, art = spawn_track(tmp, [fixture("mapped_marks"), flag],
                         opts=["--control", str(tmp / "c.sock"), "--flush-ms", "50"])
    top = subprocess.Popen([MEMTRACK, "top", "--interval", "0.1", art.path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        require(p.stdout.readline() == "waiting\n", "the fixture reached its wait")
        waiting = []

        def settled():
            line = top.stdout.readline()
            if not line:
                raise Failure("top ended early: %s" % top.stderr.read())
            fields = dict(kv.split("=", 1) for kv in line.split())
            waiting.append(fields)
            # records flushed: the last lines agree (nothing maps while it waits)
            return len(waiting) >= 5 and len({(x["heap_bytes"], x["mapped_bytes"])
                                                for x in waiting[-5:]}) == 1
        wait_until(settled, "top's lines to settle while the fixture waits", timeout=30)
        flag.touch()
        done = finish(p)
        require(done.rc == 0, "memtrack: " + done.describe())
        out, err = top.communicate(timeout=30)
        require((top.returncode, err) == (0, ""), "top: %s %s" % (top.returncode, err))
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
        if p.poll() is None:
            kill_group(p)
    last = dict(kv.split("=", 1) for kv in out.splitlines()[-1].split())
    return art, waiting[-5:], last


SECTION_KEYS = ("alloc_count", "peak_heap_bytes", "leaked_bytes", "peak_mapped_bytes",
                "peak_memory_bytes", "mapped_count", "leaked_mapped_bytes")


def test_mapped_between_and_top(tmp):
    """report --between counts the mappings made between the marks (and the
    break grown), to the byte, tree and per process; memtrack top prints
    mapped and memory live and, at the end, report's numbers."""
    art, waiting, last = marks_run(tmp)
    sections = {}
    for a, b in (("mapped", "done"), ("brk", "brked")):
        q = run([MEMTRACK, "report", art.path, "--between", a, b, "--json"])
        require(q.rc == 0, "report --between %s %s: %s" % (a, b, q.describe()))
        sections[a] = json.loads(q.stdout)
    s = sections["mapped"]
    check_eq({k: s[k] for k in SECTION_KEYS},
             {"alloc_count": 1, "peak_heap_bytes": 100 * MIB, "leaked_bytes": 0,
              "peak_mapped_bytes": 64 * MIB, "peak_memory_bytes": 164 * MIB,
              "mapped_count": 1, "leaked_mapped_bytes": 64 * MIB},
             "mapped..done: heap 100 MiB, mapped 64 MiB, memory 164 MiB at once")
    root = art.report["processes"][0]
    check_eq([{k: q[k] for k in ("pid", "command") + SECTION_KEYS} for q in s["processes"]],
             [dict({"pid": root["pid"], "command": "mapped_marks"},
                   **{k: s[k] for k in SECTION_KEYS})], "mapped..done, per process")
    s = sections["brk"]
    check_eq({k: s[k] for k in SECTION_KEYS},
             {"alloc_count": 0, "peak_heap_bytes": 0, "leaked_bytes": 0,
              "peak_mapped_bytes": 64 * 1024, "peak_memory_bytes": 64 * 1024,
              "mapped_count": 0, "leaked_mapped_bytes": 64 * 1024},
             "brk..brked: the break grown by 64 KiB (from where it stood before the section)")
    text = run([MEMTRACK, "report", art.path, "--between", "mapped", "done"]).stdout
    check_true("peak mapped:  64.0 MiB (1 mappings of the program's own, 64.0 MiB still "
               "mapped at the end of the section)\npeak memory:  164.0 MiB (heap + mapped)\n"
               in text, "the section's text: %r" % text)
    r = art.report
    w = waiting[-1]
    check_eq(int(w["mapped_bytes"]), r["leaked_mapped_bytes"],
             "top's mapped_bytes while the fixture waits: what it still had mapped at exit")
    check_eq(int(w["memory_bytes"]), int(w["heap_bytes"]) + int(w["mapped_bytes"]),
             "memory_bytes: heap and mapped now")
    check_eq(int(w["busiest_mapped_bytes"]), int(w["mapped_bytes"]), "its one process's")
    check_true(int(w["mapped_bytes"]) >= 64 * MIB + 64 * 1024, "the mapping and the break in it")
    check_eq({k: int(last[k]) for k in KEYS}, {k: r[k] for k in KEYS},
             "top's last line: report's %s" % ", ".join(KEYS))
