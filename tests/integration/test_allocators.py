# SPDX-License-Identifier: MIT
"""Allocators beyond glibc's malloc, and processes that allocate before
memtrack sees them the usual way: every C++ operator form, jemalloc
(linked, static, preloaded, dlopen'd from a second thread, exec'd later),
mimalloc, tcmalloc, a vfork child and a posix_spawn child.  Each fixture
prints its blocks' addresses; the records between its markers must be
exactly the expected ones (type, fn, size, addresses), nothing twice."""
from mtlib import (check_eq, fixture, heap, kv_lines, proj, require, root_pid,
                   track, window)

JEMALLOC_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def heap_window(t, pid=None):
    pid = root_pid(t.events) if pid is None else pid
    return [proj(e) for e in heap(window(t.events, pid))]


def H(typ, addr, size=None, fn=None, **kw):
    e = {"type": typ, "addr": addr}
    if fn:
        e["fn"] = fn
    if size is not None:
        e["size"] = size
    e.update(kw)
    return e


def test_cxx_every_operator_form(tmp):
    t = track(tmp, [fixture("cxx_ops")])
    a = kv_lines(t.stdout)
    check_eq((a["fail"], a["caught"]), (0, 1), "failed nothrow new, caught bad_alloc")
    news = [H("malloc", a["n1"], 1001, "operator new"),
            H("malloc", a["n2"], 1002, "operator new[]"),
            H("malloc", a["n3"], 1003, "operator new(nothrow)"),
            H("malloc", a["n4"], 1004, "operator new[](nothrow)"),
            H("aligned_alloc", a["n5"], 1005, "operator new(align)", align=64),
            H("aligned_alloc", a["n6"], 1006, "operator new[](align)", align=128),
            H("aligned_alloc", a["n7"], 1007, "operator new(align, nothrow)", align=64),
            H("aligned_alloc", a["n8"], 1008, "operator new[](align, nothrow)", align=64),
            H("malloc", a["n9"], 1009, "operator new"),
            H("malloc", a["n10"], 1010, "operator new[]")]
    deletes = [H("free", a["n%d" % i], fn=fn) for i, fn in enumerate(
        ["operator delete", "operator delete[]", "operator delete(size)",
         "operator delete[](size)", "operator delete(align)", "operator delete[](align)",
         "operator delete(size, align)", "operator delete[](size, align)",
         "operator delete(nothrow)", "operator delete[](nothrow)"], 1)]
    got = heap_window(t)
    # the thrown bad_alloc: libstdc++ allocates its exception object
    # (__cxa_allocate_exception -> malloc) and frees it once caught
    exc = [e for e in got if "fn" not in e]
    check_eq([(e["type"], e.get("size")) for e in exc],
             [("malloc", exc[0]["size"]), ("free", None)] * 2 if exc else [],
             "the exception objects (malloc + free, twice: nothrow new catches one)")
    check_eq([e for e in got if "fn" in e], news + deletes,
             "operator new/delete records between the markers")


def test_vfork_child_allocates_before_exec(tmp):
    t = track(tmp, [fixture("vfork_alloc")])
    a = kv_lines(t.stdout)
    child = a["child"]
    mine = [proj(e) for e in heap(t.events) if e["pid"] == child and e.get("size") != 7772]
    check_eq(mine[:2], [H("malloc", a["block"], 7771), H("free", a["block"])],
             "the vfork child's heap records before its exec (pid %d)" % child)
    check_eq(len([e for e in heap(t.events) if e.get("size") == 7771]), 1,
             "malloc(7771) recorded once, for the child only")
    check_eq([e["type"] for e in heap_window(t)], ["malloc", "free"],
             "the parent's own records between its markers (malloc(7772) + free)")


def test_posix_spawn_child(tmp):
    t = track(tmp, [fixture("spawn_alloc")])
    lines = t.stdout.split()
    blocks = [int(lines[i + 1]) for i, w in enumerate(lines) if w == "block"]
    child = int(lines[lines.index("child") + 1])
    recs = [proj(e) for e in heap(t.events) if e.get("size") == 7781
            or (e["type"] == "free" and e["pid"] == child and e["addr"] in blocks)]
    check_eq(recs, [r for b in blocks for r in (H("malloc", b, 7781), H("free", b))],
             "the spawned child's mallocs of 7781 and their frees")
    check_eq({e["pid"] for e in heap(t.events) if e.get("size") == 7781}, {child},
             "attributed to the child")


def jemalloc_expected(a):
    return [H("malloc", a["m"], 3001), H("calloc", a["c"], 3003),
            H("realloc", a["r"], 3003, old_addr=a["m"]),
            H("aligned_alloc", a["al"], 3004, align=256),
            H("aligned_alloc", a["pm"], 3005, "posix_memalign", align=512),
            H("malloc", a["x"], 3010, "mallocx"),
            H("calloc", a["xz"], 3011, "mallocx"),
            H("aligned_alloc", a["xa"], 3012, "mallocx", align=1024),
            H("realloc", a["rx"], 6000, "rallocx", old_addr=a["x"]),
            H("realloc", a["rx"], 6001, "xallocx", old_addr=a["rx"]),
            H("free", a["rx"], fn="sdallocx"), H("free", a["xz"], fn="dallocx"),
            H("free", a["xa"], fn="dallocx"), H("free", a["pm"]), H("free", a["al"]),
            H("free", a["c"]), H("free", a["r"])]


def test_jemalloc_linked(tmp):
    t = track(tmp, [fixture("alloc_jemalloc")])
    a = kv_lines(t.stdout)
    require(a["grown"] >= 6001, "xallocx grew the block in place (%d)" % a["grown"])
    check_eq(heap_window(t), jemalloc_expected(a), "heap records between the markers")


def test_jemalloc_static(tmp):
    t = track(tmp, [fixture("alloc_jemalloc_static")])
    check_eq(heap_window(t), jemalloc_expected(kv_lines(t.stdout)),
             "heap records between the markers")


def test_static_allocator_exec_later(tmp):
    """sh -c "./a; ./b": b is exec'd later and has its allocator linked in
    statically; it is attached before its first allocation."""
    t = track(tmp, "%s > /dev/null; %s" % (fixture("heap_pairs"), fixture("alloc_jemalloc_static")))
    execs = [e for e in t.events if e["type"] == "exec"
             and e["path"].endswith("alloc_jemalloc_static")]
    require(len(execs) == 1, "one exec of alloc_jemalloc_static")
    check_eq(heap_window(t, execs[0]["pid"]), jemalloc_expected(kv_lines(t.stdout)),
             "heap records between the markers")


def test_jemalloc_preloaded_counts_once(tmp):
    """jemalloc replaces malloc through LD_PRELOAD: both it and libc define
    malloc/free; each call is recorded once."""
    t = track(tmp, ["env", "LD_PRELOAD=" + JEMALLOC_SO, fixture("heap_pairs")])
    addrs = [int(x) for x in t.stdout.split()]
    require(len(addrs) == 3, "addresses the fixture printed")
    pid = root_pid(t.events)
    check_eq(heap_window(t, pid), [H("malloc", x, 4099) for x in addrs]
             + [H("free", x) for x in addrs], "heap records between the markers")


def test_mimalloc_linked(tmp):
    t = track(tmp, [fixture("alloc_mimalloc")])
    a = kv_lines(t.stdout)
    # mi_malloc, mi_calloc, mi_realloc and mi_free are malloc, calloc,
    # realloc and free themselves in libmimalloc (one address, one name)
    check_eq(heap_window(t), [
        H("malloc", a["m"], 4001), H("calloc", a["z"], 4002, "mi_zalloc"),
        H("calloc", a["c"], 4004), H("realloc", a["r"], 8000, old_addr=a["m"]),
        H("aligned_alloc", a["al"], 4020, "mi_malloc_aligned", align=256),
        H("free", a["al"]), H("free", a["c"]), H("free", a["z"]), H("free", a["r"])],
        "heap records between the markers")


def test_tcmalloc_linked(tmp):
    t = track(tmp, [fixture("alloc_tcmalloc")])
    a = kv_lines(t.stdout)
    # tcmalloc's tc_* are aliases: tc_newarray is operator new's address
    # (recorded as operator new), tc_delete and tc_deletearray free's
    check_eq(heap_window(t), [
        H("malloc", a["m"], 5001), H("calloc", a["c"], 5005),
        H("realloc", a["r"], 9000, old_addr=a["m"]),
        H("malloc", a["n"], 5003, "operator new"), H("malloc", a["na"], 5004, "operator new"),
        H("free", a["na"]), H("free", a["n"]), H("free", a["c"]), H("free", a["r"])],
        "heap records between the markers")


def test_dlopen_allocator_second_thread(tmp):
    """mimalloc dlopen'd after start-up by a second thread: its calls are
    recorded from the first (the process is parked at the library's
    executable mapping until it is attached)."""
    t = track(tmp, [fixture("dlopen_thread")])
    lines = t.stdout.split()
    tid = int(lines[1])
    blocks = [int(lines[i + 1]) for i, w in enumerate(lines) if w == "block"]
    require(len(blocks) == 3 and all(blocks), "the fixture's blocks: %s" % blocks)
    recs = [proj(e) for e in heap(t.events) if e["tid"] == tid and
            (e.get("fn") == "mi_malloc_aligned" or (e["type"] == "free" and e["addr"] in blocks))]
    check_eq(recs, [r for i, b in enumerate(blocks)
                    for r in (H("aligned_alloc", b, 3100 + i, "mi_malloc_aligned", align=64),
                              H("free", b))],
             "the second thread's mi_malloc_aligned/mi_free through the dlopen'd mimalloc")


def test_rust_system_allocator(tmp):
    """Rust's default allocator is libc's: std's System allocator calls
    malloc, calloc (alloc_zeroed), realloc, posix_memalign (alignment above
    16) and free; each recorded once with the size Rust asked for."""
    t = track(tmp, [fixture("alloc_rust_system")])
    a = kv_lines(t.stdout)
    check_eq(heap_window(t), [
        H("malloc", a["m"], 4001),
        H("calloc", a["z"], 4002),
        H("realloc", a["r"], 4003, old_addr=a["m"]),
        H("aligned_alloc", a["a"], 4004, "posix_memalign", align=64),
        H("malloc", a["b"], 4008),
        H("free", a["b"]), H("free", a["a"]), H("free", a["z"]), H("free", a["r"])],
        "heap records between the markers")


def test_rust_jemalloc_prefixed(tmp):
    """A Rust program on Debian's jemalloc-sys crate: jemalloc built with
    the `_rjem_` prefix and linked statically into a dynamic executable;
    Rust's global allocator calls _rjem_mallocx/_rjem_rallocx/_rjem_sdallocx,
    recorded under jemalloc's own names."""
    t = track(tmp, [fixture("alloc_rust_jemalloc")])
    a = kv_lines(t.stdout)
    check_eq(heap_window(t), [
        H("malloc", a["m"], 5001, "mallocx"),
        H("calloc", a["z"], 5002, "mallocx"),
        H("realloc", a["r"], 9003, "rallocx", old_addr=a["m"]),
        H("aligned_alloc", a["a"], 5004, "mallocx", align=256),
        H("free", a["a"], fn="sdallocx"), H("free", a["z"], fn="sdallocx"),
        H("free", a["r"], fn="sdallocx")],
        "heap records between the markers")
