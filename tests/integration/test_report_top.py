# SPDX-License-Identifier: MIT
"""report --top N: the call sites of tests/fixtures/callsites.c ranked by
each metric, with their symbolized stacks; the symbolization cache; a binary
changed since the recording; usage errors."""
import json
import re
import shutil

from mtlib import check_eq, check_true, fixture, require, run, track
from callsites import START, expected, memtrack, own_cache, tracked
import mtlib


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
    """The text form of --by stack: a heading per ranking, one line per frame
    with file:line and object; each site names its stack by 8 hex digits,
    the JSON's stack_id (the low 32 bits of the full id, kept as "stack")."""
    own_cache(tmp)
    path = tracked().artifact.path
    out = memtrack("report", path, "--top", 1, "--by", "stack").stdout
    e = expected()
    for heading in ("top 1 call site by peak heap", "top 1 call site by allocations",
                    "top 1 call site by allocated bytes", "top 1 call site by leaked bytes"):
        check_true(heading in out, "heading %r in:\n%s" % (heading, out))
    doc = top_json(path, 1)
    for key in ("peak", "allocations", "leaked"):
        site = doc["top"][key][0]
        check_eq(site["stack_id"], "%08x" % (site["stack"] & 0xffffffff), "%s: stack_id" % key)
        check_true(re.search(r"^  #1  .*  stack %s$" % site["stack_id"], out, re.M) is not None,
                   "%s's site line ends in 'stack %s':\n%s" % (key, site["stack_id"], out))
    check_true(re.search(r"stack \d{10,}", out) is None, "no long decimal stack id in:\n" + out)
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


def callers_tracked():
    """tests/fixtures/callers.c tracked once (stacks are track's default)."""
    return mtlib.shared_track("callers", [fixture("callers")])


def callers_of(fn):
    return [(c["function"], c["alloc_count"], c["allocated_bytes"], c["temporary_count"],
             c["leaked_bytes"]) for c in fn["callers"]]


def test_report_top_functions(tmp):
    """callers.c by function: leaf's 8 allocations from 5 stacks merge into
    one function, with its callers x (5, all temporary), y (2, 1 temporary)
    and z (1, leaked) below it; the whole-stack sites stay under "top"."""
    own_cache(tmp)
    doc = top_json(callers_tracked().artifact.path, 10)
    fns = doc["functions"]
    check_eq(doc["by"], "function", "the default")
    check_eq([f["function"] for f in fns["allocations"]], ["leaf"], "one function allocates")
    leaf = fns["allocations"][0]
    check_eq((leaf["alloc_count"], leaf["allocated_bytes"], leaf["peak_bytes"], leaf["leaked_count"],
              leaf["leaked_bytes"], leaf["temporary_count"], leaf["sites"], leaf["callers_total"]),
             (8, 8 * 333, 666, 1, 333, 6, 5, 3), "leaf's numbers")
    check_true(leaf["file"].endswith("tests/fixtures/callers.c"), "leaf's file: %r" % leaf["file"])
    check_eq(leaf["object"], fixture("callers"), "leaf's object")
    check_eq(callers_of(leaf), [("x", 5, 5 * 333, 5, 0), ("y", 2, 666, 1, 0), ("z", 1, 333, 0, 333)],
             "leaf's callers by allocations")
    check_eq([(c["function"], c["temporary_count"]) for c in fns["temporary"][0]["callers"]],
             [("x", 5), ("y", 1)], "callers by temporary allocations (z has none)")
    check_eq([c["function"] for c in fns["leaked"][0]["callers"]], ["z"], "the leaking caller")
    check_eq([c["function"] for c in fns["peak"][0]["callers"]], ["y"], "y holds the peak")
    check_eq(sorted(s["alloc_count"] for s in doc["top"]["allocations"]), [1, 1, 1, 1, 4],
             "the whole-stack sites")
    check_eq((doc["alloc_count"], doc["temporary_count"], doc["leaked_bytes"]), (8, 6, 333), "totals")
    check_true(doc["temporary_per_s"] > 0, "a rate")
    check_eq(doc["sizes"], [{"min": 256, "max": 511, "count": 8, "bytes": 2664}], "the size histogram")


def test_report_top_functions_add_up(tmp):
    """callsites.c by function: b, c and d; the functions' numbers sum to the
    totals, as the sites' do, and each function's callers sum to it."""
    own_cache(tmp)
    doc = top_json(tracked().artifact.path, 1000000)
    fns = doc["functions"]
    check_eq([(f["function"], f["peak_bytes"]) for f in fns["peak"]], [("b", 12000), ("c", 200)],
             "by peak heap")
    check_eq([(f["function"], f["alloc_count"]) for f in fns["allocations"]],
             [("c", 100), ("b", 3), ("d", 1)], "by allocations")
    check_eq([(f["function"], [c["function"] for c in f["callers"]]) for f in fns["allocations"]],
             [("c", ["main"]), ("b", ["a"]), ("d", ["main"])], "their callers")
    check_eq([(f["function"], f["temporary_count"]) for f in fns["temporary"]], [("c", 100)],
             "c's blocks are freed at once")
    for key, total in (("peak_bytes", "peak_heap_bytes"), ("alloc_count", "alloc_count"),
                       ("leaked_bytes", "leaked_bytes"), ("temporary_count", "temporary_count")):
        ranking = {"peak_bytes": "peak", "alloc_count": "allocations", "leaked_bytes": "leaked",
                   "temporary_count": "temporary"}[key]
        check_eq(sum(f[key] for f in fns[ranking]), doc[total], "functions' %s" % key)
        for f in fns[ranking]:
            check_eq(sum(c[key] for c in f["callers"]), f[key], "%s's callers' %s" % (f["function"], key))
    check_eq(doc["temporary_count"], 100, "temporary allocations")
    check_eq(doc["sizes"], [{"min": 128, "max": 255, "count": 100, "bytes": 20000},
                            {"min": 512, "max": 1023, "count": 1, "bytes": 777},
                            {"min": 2048, "max": 4095, "count": 3, "bytes": 12000}], "sizes")


def test_report_top_functions_text(tmp):
    """The text of the default --by function: each function on one line with
    its object and file, its numbers, then its callers with the ranking's
    value; plurals agree with their counts ("1 allocation")."""
    own_cache(tmp)
    out = memtrack("report", callers_tracked().artifact.path, "--top", 2).stdout
    section = out[out.index("top 1 function by allocations:\n"):]
    lines = section.splitlines()
    check_eq(lines[1], "  #1  leaf  [callers]  tests/fixtures/callers.c", "the function's line")
    check_true(re.match(r"      666 B at peak, 8 allocations, 2\.6 KiB allocated, 1 leaked \(333 B, "
                        r"[\d.]+ s old at most, [\d.]+ s on average\), 6 temporary, 666 B memory; "
                        r"5 stacks, heaviest [0-9a-f]{8}$", lines[2]) is not None,
               "its numbers: %r" % lines[2])
    check_eq(lines[3:6], ["      5 allocations from x  [callers]", "      2 allocations from y  [callers]",
                          "      1 allocation from z  [callers]"], "its callers")
    check_true("leaked:       1 allocation, 333 B never freed\n" in out, "plural in:\n" + out)
    check_true(re.search(r"^temporary:    6 allocations freed before their thread allocated again "
                         r"\(\d+/s, 75\.0% of allocations\)$", out, re.M) is not None,
               "the temporary line in:\n" + out)
    check_true("top 1 function by temporary allocations" in out, "the temporary ranking in:\n" + out)
    check_true("call site" not in out, "no whole-stack ranking by default:\n" + out)


def test_report_sizes_text(tmp):
    """report --sizes: one line per non-empty power-of-two bucket."""
    out = memtrack("report", callers_tracked().artifact.path, "--sizes").stdout
    section = out[out.index("\nallocation sizes (powers of two):\n") + 1:].splitlines()
    check_eq(section[1], "  256 B .. < 512 B                8 allocations    2.6 KiB  " + "#" * 40,
             "the one bucket")
    check_true(section[2] == "" or not section[2].startswith("  "), "only one: %r" % section[:4])
    check_true("allocation sizes" not in memtrack("report", callers_tracked().artifact.path).stdout,
               "not without --sizes")


def test_report_temporary_same_as_heaptrack(tmp):
    """Temporary allocations as heaptrack_print counts them ("temporary memory
    allocations: N"), on callers.c and callsites.c."""
    own_cache(tmp)
    for name, t in (("callers", callers_tracked()), ("callsites", tracked())):
        ht = run(["heaptrack", "-o", tmp / name, fixture(name)], timeout=120)
        require(ht.rc == 0, "heaptrack failed: " + ht.describe())
        pr = run(["heaptrack_print", "-f", tmp / (name + ".zst")])
        m = re.search(r"^temporary memory allocations: (\d+) ", pr.stdout, re.M)
        require(m, "no temporary line in heaptrack_print's output:\n" + pr.stdout[-2000:])
        doc = json.loads(memtrack("report", t.artifact.path, "--json").stdout)
        check_eq(doc["temporary_count"], int(m.group(1)), "%s: temporary, memtrack vs heaptrack" % name)


def test_report_process_table(tmp):
    """fork_many 5: the parent, then its 5 children folded into one row
    (fork_many ×5) with their summed allocations; --sort pid lists all six;
    --pid and --comm keep only the processes asked for."""
    t = track(tmp, [fixture("fork_many"), "5"])
    path = t.artifact.path
    doc = json.loads(memtrack("report", path, "--json").stdout)
    procs = doc["processes"]
    check_eq(len(procs), 6, "six processes in the JSON")
    root, kids = procs[0], procs[1:]
    out = memtrack("report", path).stdout
    check_true("\nprocesses:    6, by peak RSS; 5 short-lived processes folded into 1 row by command\n"
               in out, "the heading in:\n" + out)
    row = "  fork_many \u00d75 (pids %d..%d)" % (kids[0]["pid"], kids[-1]["pid"])
    rows = [ln for ln in out.splitlines() if ln.startswith(row)]
    check_eq(len(rows), 1, "the folded row %r in:\n%s" % (row, out))
    check_true(re.search(r"\b5 allocs +34\.2 KiB  peak heap 6\.8 KiB", rows[0]) is not None,
               "5 allocations of 7000..7004 bytes, the largest 7004: %r" % rows[0])
    bypid = memtrack("report", path, "--sort", "pid").stdout
    check_eq(len([ln for ln in bypid.splitlines() if re.match(r"  \d+ +ppid ", ln)]), 6,
             "--sort pid: six rows:\n" + bypid)
    child = kids[2]
    one = json.loads(memtrack("report", path, "--json", "--pid", child["pid"]).stdout)
    check_eq(([p["pid"] for p in one["processes"]], one["alloc_count"], one["total_allocated_bytes"]),
             ([child["pid"]], 1, child["allocated_bytes"]), "--pid: the child alone")
    check_eq(one["filter"], {"pids": [child["pid"]], "comms": [], "processes_seen": 6}, "the filter")
    text = memtrack("report", path, "--pid", child["pid"]).stdout
    check_true("\nprocesses:    1 of 6 (--pid %d), by peak RSS\n" % child["pid"] in text,
               "the filter in the text:\n" + text)
    both = json.loads(memtrack("report", path, "--json", "--pid", root["pid"], "--pid",
                               kids[0]["pid"]).stdout)
    check_eq([p["pid"] for p in both["processes"]], [root["pid"], kids[0]["pid"]], "two --pid")
    comm = json.loads(memtrack("report", path, "--json", "--comm", "fork_many").stdout)
    check_eq((len(comm["processes"]), comm["alloc_count"]), (6, doc["alloc_count"]), "--comm: all six")
    none = json.loads(memtrack("report", path, "--json", "--comm", "bash").stdout)
    check_eq((none["processes"], none["alloc_count"]), ([], 0), "--comm of no process")
    for args, msg in ((["--pid"], "--pid needs a value"), (["--pid", "x"], "--pid takes a process id"),
                      (["--comm", "a/b"], "--comm takes a command name"),
                      (["--by", "line"], "--by takes function or stack"),
                      (["--sort", "size"], "--sort takes rss, peak")):
        p = memtrack("report", path, *args, rc=2)
        check_true(msg in p.stderr and p.stderr.count("\n") == 1, "%s: %r" % (args, p.stderr))
