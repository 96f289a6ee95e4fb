# SPDX-License-Identifier: MIT
"""Heap records: malloc/free, calloc, realloc, reallocarray, the aligned
family, failing calls, and 100,000 allocations without a loss."""
from mtlib import (check_eq, fixture, heap, kv_lines, proj, require_eq,
                   root_pid, shared_track, track, window)


def heap_window(t):
    """The heap records of the root's main thread between the markers, without
    ts/pid/tid."""
    return [proj(e) for e in heap(window(t.events, root_pid(t.events)))]


def test_malloc_free_pairs(tmp):
    t = track(tmp, [fixture("heap_pairs")])
    addrs = [int(x) for x in t.stdout.split()]
    require_eq(len(addrs), 3, "addresses the fixture printed")
    expected = ([{"type": "malloc", "addr": a, "size": 4099} for a in addrs]
                + [{"type": "free", "addr": a} for a in addrs])
    check_eq(heap_window(t), expected, "heap records between the markers")


def test_calloc_size_is_nmemb_times_size(tmp):
    t = track(tmp, [fixture("heap_calloc")])
    a = int(t.stdout.split()[0])
    check_eq(heap_window(t), [{"type": "calloc", "addr": a, "size": 7 * 513},
                              {"type": "free", "addr": a}],
             "heap records between the markers")


def realloc_run():
    t = shared_track("heap_realloc", [fixture("heap_realloc")])
    return t, kv_lines(t.stdout)


def test_realloc_chains(tmp):
    t, a = realloc_run()
    # what the fixture saw, so the expectations below are the right ones
    check_eq(a["p0"] != a["p1"], True, "grow moved the block (p0 != p1)")
    check_eq(a["p1"], a["p2"], "shrink stayed in place (p1 == p2)")
    check_eq(a["qz"], 0, "realloc(q, 0) returned NULL")
    check_eq(a["fail1"], 0, "realloc(p, SIZE_MAX - 4096) failed")
    expected = [
        {"type": "malloc", "addr": a["p0"], "size": 100},
        {"type": "malloc", "addr": a["guard"], "size": 200},
        # grow: one realloc record; realloc's internal malloc+free of the
        # move must not show up on their own
        {"type": "realloc", "addr": a["p1"], "size": 5000, "old_addr": a["p0"]},
        {"type": "realloc", "addr": a["p2"], "size": 50, "old_addr": a["p1"]},
        # realloc(NULL, 777) allocates: a malloc record, fn realloc
        {"type": "malloc", "fn": "realloc", "addr": a["q"], "size": 777},
        # realloc(q, 0) frees q (glibc returns NULL): a free record, fn realloc
        {"type": "free", "fn": "realloc", "addr": a["q"]},
        # the failing realloc(p, huge): nothing
        {"type": "malloc", "addr": a["r0"], "size": 64},
        {"type": "malloc", "addr": a["guard2"], "size": 200},
        {"type": "realloc", "fn": "reallocarray", "addr": a["r1"], "size": 3000,
         "old_addr": a["r0"]},
        {"type": "free", "addr": a["r1"]},
        {"type": "free", "addr": a["p2"]},
        {"type": "free", "addr": a["guard"]},
        {"type": "free", "addr": a["guard2"]},
    ]
    check_eq(heap_window(t), expected, "heap records between the markers")


def test_reallocarray(tmp):
    t, a = realloc_run()
    check_eq(a["r0"] != a["r1"], True, "reallocarray moved the block (r0 != r1)")
    check_eq(a["fail2"], 0, "reallocarray(r, SIZE_MAX/2, 4) failed (overflow)")
    recs = [e for e in heap_window(t) if e.get("fn") == "reallocarray"]
    # exactly one: the overflowing call records nothing, and reallocarray's
    # internal realloc is not recorded on its own
    check_eq(recs, [{"type": "realloc", "fn": "reallocarray", "addr": a["r1"],
                     "size": 3000, "old_addr": a["r0"]}],
             "records with fn reallocarray")


def aligned_run():
    t = shared_track("heap_aligned", [fixture("heap_aligned")])
    return t, kv_lines(t.stdout)


def test_aligned_variants(tmp):
    t, a = aligned_run()
    check_eq(a["pm_ret"], 0, "posix_memalign(256, 2560) returned 0")
    expected = [
        # glibc 2.36 defines aligned_alloc as an alias of memalign (one
        # address): memtrack attaches the address once and reports fn
        # "memalign" for both.
        {"type": "aligned_alloc", "fn": "memalign", "addr": a["aligned_alloc"],
         "size": 640, "align": 64},
        {"type": "aligned_alloc", "fn": "memalign", "addr": a["memalign"],
         "size": 1280, "align": 128},
        # the address is the value posix_memalign stored in *memptr
        {"type": "aligned_alloc", "fn": "posix_memalign", "addr": a["posix_memalign"],
         "size": 2560, "align": 256},
        # valloc and pvalloc align to the page: align 4096, the requested size
        {"type": "aligned_alloc", "fn": "valloc", "addr": a["valloc"],
         "size": 3000, "align": 4096},
        {"type": "aligned_alloc", "fn": "pvalloc", "addr": a["pvalloc"],
         "size": 5000, "align": 4096},
    ] + [{"type": "free", "addr": a[k]} for k in
         ("aligned_alloc", "memalign", "posix_memalign", "valloc", "pvalloc")]
    check_eq(heap_window(t), expected, "heap records between the markers")


def test_posix_memalign_einval_not_recorded(tmp):
    t, a = aligned_run()
    check_eq(a["bad_ret"], a["einval"], "posix_memalign(&p, 3, 100) returned EINVAL")
    win = heap_window(t)
    check_eq([e for e in win if e.get("size") == 100 or e.get("align") == 3], [],
             "records of the failed posix_memalign(&p, 3, 100)")
    check_eq(sum(1 for e in win if e.get("fn") == "posix_memalign"), 1,
             "posix_memalign records (only the successful call)")


def test_failed_malloc_and_free_null_not_recorded(tmp):
    t = track(tmp, [fixture("heap_fail")])
    a = kv_lines(t.stdout)
    check_eq(a["big"], 0, "malloc(SIZE_MAX) returned NULL")
    check_eq(a["ovf"], 0, "calloc(SIZE_MAX/2, 4) returned NULL")
    # only the control pair: no record for malloc(SIZE_MAX), the overflowing
    # calloc, or either free(NULL)
    check_eq(heap_window(t), [{"type": "malloc", "addr": a["ok"], "size": 4321},
                              {"type": "free", "addr": a["ok"]}],
             "heap records between the markers")


MANY = 100000


def many_run():
    """heap_many: MANY malloc(1000 + i)/free pairs; also the reference run of
    test_drops (tracked with the default ring, nothing may be lost)."""
    return shared_track("heap_many", [fixture("heap_many"), str(MANY)])


def test_100k_allocations_all_recorded(tmp):
    t = many_run()
    win = heap(window(t.events, root_pid(t.events)))
    mallocs = [e for e in win if e["type"] == "malloc"]
    frees = [e for e in win if e["type"] == "free"]
    check_eq(len(mallocs), MANY, "mallocs between the markers")
    check_eq(len(frees), MANY, "frees between the markers")
    check_eq(len(win), 2 * MANY, "heap records between the markers")
    check_eq([e["size"] for e in mallocs], list(range(1000, 1000 + MANY)),
             "malloc sizes, in order")
    # malloc, free, malloc, free, ...: each free releases the block before it
    check_eq([e["type"] for e in win[:2 * MANY]], ["malloc", "free"] * MANY,
             "record types alternate malloc/free")
    check_eq([e["addr"] for e in win[1::2]], [e["addr"] for e in win[0::2]],
             "each free's address is its malloc's")
    check_eq(t.report["dropped_events"], 0, "report --json dropped_events")
    check_eq(t.report["truncated"], False, "report --json truncated")
