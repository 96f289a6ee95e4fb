# SPDX-License-Identifier: MIT
"""export --format=pprof: the gzipped profile.proto decoded back with a
small protobuf reader written here (field numbers of pprof's
proto/profile.proto): sample types, one sample per call site with its
values, locations down to symbolized functions, mappings."""
import gzip

import re
import shutil

from mtlib import check_eq, check_true, fixture, require, run
from callsites import START, memtrack, own_cache, tracked
from test_diff_top import runs as sitediff_runs


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """A message's fields: list of (number, value); length-delimited values are bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError("wire type %d in a profile" % wt)
        out.append((num, v))
    return out


def packed(b):
    vals, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        vals.append(v)
    return vals


def one(msg, num, default=0):
    vals = [v for n, v in fields(msg) if n == num] if isinstance(msg, bytes) else []
    return vals[-1] if vals else default


def decode(path):
    prof = fields(gzip.open(path).read())
    strings = [v.decode() for n, v in prof if n == 6]
    s = lambda i: strings[i]
    types = [(s(one(v, 1)), s(one(v, 2))) for n, v in prof if n == 1]
    funcs = {one(v, 1): (s(one(v, 2)), s(one(v, 4))) for n, v in prof if n == 5}
    locs = {}
    for n, v in prof:
        if n == 4:
            lines = [(funcs[one(ln, 1)][0], one(ln, 2)) for k, ln in fields(v) if k == 4]
            locs[one(v, 1)] = {"mapping": one(v, 2), "lines": lines}
    maps = {one(v, 1): s(one(v, 5)) for n, v in prof if n == 3}
    samples = []
    for n, v in prof:
        if n == 2:
            f = fields(v)
            ids = sum((packed(x) for k, x in f if k == 1), [])
            vals = sum((packed(x) for k, x in f if k == 2), [])
            # innermost first; each location's lines are inlined frames first
            samples.append((vals, [fn for i in ids for fn, _ in locs[i]["lines"]], ids))
    default = [s(v) for n, v in prof if n == 14]
    return types, samples, locs, maps, default


def test_pprof_roundtrip(tmp):
    own_cache(tmp)
    out = tmp / "cs.pb.gz"
    memtrack("export", "--format=pprof", tracked().artifact.path, "-o", out)
    require(out.read_bytes()[:2] == b"\x1f\x8b", "gzip magic")
    types, samples, locs, maps, default = decode(out)
    check_eq(types, [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_space", "bytes"),
                     ("leaked", "bytes"), ("memory", "bytes"), ("inuse_objects", "count")],
             "sample types")
    check_eq(default, ["inuse_space"], "default sample type")
    # heap sites; the others are mapping sites (ld.so's, libc's), memory only
    by_stack = sorted((fns[:-len(START)], vals) for vals, fns, _ in samples if vals[0])
    check_eq(by_stack, [(["b", "a", "main"], [3, 12000, 12000, 0, 12000, 3]),
                        (["c", "main"], [100, 20000, 200, 0, 200, 1]),
                        (["d", "main"], [1, 777, 0, 777, 0, 0])], "samples: functions and values")
    check_eq(sum(vals[4] for vals, _, _ in samples), tracked().report["peak_memory_bytes"],
             "memory samples sum to report's peak_memory_bytes")
    check_eq([vals[:4] for vals, _, _ in samples if not vals[0]],
             [[0, 0, 0, 0]] * sum(1 for vals, _, _ in samples if not vals[0]),
             "mapping sites carry memory only")
    check_true(all(fns[-len(START):] == START for vals, fns, _ in samples if vals[0]),
               "every heap site's stack ends in _start")
    exe = fixture("callsites")
    check_true(exe in maps.values(), "a mapping names the fixture: %s" % maps)
    b_loc = [locs[ids[0]] for vals, fns, ids in samples if fns[0] == "b"][0]
    check_eq(maps.get(b_loc["mapping"]), exe, "b's location is in the fixture's mapping")


def test_pprof_without_stacks(tmp):
    """A run without --stacks: one sample, its one location named (no stack)."""
    own_cache(tmp)
    out = tmp / "nostk.pb.gz"
    p = memtrack("export", "--format=pprof", tracked(stacks=False).artifact.path, "-o", out)
    check_true("has no call stacks" in p.stderr, "warning: %r" % p.stderr)
    types, samples, locs, maps, default = decode(out)
    mem = tracked(stacks=False).report["peak_memory_bytes"]
    check_eq([(vals, fns) for vals, fns, _ in samples],
             [([104, 12000 + 20000 + 777, 12200, 777, mem, 4], ["(no stack)"])], "the one sample")


def test_call_site_outputs_unwritable(tmp):
    """An output that cannot be written: exit 1, one line naming it; a device
    (/dev/full) is not a file memtrack writes over (as track -o refuses one)."""
    path = tracked().artifact.path
    for argv, what, start in (
            (["export", "--format=pprof", path, "-o", tmp / "no" / "x.pb.gz"], "x.pb.gz",
             "memtrack: cannot write"),
            (["flamegraph", path, "-o", "/dev/full"], "/dev/full",
             "memtrack: '/dev/full' exists and is not a regular file (a device, FIFO or socket)"),
            (["flamegraph", path, "--folded", "-o", "/dev/full"], "/dev/full",
             "memtrack: '/dev/full' exists and is not a regular file (a device, FIFO or socket)")):
        p = memtrack(*argv, rc=1)
        check_true(p.stderr.startswith(start) and what in p.stderr and
                   p.stderr.count("\n") == 1, "%s: %r" % (argv[0], p.stderr))


def pprof_top(tmp, base, new, index):
    """`go tool pprof -top -diff_base BASE NEW` of sample type @index, in
    bytes (-unit=B): {function: flat} of the rows with a flat change."""
    go = shutil.which("go")
    require(go is not None, "no go (Debian's golang-go; scripts/bootstrap.sh installs it)")
    p = run(["env", "HOME=%s" % tmp, "PPROF_TMPDIR=%s" % tmp, go, "tool", "pprof", "-top", "-unit=B",
             "-sample_index=%s" % index, "-diff_base", base, new])
    require(p.rc == 0, "go tool pprof -diff_base: %s" % p.describe())
    rows = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*(-?\d+)B\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)$", line)
        if m and m.group(1) != "0":
            rows[m.group(2)] = int(m.group(1))
    return rows


def test_pprof_diff_base(tmp):
    """Two exports of tests/fixtures/sitediff.c (2 then 5 blocks of 3072
    bytes held at the peak, 1 then 3 leaks of 111, 10 x 520 both times) read
    by Debian's pprof with -diff_base: each site's delta, exactly, and the
    unchanged site absent (its samples cancel)."""
    own_cache(tmp)
    base, new = sitediff_runs()
    a, b = tmp / "base.pb.gz", tmp / "new.pb.gz"
    memtrack("export", "--format=pprof", base, "-o", a)
    memtrack("export", "--format=pprof", new, "-o", b)
    check_eq(pprof_top(tmp, a, b, "inuse_space"), {"grow": 3 * 3072}, "inuse_space deltas (the default)")
    check_eq(pprof_top(tmp, a, b, "alloc_objects"), {"grow": 3, "leak": 2}, "alloc_objects deltas")
    check_eq(pprof_top(tmp, a, b, "alloc_space"), {"grow": 3 * 3072, "leak": 2 * 111},
             "alloc_space deltas")
    check_eq(pprof_top(tmp, a, b, "leaked"), {"leak": 2 * 111}, "leaked deltas")
    check_eq(pprof_top(tmp, b, a, "leaked"), {"leak": -2 * 111}, "the other way round: a shrink")
