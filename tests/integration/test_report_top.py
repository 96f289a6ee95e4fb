# SPDX-License-Identifier: MIT
"""report --top N: the call sites of tests/fixtures/callsites.c ranked by
each metric, with their symbolized stacks; the symbolization cache; a binary
changed since the recording; usage errors."""
import json
import re
import shutil

from mtlib import check_eq, check_true, fixture, require, run, track
from callsites import START, expected, memtrack, own_cache, tracked


def top_json(path, n):
    doc = json.loads(memtrack("report", path, "--top", n, "--json").stdout)
    require("top" in doc, "report --top --json has no 'top' key: %s" % sorted(doc))
    return doc


def names(site):
    return [f["function"] for f in site["frames"]]


def test_report_top_sites(tmp):
    """The top site of each metric and its whole stack, exactly."""
    own_cache(tmp)
    t = tracked()
    doc = top_json(t.artifact.path, 3)
    top, e = doc["top"], expected()
    exe = fixture("callsites")
    peak, allocs, allocated, leaked = (top[k][0] for k in ("peak", "allocations", "allocated", "leaked"))
    check_eq(names(peak), ["b", "a", "main"] + START, "peak site's stack")
    check_eq((peak["peak_bytes"], peak["alloc_count"], peak["allocated_bytes"], peak["leaked_bytes"]),
             (12000, 3, 12000, 0), "peak site's numbers")
    check_eq([(f["line"], f["object"]) for f in peak["frames"][:3]],
             [(e["b"], exe), (e["a"], exe), (e["main>a"], exe)], "peak site's lines and object")
    check_true(all(f["file"].endswith("tests/fixtures/callsites.c") for f in peak["frames"][:3]),
               "peak site's files: %s" % [f["file"] for f in peak["frames"]])
    check_eq(peak["truncated"], False, "the stack reaches _start")
    check_eq(names(allocs), ["c", "main"] + START, "most allocations: c")
    check_eq((allocs["alloc_count"], allocs["allocated_bytes"], allocs["peak_bytes"]), (100, 20000, 200),
             "c's numbers")
    check_eq([f["line"] for f in allocs["frames"][:2]], [e["c"], e["main>c"]], "c's lines")
    check_eq(allocated["stack"], allocs["stack"], "most allocated bytes: c too")
    check_eq(names(leaked), ["d", "main"] + START, "most leaked: d")
    check_eq((leaked["leaked_count"], leaked["leaked_bytes"]), (1, 777), "d's leak")
    check_eq([len(top[k]) for k in ("peak", "allocations", "allocated", "leaked")], [2, 3, 3, 1],
             "sites with a non-zero value, at most 3")
    check_eq(doc["truncated_stacks"]["count"] <= doc["truncated_stacks"]["stacks"], True,
             "truncated count within the stacks")


def test_report_top_peaks_add_up(tmp):
    """Every site's bytes at the peak sum to peak_heap_bytes; leaks sum to leaked_bytes."""
    own_cache(tmp)
    doc = top_json(tracked().artifact.path, 1000000)
    check_eq(sum(s["peak_bytes"] for s in doc["top"]["peak"]), doc["peak_heap_bytes"], "sum of peaks")
    check_eq(sum(s["leaked_bytes"] for s in doc["top"]["leaked"]), doc["leaked_bytes"], "sum of leaks")
    check_eq(sum(s["alloc_count"] for s in doc["top"]["allocations"]), doc["alloc_count"],
             "sum of allocations")


def test_report_top_text(tmp):
    """The text form: a heading per ranking, one line per frame with file:line and object."""
    own_cache(tmp)
    out = memtrack("report", tracked().artifact.path, "--top", 1).stdout
    e = expected()
    for heading in ("top 1 call site by peak heap", "top 1 call site by allocations",
                    "top 1 call site by allocated bytes", "top 1 call site by leaked bytes"):
        check_true(heading in out, "heading %r in:\n%s" % (heading, out))
    check_true("      b  tests/fixtures/callsites.c:%d  [callsites]\n" % e["b"] in out,
               "b's frame line in:\n%s" % out)
    check_true("      d  tests/fixtures/callsites.c:%d  [callsites]\n" % e["d"] in out,
               "d's frame line in:\n%s" % out)
    check_true("truncated stacks: " in out, "truncated stacks line in:\n%s" % out)


def test_report_top_cache(tmp):
    """The first report fills the cache (a file per build-id); the second
    answers the same from it; a corrupt cache file changes nothing."""
    cache = own_cache(tmp)
    path = tracked().artifact.path
    first = memtrack("report", path, "--top", 5).stdout
    objects = [e for e in tracked().events if e["type"] == "object"]
    files = sorted(p.name for p in cache.glob("*.syms"))
    exe_id = [o["build_id"] for o in objects if o["path"] == fixture("callsites")][0]
    check_true(exe_id + ".syms" in files, "cache files %s name the fixture's build-id %s" % (files, exe_id))
    check_eq(memtrack("report", path, "--top", 5).stdout, first, "second report, from the cache")
    for f in cache.glob("*.syms"):
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x55
        f.write_bytes(bytes(data))
    check_eq(memtrack("report", path, "--top", 5).stdout, first, "report over a corrupt cache")


def test_report_top_changed_binary(tmp):
    """A binary replaced after the recording: its frames say so instead of wrong names."""
    own_cache(tmp)
    exe = tmp / "callsites"
    shutil.copy(fixture("callsites"), exe)
    t = track(tmp, [exe], ["--stacks"])
    shutil.copy(fixture("heap_pairs"), exe)
    doc = top_json(t.artifact.path, 1)
    frames = doc["top"]["peak"][0]["frames"]
    check_eq([f["function"] for f in frames if f["object"] == str(exe)],
             ["<path changed since recording>"] * 4, "frames in the replaced binary")


def test_report_top_without_stacks(tmp):
    """A run without --stacks: one site, stack 0, no frames."""
    own_cache(tmp)
    doc = top_json(tracked(stacks=False).artifact.path, 5)
    check_eq([(s["stack"], s["frames"], s["alloc_count"]) for s in doc["top"]["allocations"]],
             [(0, [], 104)], "the one site")
    check_eq(doc["truncated_stacks"], {"count": 0, "stacks": 0, "objects": []}, "no stacks")


def test_report_top_usage(tmp):
    path = tracked().artifact.path
    for args, msg in ((["--top"], "--top needs a number"), (["--top", "0"], "--top takes a number"),
                      (["--top", "x"], "--top takes a number"),
                      (["--top", "3", "--between", "a", "b"], "--top ranks the call sites")):
        p = memtrack("report", path, *args, rc=2)
        check_true(msg in p.stderr and p.stderr.count("\n") == 1, "%s: one line with %r: %r" % (args, msg, p.stderr))


STK = {  # tests/fixtures/stacks/stk.c: the leaked block of each mode, its stack as report names it
    "recurse": (4201, ["leaf_alloc"] + ["rec"] * 6 + ["main"] + START),
    "thread": (4202, ["leaf_alloc", "thread_main", "start_thread"]),
    "fork": (4203, ["leaf_alloc", "fork_child", "main"] + START),
    "dlopen": (4205, ["plugin_inner", "plugin_alloc", "call_plugin", "main"] + START),
}


def test_report_top_stk_fixtures(tmp):
    """stk.c at -O2 without frame pointers, dynamic and static: the site that
    leaked most is the mode's own malloc, with exactly the source's call chain
    (a thread's ends in clone3, which libc's debug info and the static
    symbol table name differently)."""
    own_cache(tmp)
    for variant in ("nofp", "static_nofp"):
        exe = fixture("stk_" + variant)
        for mode, (size, chain) in STK.items():
            if mode == "dlopen" and variant.startswith("static"):
                continue
            argv = [exe, mode] + ([fixture("libstkplugin_nofp.so")] if mode == "dlopen" else [])
            t = track(tmp, argv, ["--stacks"], name="%s-%s.mtrk" % (variant, mode))
            site = top_json(t.artifact.path, 1)["top"]["leaked"][0]
            got = names(site)
            if mode == "thread":
                check_true(got[-1] in ("clone3", "__clone3"), "%s %s: thread stack ends in clone3: %s"
                           % (variant, mode, got))
                got = got[:-1]
            check_eq((got, site["leaked_bytes"], site["truncated"]), (chain, size, False),
                     "%s %s: the top leaking site" % (variant, mode))


def strip_templates(name):
    """'a<b<c> >::f(int)' -> 'a<>::f(int)', as heaptrack_print abbreviates."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<")
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                out.append(">")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def test_report_top_same_as_heaptrack(tmp):
    """The C++ fixture's top peak site is heaptrack's top peak consumer:
    same function, allocations and bytes."""
    own_cache(tmp)
    exe = fixture("cxx_map")
    ht = run(["heaptrack", "-o", tmp / "ht", exe], timeout=120)
    require(ht.rc == 0, "heaptrack failed: " + ht.describe())
    pr = run(["heaptrack_print", "-f", tmp / "ht.zst", "-p", "1", "-a", "0", "-l", "0", "-T", "0"])
    require(pr.rc == 0, "heaptrack_print failed: " + pr.describe())
    m = re.search(r"PEAK MEMORY CONSUMERS\n([\d.]+)K peak memory consumed over (\d+) calls from\n(.*)\n",
                  pr.stdout)
    require(m, "no peak consumer in heaptrack_print's output:\n" + pr.stdout[:3000])
    t = track(tmp, [exe], ["--stacks"])
    site = top_json(t.artifact.path, 1)["top"]["peak"][0]
    check_eq((strip_templates(site["frames"][0]["function"]), site["alloc_count"],
              round(site["peak_bytes"] / 1000, 2)),
             (m.group(3), int(m.group(2)), float(m.group(1))), "top peak site: memtrack vs heaptrack")
