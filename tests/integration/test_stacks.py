# SPDX-License-Identifier: MIT
"""Call stacks (track --stacks): the kernel unwinder from .eh_frame rows.

Fixtures whose call trees are known from their source (tests/fixtures/stacks/
stk.c), built at -O2 with and without frame pointers, dynamic and static:
the stack of their one distinctive malloc is resolved here, independently of
memtrack, with binutils' addr2line from the dump's (object, addr) frames and
the object records' paths, and compared with the source's call chain from
the allocator's caller down to the outermost frame.  Debian binaries without
frame pointers (tar, python3) must give complete stacks for >= 99% of their
heap events.  The in-process unwinder (src/fast/unwind.c) is compared
with the kernel's at the same malloc entry (tests/fixtures/stacks/unw.c).

Every case runs on both heap paths (issue 20): "inprocess" (--stacks, the
default path: libmemtrack-fast.so unwinds, its `fast` record says
stacks 1; a static executable cannot preload it and falls back to the
uprobes and the kernel unwinder) and "uprobes" (--stacks --no-fast: the
kernel unwinds); test_paths_agree compares the two frame for frame."""
import os
import re
import subprocess
import time
from collections import defaultdict

import pytest

from mtlib import (MEMTRACK, Artifact, check_eq, check_true, fixture, read_trailer, report_json,
                   require, require_eq, root_pid, run, track)

HEAP = ("malloc", "calloc", "realloc", "aligned_alloc", "mmap")
# main's callers in glibc 2.36, dynamic or static
START = ["main", "__libc_start_call_main", "__libc_start_main_impl", "_start"]
# libc.so's debug info and the static symtab differ; aarch64's clone3.S starts a thread at thread_start
CLONE = {"clone3", "__clone3", "thread_start"}

EXPECTED = {
    "recurse": ["leaf_alloc"] + ["rec"] * 6 + START,
    "thread": ["leaf_alloc", "thread_main", "start_thread", "clone3"],
    "fork": ["leaf_alloc", "fork_child"] + START,
    "exec": ["leaf_alloc"] + ["rec"] * 6 + START,
    "dlopen": ["plugin_inner", "plugin_alloc", "call_plugin"] + START,
    # mmap's stack starts at the return address into the syscall wrapper's caller
    "mmap": ["map_pages"] + START,
}
SIZE = {"recurse": 4201, "thread": 4202, "fork": 4203, "exec": 4201, "dlopen": 4205,
        "mmap": 42 * 4096, "deep": 4206, "deep_mmap": 43 * 4096}
STACK_MAX = 127  # frames a stack holds (MT_STACK_MAX)
PATHS = {"inprocess": ["--stacks"], "uprobes": ["--stacks", "--no-fast"]}


def unwinder(evs, pid):
    """Which unwinder took pid's heap stacks: its last fast record's stacks
    field (1: in-process), or the kernel when it has none."""
    fast = [e for e in by_type(evs, "fast") if e["pid"] == pid]
    if not fast:
        return "kernel"
    return "in-process" if fast[-1]["stacks"] == 1 else "none"


def want_unwinder(path, exe):
    """The unwinder a path must use for exe (static ones cannot preload)."""
    return "in-process" if path == "inprocess" and "static" not in str(exe) else "kernel"


def by_type(evs, t):
    return [e for e in evs if e["type"] == t]


def symbolize(path, addrs):
    """Function names of the return addresses addrs in the ELF file path, by
    addr2line of addr - 1 (the call instruction)."""
    p = subprocess.run(["addr2line", "-f", "-e", path] + ["%x" % (a - 1) for a in addrs],
                       capture_output=True, text=True, timeout=60)
    require(p.returncode == 0, "addr2line -e %s failed: %s" % (path, p.stderr))
    return p.stdout.splitlines()[0::2]


def frame_names(objects, stack):
    """The function names of stack's frames, one addr2line per object."""
    frames = stack["frames"]
    for obj, _ in frames:
        require(obj in objects, "frame object %d has an object record" % obj)
    names = [None] * len(frames)
    for obj in set(o for o, _ in frames):
        at = [i for i, (o, _) in enumerate(frames) if o == obj]
        for i, name in zip(at, symbolize(objects[obj]["path"], [frames[i][1] for i in at])):
            names[i] = name
    return names


def build_id(path):
    p = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return ""


def check_mappings(evs, pid, stack, what):
    """Every frame lies in a mapping record of pid for its object."""
    maps = [m for m in by_type(evs, "mapping") if m["pid"] == pid]
    for obj, addr in stack["frames"]:
        ok = any(m["object"] == obj and m["start"] <= addr + m["bias"] < m["end"] for m in maps)
        check_true(ok, "%s: frame (%d, %#x) lies in a mapping of pid %d" % (what, obj, addr, pid))


def the_stack(tmp, argv, mode, path="inprocess", opts=None):
    """Tracks argv with --stacks on path (or with @opts instead of the
    path's): its events, objects by id, the one record of SIZE[mode] bytes
    (an mmap for the *mmap modes, else a malloc), its stack record and the
    stack's function names."""
    evs = track(tmp, argv, opts=PATHS[path] if opts is None else opts,
                name=path + ".mtrk").events
    objects = {o["id"]: o for o in by_type(evs, "object")}
    stacks = {}
    for s in by_type(evs, "stack"):
        stacks.setdefault(s["id"], s)
    if mode.endswith("mmap"):
        allocs = [e for e in by_type(evs, "mmap") if e["len"] == SIZE[mode]]
    else:
        allocs = [e for e in by_type(evs, "malloc") if e["size"] == SIZE[mode]]
    require_eq(len(allocs), 1, "%s records of %d bytes" % (mode, SIZE[mode]))
    a = allocs[0]
    require(a["stack"] in stacks, "the record's stack %d has a stack record" % a["stack"])
    s = stacks[a["stack"]]
    return evs, objects, a, s, frame_names(objects, s)


VARIANTS = [(v, m) for v in ("fp", "nofp") for m in EXPECTED] + \
           [(v, m) for v in ("static_fp", "static_nofp") for m in EXPECTED if m != "dlopen"]


def fixture_argv(variant, mode):
    exe = fixture("stk_" + variant)
    argv = [exe, mode]
    if mode == "exec":
        argv.append(exe)
    if mode == "dlopen":
        argv.append(fixture("libstkplugin_%s.so" % variant))
    return exe, argv


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("variant,mode", VARIANTS, ids=["%s-%s" % vm for vm in VARIANTS])
def test_fixture_stack(tmp, variant, mode, path):
    exe, argv = fixture_argv(variant, mode)
    evs, objects, a, s, names = the_stack(tmp, argv, mode, path)
    if not mode.endswith("mmap"):  # an mmap's stack is the kernel's on both paths
        check_eq(unwinder(evs, a["pid"]), want_unwinder(path, exe), "the unwinder that ran")
    want = list(EXPECTED[mode])
    if mode == "thread" and names and names[-1] in CLONE:
        want[-1] = names[-1]
    check_eq(names, want, "functions of the stack, innermost first")
    check_eq(s["truncated"], 0, "truncated")
    # the stack record precedes the record that names it
    check_true(s["ts"] <= a["ts"], "stack record before its malloc")
    # frame 0 is in the fixture itself (or its plugin), named by path and build-id
    first = objects[s["frames"][0][0]]
    path = argv[-1] if mode == "dlopen" else exe
    check_eq(first["path"], path, "object of frame 0")
    check_eq(first["build_id"], build_id(path), "its build-id (readelf -n)")
    check_mappings(evs, a["pid"], s, "%s %s" % (variant, mode))
    if mode == "fork":
        check_true(a["pid"] != root_pid(evs), "the malloc is the child's")
    # object ids are unique, each written once
    ids = [o["id"] for o in by_type(evs, "object")]
    check_eq(len(ids), len(set(ids)), "object records are distinct")
    check_true(all(i > 0 for i in ids), "object ids > 0")


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("variant", ["fp", "nofp"])
@pytest.mark.parametrize("mode", ["deep", "deep_mmap"])
def test_fixture_stack_truncated(tmp, variant, mode, path):
    """201 frames of deep() below main: the stack keeps the innermost
    STACK_MAX frames and says it is truncated, on the heap path and at the
    mmap syscall alike (the limit the unwinder checks every frame)."""
    exe = fixture("stk_" + variant)
    evs, objects, a, s, names = the_stack(tmp, [exe, mode], mode, path)
    first = "map_pages" if mode == "deep_mmap" else "leaf_alloc"
    check_eq(names, [first] + ["deep"] * (STACK_MAX - 1), "functions of the stack, innermost first")
    check_eq(s["truncated"], 1, "truncated")
    check_eq(objects[s["frames"][0][0]]["path"], exe, "object of frame 0")
    check_mappings(evs, a["pid"], s, "%s %s" % (variant, mode))


def complete_share(evs):
    """Share of the heap and mmap events whose stack is complete (reaches
    main's caller or the thread's start), and the truncated stacks by the
    object of their last frame."""
    stacks = {}
    for s in by_type(evs, "stack"):
        stacks.setdefault(s["id"], s)
    objects = {o["id"]: o["path"] for o in by_type(evs, "object")}
    heap = [e for e in evs if e["type"] in HEAP]
    ok = sum(1 for e in heap if e["stack"] in stacks and not stacks[e["stack"]]["truncated"])
    where = defaultdict(int)
    for s in stacks.values():
        if s["truncated"]:
            where[objects.get(s["frames"][-1][0], "[unknown]")] += 1
    return ok, len(heap), dict(where)


def completeness(tmp, cmd, min_events):
    """The complete share on both paths, printed (the issue's figure); on
    each >= 99%, and the in-process path's no lower than the kernel's."""
    share = {}
    for path in sorted(PATHS):
        t = track(tmp, cmd, opts=PATHS[path], name=path + ".mtrk")
        ok, n, where = complete_share(t.events)
        require(n > min_events, "%s made %d heap events on %s" % (cmd, n, path))
        if path == "inprocess":
            root = root_pid(t.events)
            check_eq(unwinder(t.events, root), "in-process", "the root's unwinder")
        check_true(ok >= 0.99 * n, "%s: complete stacks: %d of %d (%.4f); truncated in %s"
                   % (path, ok, n, ok / n, where))
        share[path] = ok / n
        print("completeness %s %s: %d of %d = %.5f" % (path, cmd, ok, n, ok / n))
    check_true(share["inprocess"] >= share["uprobes"] - 0.001,
               "in-process completeness %.5f against the kernel's %.5f"
               % (share["inprocess"], share["uprobes"]))


def test_tar_stacks_complete(tmp):
    completeness(tmp, "tar -cf - /usr/include >/dev/null 2>&1", 10000)


def test_python_stacks_complete(tmp):
    script = "import json; print(len(json.dumps([dict(a=i) for i in range(1000)])))"
    completeness(tmp, ["/usr/bin/python3", "-c", script], 1000)


def test_stacks_by_default(tmp):
    """track records stacks unasked: the recursion's malloc has the frames
    (object path, address) and truncation mark of a --stacks run, unwound
    in-process.  --no-stacks records none, and so does --no-allocators
    alone (stacks need the heap probes: it runs, without them)."""
    argv = [fixture("stk_nofp"), "recurse"]
    got = {}
    for name, opts in (("default", []), ("given", ["--stacks"])):
        evs, objects, _, s, names = the_stack(tmp, argv, "recurse", name, opts)
        got[name] = ([(objects[o]["path"], addr) for o, addr in s["frames"]], s["truncated"])
        check_eq(unwinder(evs, root_pid(evs)), "in-process", "%s: the unwinder" % name)
        check_eq(names[:len(EXPECTED["recurse"])], EXPECTED["recurse"],
                 "%s: the stack's innermost functions" % name)
    check_eq(got["default"], got["given"], "frames and truncation, default against --stacks")
    for opts in (["--no-stacks"], ["--no-allocators"]):
        evs = track(tmp, argv, opts=opts, name="%s.mtrk" % opts[0][2:]).events
        check_eq([e["type"] for e in evs if e["type"] in ("object", "mapping", "stack")], [],
                 "stack-related records with %s" % opts[0])
        check_eq(sorted({e["stack"] for e in evs if e["type"] in HEAP}), [0],
                 "stack ids of heap records with %s" % opts[0])


def test_stacks_dedup(tmp):
    """One stack record per distinct stack: the 6 recursion levels of one
    call site share one id when called twice (exec runs recurse again in a
    new image: its frames are the same objects and addresses)."""
    exe = fixture("stk_nofp")
    t = track(tmp, [exe, "exec", exe], opts=["--stacks"])
    ids = [s["id"] for s in by_type(t.events, "stack")]
    check_eq(len(ids), len(set(ids)), "stack ids written once")
    check_true(all(e["stack"] in set(ids) for e in t.events if e["type"] in HEAP),
               "every heap record names a written stack")


def test_stacks_needs_allocators(tmp):
    t = track(tmp, [fixture("stk_nofp"), "recurse"], opts=["--stacks", "--no-allocators"],
              expect_rc=2)
    check_true("drop --no-allocators" in t.stderr, "message names the fix: " + t.stderr)


def test_stacks_with_fast(tmp):
    """--fast --stacks: the in-process path unwinds (it used to be refused)."""
    t = track(tmp, [fixture("stk_nofp"), "recurse"], opts=["--stacks", "--fast"])
    evs = t.events
    check_eq(unwinder(evs, root_pid(evs)), "in-process", "the unwinder that ran")
    stacks = {s["id"] for s in by_type(evs, "stack")}
    heap = [e for e in evs if e["type"] in ("malloc", "calloc", "realloc", "aligned_alloc")]
    check_true(heap and all(e["stack"] in stacks for e in heap),
               "every heap record names a written stack")


def test_no_stacks_fast_record(tmp):
    """With --no-stacks the library takes none: its fast record says 0."""
    evs = track(tmp, [fixture("stk_nofp"), "recurse"], opts=["--no-stacks"]).events
    check_eq(unwinder(evs, root_pid(evs)), "none", "the fast record's stacks field")


@pytest.mark.parametrize("variant,mode", VARIANTS + [(v, "deep") for v in ("fp", "nofp")],
                         ids=["%s-%s" % vm for vm in VARIANTS] + ["fp-deep", "nofp-deep"])
def test_paths_agree(tmp, variant, mode):
    """The same stack on both paths, frame for frame: the same (object
    path, ELF address) frames, the same truncation mark, and each run's id
    is unwind.bpf.h's hash of its frames under that run's object ids (the
    ids themselves differ between runs: the in-process run maps one more
    object, the library)."""
    exe, argv = fixture_argv(variant, mode)
    got = {}
    for path in sorted(PATHS):
        evs, objects, a, s, names = the_stack(tmp, argv, mode, path)
        check_eq(s["id"], fnv_stack_id(s["frames"], s["truncated"]), "%s: the stack's id" % path)
        got[path] = ([(objects[o]["path"], addr) for o, addr in s["frames"]], s["truncated"])
    check_eq(got["inprocess"], got["uprobes"], "frames and truncation, in-process against uprobes")


def fnv_stack_id(frames, truncated):
    """unwind.bpf.h's stack id of (object, addr) frames."""
    h = 0xcbf29ce484222325
    for obj, addr in frames:
        h = ((h ^ obj) * 0x100000001b3) & (2**64 - 1)
        h = ((h ^ addr) * 0x100000001b3) & (2**64 - 1)
    return (h ^ (0x9e3779b97f4a7c15 if truncated else 0)) | 1


UNW_SIZE = {"recurse": 5101, "thread": 5102, "deep": 5106, "corrupt": 5107, "signal": 5108,
            "altstack": 5109}
# the signal modes: leaf, on_signal, then libc's __restore_rt, whose row is unknown
UNW_FRAMES = {"recurse": 11, "thread": 4, "deep": STACK_MAX, "corrupt": 2, "signal": 3,
              "altstack": 3}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("variant", ["fp", "nofp"])
@pytest.mark.parametrize("mode", sorted(UNW_SIZE))
def test_inprocess_unwind_matches_kernel(tmp, variant, mode, path):
    """The in-process unwinder (src/fast/unwind.c, in the fixture with
    tables it builds as stacks.c does) and the kernel's, at the same malloc
    entry: the same (object path, ELF address) frames, the same truncation
    mark, and the kernel's stack id is FNV-1a over the in-process frames
    under memtrack's object ids.  corrupt overwrites its saved rbp and
    return address: both stop there, truncated, and the program runs to
    its end.  signal and altstack allocate in a signal handler, on the
    thread's stack and on an alternate one: both stop at the signal frame.
    On the inprocess path the recorded stack is libmemtrack-fast.so's
    (the corrupt chain runs to its end under it too)."""
    out = tmp / "inprocess.txt"
    t = track(tmp, [fixture("unw_" + variant), mode, out], opts=PATHS[path])
    words = out.read_text().split()
    truncated, n = int(words[0]), int(words[1])
    mine = [(words[2 + 2 * i], int(words[3 + 2 * i])) for i in range(n)]
    evs = t.events
    objects = {o["id"]: o["path"] for o in by_type(evs, "object")}
    ids = {p: i for i, p in objects.items()}
    stacks = {}
    for s in by_type(evs, "stack"):
        stacks.setdefault(s["id"], s)
    allocs = [e for e in by_type(evs, "malloc") if e["size"] == UNW_SIZE[mode]]
    require_eq(len(allocs), 1, "malloc records of %d bytes" % UNW_SIZE[mode])
    require(allocs[0]["stack"] in stacks, "the malloc's stack has a stack record")
    check_eq(unwinder(evs, allocs[0]["pid"]), want_unwinder(path, "unw"), "the unwinder that ran")
    s = stacks[allocs[0]["stack"]]
    kernel = [(objects.get(o, "-"), a) for o, a in s["frames"]]
    check_eq(mine, kernel, "in-process frames against the kernel's")
    check_eq(truncated, s["truncated"], "truncated, in-process against the kernel's")
    check_eq(n, UNW_FRAMES[mode], "frames")
    check_eq(truncated, int(mode not in ("recurse", "thread")), "truncated")
    check_true(all(p in ids for p, _ in mine), "every in-process frame's object has a record")
    check_eq(fnv_stack_id([(ids.get(p, 0), a) for p, a in mine], truncated), s["id"],
             "stack id of the in-process frames")


# ---- issue 20: a corrupt frame chain, the tables' size, the unwinder, --no-stacks

PAGE = 4096
CHUNK_ROWS, CHUNK_INDEX = 16384, 16384  # bpf_abi.h: MT_UNWIND_CHUNK_ROWS, _INDEX
ROW_BYTES = 16
CORRUPT_SIZE = {"unmapped": 7301, "loop": 7302}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("mode", sorted(CORRUPT_SIZE))
def test_corrupt_frame_chain(tmp, path, mode):
    """tests/fixtures/frame_corrupt.c overwrites its saved rbp and return
    address, mallocs and longjmps out: it runs to its end (exit 0, "done"),
    and the malloc's stack stops at the corrupt frame, truncated.  unmapped:
    the caller is 0x1000, in no file: exactly two frames, the malloc's
    caller in the fixture and (0, 0x1000).  loop: a chain through .bss that
    points at itself: the kernel, which reads any user memory, follows it
    to the frame limit (the first frame, then the same return address);
    the in-process unwinder, which reads the thread's stack only, stops at
    the first frame outside it."""
    exe = fixture("frame_corrupt")
    t = track(tmp, [exe, mode], opts=PATHS[path])
    check_true("done" in t.stdout, "the fixture ran to its end: %r" % t.stdout)
    rep = t.report
    check_eq(rep["exit_code"], 0, "the fixture's exit code")
    check_eq(rep["dropped_events"], 0, "dropped events")
    evs = t.events
    objects = {o["id"]: o["path"] for o in by_type(evs, "object")}
    stacks = {s["id"]: s for s in by_type(evs, "stack")}
    allocs = [e for e in by_type(evs, "malloc") if e["size"] == CORRUPT_SIZE[mode]]
    require_eq(len(allocs), 1, "malloc records of %d bytes" % CORRUPT_SIZE[mode])
    require(allocs[0]["stack"] in stacks, "the malloc's stack has a stack record")
    s = stacks[allocs[0]["stack"]]
    check_eq(s["truncated"], 1, "the stack is marked truncated")
    frames = s["frames"]
    check_eq(objects.get(frames[0][0]), exe, "frame 0 (the malloc's caller, smash) is the fixture's")
    check_eq(symbolize(exe, [frames[0][1]]), ["smash"], "frame 0's function")
    if mode == "unmapped":
        check_eq(frames[1:], [[0, 0x1000]], "the corrupt return address ends the stack")
    elif path == "uprobes":
        check_eq(len(frames), STACK_MAX, "the kernel follows the loop to the frame limit")
        check_eq({(o, a) for o, a in frames[1:]}, {tuple(frames[1])},
                 "one return address repeated")
        check_eq(objects.get(frames[1][0]), exe, "inside smash")
    else:
        check_true(len(frames) <= 2, "the in-process unwinder stops off the stack: %r" % frames)
    procs = [p for p in rep["processes"] if p["pid"] == allocs[0]["pid"]]
    check_eq([p["unwinder"] for p in procs], ["kernel" if path == "uprobes" else "in-process"],
             "report --json's unwinder")


def verbose_stacks_line(stderr):
    """The numbers of track -v's "stacks:" line: objects, rows, rows_cap, KiB, no CFI, no room."""
    line = [ln for ln in stderr.splitlines() if ln.startswith("memtrack: stacks: ")]
    require_eq(len(line), 1, "track -v's stacks line")
    w = line[0].split()
    return {"objects": int(w[2]), "rows": int(w[4]), "rows_cap": int(w[8]),
            "kib": int(w[9].lstrip("(")), "no_cfi": int(w[12]), "no_room": int(w[15])}


def table_bytes(rows, index, rows_cap):
    """stacks.c's kernel bytes for rows and index entries under a ceiling:
    the outer maps' slots (a pointer each), then every chunk created (a
    page of header, its entries' pages)."""
    per_row, per_index = min(rows_cap, CHUNK_ROWS), min(rows_cap, CHUNK_INDEX)
    slots = -(-rows_cap // CHUNK_ROWS) + -(-rows_cap // CHUNK_INDEX)
    rows_chunks, index_chunks = -(-rows // per_row), -(-index // per_index)

    def pages(n):
        return -(-n // PAGE) * PAGE
    return (8 * slots + rows_chunks * (PAGE + pages(per_row * ROW_BYTES))
            + index_chunks * (PAGE + pages(per_index * 8)))


def test_unwind_tables_sized_to_the_tree(tmp):
    """The kernel holds the rows of what the tree maps, in 16K-row chunks,
    not the 1M-row ceiling's 16 MiB: for a small program, exactly the
    chunks its rows and index entries need; the trailer, report --json and
    track -v's statistics give the same numbers."""
    p = run([MEMTRACK, "track", "-v", "--stacks", "-o", str(tmp / "small.mtrk"), "--",
             fixture("stk_nofp"), "recurse"])
    require_eq(p.rc, 0, "track's exit status: " + p.describe())
    v = verbose_stacks_line(p.stderr)
    rep = report_json(tmp / "small.mtrk")
    tr = read_trailer(tmp / "small.mtrk")
    check_eq(rep["stack_rows"], v["rows"], "rows: report --json against track -v")
    check_eq(rep["stack_rows_cap"], 1 << 20, "the default ceiling")
    check_eq(rep["stack_objects"], v["objects"], "objects")
    check_eq((rep["stack_no_room"], rep["stack_no_cfi"]), (0, v["no_cfi"]), "without room, CFI")
    check_eq(rep["stack_table_bytes"] >> 10, v["kib"], "table KiB: report --json against track -v")
    check_eq(tr["stack_table_bytes"], rep["stack_table_bytes"], "the trailer's stack_table_bytes")
    check_eq(rep["stack_table_bytes"],
             table_bytes(rep["stack_rows"], rep["stack_index_entries"], 1 << 20),
             "table bytes: the chunks the rows (%d) and index (%d) need"
             % (rep["stack_rows"], rep["stack_index_entries"]))
    check_true(0 < rep["stack_rows"] < 4 * CHUNK_ROWS, "a small program's rows: %d" % rep["stack_rows"])
    check_true(rep["stack_table_bytes"] <= (16 << 20) // 8,
               "table bytes %d far below the 16 MiB the ceiling takes" % rep["stack_table_bytes"])


def test_unwind_rows_ceiling(tmp):
    """--unwind-rows stays a ceiling: with 1024 rows the small executable
    fits and libc (tens of thousands of rows) does not: it is counted in
    stack_no_room, the malloc's stack ends, truncated, at the first frame in
    libc, and the kernel holds one 1024-row chunk (and one index chunk)."""
    exe = fixture("stk_nofp")
    t = track(tmp, [exe, "recurse"], opts=["--stacks", "--unwind-rows", "1024"])
    rep = t.report
    check_eq(rep["stack_rows_cap"], 1024, "the ceiling")
    check_true(0 < rep["stack_rows"] <= 1024, "rows loaded: %d" % rep["stack_rows"])
    check_true(rep["stack_no_room"] >= 1, "objects without room: %d" % rep["stack_no_room"])
    check_eq(rep["stack_table_bytes"], table_bytes(rep["stack_rows"], rep["stack_index_entries"], 1024),
             "table bytes under a 1024-row ceiling")
    evs = t.events
    objects = {o["id"]: o["path"] for o in by_type(evs, "object")}
    stacks = {s["id"]: s for s in by_type(evs, "stack")}
    allocs = [e for e in by_type(evs, "malloc") if e["size"] == SIZE["recurse"]]
    require_eq(len(allocs), 1, "the recurse malloc")
    s = stacks[allocs[0]["stack"]]
    check_eq(s["truncated"], 1, "truncated: libc has no rows")
    names = frame_names({i: {"path": p} for i, p in objects.items()}, s)
    check_eq(names, ["leaf_alloc"] + ["rec"] * 6 + ["main", "__libc_start_call_main"],
             "the stack down to the first frame in libc")
    check_true("libc" in objects[s["frames"][-1][0]], "the last frame is libc's: %s"
               % objects[s["frames"][-1][0]])


def test_unwinder_in_report(tmp):
    """report says per process which unwinder gave its stacks: kernel for a
    process on the uprobes with --stacks (the child's malloc; the parent
    allocates nothing, its mmaps' stacks are the kernel's too), none
    without --stacks (JSON key unwinder; the text report's process line
    when stacks were recorded)."""
    exe = fixture("stk_nofp")
    t = track(tmp, [exe, "fork"], opts=["--stacks", "--no-fast"])
    procs = t.report["processes"]
    check_eq([p["unwinder"] for p in procs], ["kernel", "kernel"], "parent and child: kernel")
    text = run([MEMTRACK, "report", t.artifact.path]).stdout
    check_eq(sum(1 for ln in text.splitlines() if ln.rstrip().endswith("unwinder kernel")), 2,
             "text report: 'unwinder kernel' on both process lines:\n" + text)
    t2 = track(tmp, [exe, "fork"], opts=["--no-stacks"], name="nostacks.mtrk")
    check_eq([p["unwinder"] for p in t2.report["processes"]], ["none", "none"], "without --stacks")
    check_eq(t2.report["stack_table_bytes"], None, "no tables without --stacks")
    text = run([MEMTRACK, "report", t2.artifact.path]).stdout
    check_true("unwinder" not in text and "unwind tables" not in text,
               "no unwinder in the text report without stacks")


def stack_records(evs):
    return [e for e in evs if e["type"] in ("object", "mapping", "stack")]


@pytest.mark.parametrize("order", ["stacks-then-no", "no-then-stacks"])
def test_no_stacks_option(tmp, order):
    """track --no-stacks turns stacks off; of --stacks and --no-stacks the
    last one given wins."""
    opts = ["--stacks", "--no-stacks"] if order == "stacks-then-no" else ["--no-stacks", "--stacks"]
    t = track(tmp, [fixture("stk_nofp"), "recurse"], opts=opts + ["--no-fast"])
    on = order == "no-then-stacks"
    check_eq(bool(stack_records(t.events)), on, "stack records")
    check_eq(t.report["stack_table_bytes"] is not None, on, "stack tables in report --json")
    check_eq({e["stack"] != 0 for e in t.events if e["type"] == "malloc"}, {on},
             "heap records name stacks")


def test_attach_no_stacks(tmp):
    """attach --no-stacks likewise: after --stacks it turns them off, before
    it it leaves them on."""
    from test_attach import start_attach, start_fixture, stop_attach, stop_fixture
    srv, srv_out = start_fixture([fixture("server")])
    try:
        for name, opts, on in (("off", ["--stacks", "--no-stacks"], False),
                               ("on", ["--no-stacks", "--stacks"], True)):
            out = tmp / ("%s.mtrk" % name)
            mt, err = start_attach(srv.pid, out, opts)
            time.sleep(0.5)
            rc, lines = stop_attach(mt, err)
            check_eq(rc, 0, "attach %s: exit status (%r)" % (opts, lines))
            rep = report_json(out)
            check_eq(rep["stack_table_bytes"] is not None, on, "attach %s: stack tables" % opts)
            evs = Artifact(out).events
            check_eq(any(e["type"] == "object" for e in evs), on, "attach %s: object records" % opts)
    finally:
        stop_fixture(srv, srv_out)


def peak_section(text):
    """The "top N functions by peak heap" section of a text report."""
    lines = text.splitlines()
    at = [i for i, ln in enumerate(lines) if re.match(r"top \d+ functions? by peak heap", ln)]
    require_eq(len(at), 1, "one peak-heap ranking in:\n" + text)
    end = at[0] + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[at[0]:end]


def test_report_text_top3_by_peak(tmp):
    """Stacks recorded: the text report ends with the 3 functions with the
    most peak heap, as report --top 3 ranks them (callsites.c has 2
    functions with bytes at the peak: b's 12000, c's 200); without stacks,
    none."""
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    exe = fixture("callsites")
    t = track(tmp, [exe], opts=["--stacks"])
    text = run([MEMTRACK, "report", t.artifact.path]).stdout
    top = run([MEMTRACK, "report", t.artifact.path, "--top", "3"]).stdout
    brief = peak_section(text)
    check_eq(brief[0], "top 2 functions by peak heap (bytes live at the tree's heap peak):",
             "the brief's title")
    check_eq(brief[1:-1], peak_section(top)[1:], "the brief's functions, as report --top 3 gives them")
    check_eq(brief[-1], "  (memtrack report --top N: more functions and rankings)", "its hint")
    check_eq(brief[1], "  #1  b  [callsites]  tests/fixtures/callsites.c", "b first")
    check_true(re.match(r"      11\.7 KiB at peak, 3 allocations", brief[2]) is not None,
               "b's numbers: %r" % brief[2])
    t2 = track(tmp, [exe], opts=["--no-stacks"], name="nostacks.mtrk")
    text = run([MEMTRACK, "report", t2.artifact.path]).stdout
    check_true("call site" not in text, "no call sites without stacks:\n" + text)
