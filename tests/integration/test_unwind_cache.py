# SPDX-License-Identifier: MIT
"""The unwind cache (inspect/unwind_cache.h): --stacks keeps each file's
unwind table in a directory only root can write, and a later run takes it
from there instead of building it again, only for the very same file, and
gives the same stacks."""

import os
import shutil
import stat

from mtlib import MEMTRACK, Artifact, check_eq, check_true, fixture, require_eq, run

SIZE_RECURSE = 4201  # test_stacks.py's recurse malloc


def cached_run(tmp, name, exe, cache_opts):
    """track -v --stacks of `exe recurse`: the stacks line's object and
    cached-table counts, and the recurse malloc's stack frames."""
    out = tmp / (name + ".mtrk")
    p = run([MEMTRACK, "track", "-v", "--stacks"] + cache_opts
            + ["-o", str(out), "--", str(exe), "recurse"])
    require_eq(p.rc, 0, "track's exit status: " + p.describe())
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("memtrack: stacks: ")]
    require_eq(len(line), 1, "track -v's stacks line: %r" % p.stderr)
    w = line[0].split()
    require_eq(w[-4:-1], ["tables", "from", "the"], "the line ends with the cache count: %r" % line)
    evs = Artifact(out).events
    stacks = {e["id"]: e for e in evs if e["type"] == "stack"}
    objects = {e["id"]: e["path"] for e in evs if e["type"] == "object"}
    allocs = [e for e in evs if e["type"] == "malloc" and e["size"] == SIZE_RECURSE]
    require_eq(len(allocs), 1, "the recurse malloc")
    s = stacks[allocs[0]["stack"]]
    frames = [(objects[o], a) for o, a in s["frames"]]
    return {"objects": int(w[2]), "cached": int(w[-5]), "frames": frames,
            "truncated": s["truncated"]}


def entries(d):
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def test_second_run_takes_tables_from_the_cache(tmp):
    """A first run builds every table and stores one entry per object; the
    second takes all of them from the cache and records the very same stack
    (frame for frame); --no-unwind-cache builds them again, same stack."""
    cache = tmp / "cache"
    exe = fixture("stk_nofp")
    first = cached_run(tmp, "first", exe, ["--unwind-cache", str(cache)])
    check_eq(first["cached"], 0, "tables from an empty cache")
    check_eq(len(entries(cache)), first["objects"], "one entry per object")
    mode = os.stat(cache).st_mode
    check_eq((stat.S_IMODE(mode), os.stat(cache).st_uid), (0o700, os.geteuid()),
             "the directory memtrack created: root's, 0700")
    for n in entries(cache):
        st = os.stat(cache / n)
        check_eq((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, os.geteuid()), "entry " + n)
    second = cached_run(tmp, "second", exe, ["--unwind-cache", str(cache)])
    check_eq(second["cached"], second["objects"], "every table from the cache")
    check_eq(second["frames"], first["frames"], "the same stack, frame for frame")
    check_eq(second["truncated"], 0, "complete")
    check_eq(len(first["frames"]), 11, "leaf_alloc, rec x6, main, libc's two callers, _start")
    off = cached_run(tmp, "off", exe, ["--unwind-cache", str(cache), "--no-unwind-cache"])
    check_eq(off["cached"], 0, "--no-unwind-cache: nothing from the cache")
    check_eq(off["frames"], first["frames"], "the same stack without the cache")


def test_damaged_entries_are_rebuilt(tmp):
    """Entries that do not check out are misses: a byte flipped in the rows
    (the checksum), one cut short (the size), one others may write (its
    mode).  The run builds those tables again, records the same stack, and
    stores entries byte for byte equal to the first ones."""
    cache = tmp / "cache"
    exe = fixture("stk_nofp")
    first = cached_run(tmp, "first", exe, ["--unwind-cache", str(cache)])
    names = entries(cache)
    require_eq(len(names) >= 3, True, "three entries or more: %r" % names)
    good = {n: (cache / n).read_bytes() for n in names}
    flipped, cut, loose = names[0], names[1], names[2]
    data = bytearray(good[flipped])
    data[-1] ^= 0x40
    (cache / flipped).write_bytes(bytes(data))
    (cache / cut).write_bytes(good[cut][:-8])
    os.chmod(cache / loose, 0o666)
    second = cached_run(tmp, "second", exe, ["--unwind-cache", str(cache)])
    check_eq(second["cached"], second["objects"] - 3, "all but the three damaged ones")
    check_eq(second["frames"], first["frames"], "the same stack")
    for n in (flipped, cut, loose):
        check_eq((cache / n).read_bytes() == good[n], True, "entry %s stored again, whole" % n)
        check_eq(stat.S_IMODE(os.stat(cache / n).st_mode), 0o600, "entry %s's mode" % n)
    third = cached_run(tmp, "third", exe, ["--unwind-cache", str(cache)])
    check_eq(third["cached"], third["objects"], "all from the cache again")


def test_changed_file_is_built_again(tmp):
    """An entry holds the file as it was: once the executable is touched
    (new mtime and ctime) its table is built again, the others still come
    from the cache, and the changed file gets an entry of its own."""
    cache = tmp / "cache"
    exe = tmp / "stk_copy"
    shutil.copy2(fixture("stk_nofp"), exe)
    first = cached_run(tmp, "first", exe, ["--unwind-cache", str(cache)])
    n = len(entries(cache))
    os.utime(exe, (1_000_000_000, 1_000_000_000))
    second = cached_run(tmp, "second", exe, ["--unwind-cache", str(cache)])
    check_eq(second["cached"], second["objects"] - 1, "all but the touched executable")
    check_eq(second["frames"], first["frames"], "the same stack")
    check_eq(len(entries(cache)), n + 1, "a new entry for the touched file")


def refused(tmp, cache_arg, what, words):
    out, ran = tmp / (what + ".mtrk"), tmp / (what + ".ran")
    p = run([MEMTRACK, "track", "--stacks", "--unwind-cache", cache_arg, "-o", str(out), "--",
             fixture("touch"), str(ran)])
    check_eq(p.rc, 2, "%s: exit status: %s" % (what, p.describe()))
    check_eq(p.stderr.count("\n"), 1, "%s: one line: %r" % (what, p.stderr))
    for w in words:
        check_true(w in p.stderr, "%s: %r in %r" % (what, w, p.stderr))
    check_eq((out.exists(), ran.exists()), (False, False), "%s: artifact, command run" % what)


def test_unsafe_cache_directory_refused(tmp):
    """--unwind-cache DIR that others could write into (where they could
    plant entries root would trust), through a symbolic link, relative, or
    below a missing directory: one line naming it and the fix; the command
    does not run."""
    loose = tmp / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    refused(tmp, str(loose), "mode 0777", ["can be written by another user", "mode 0777",
                                           "--no-unwind-cache"])
    owned = tmp / "owned"
    owned.mkdir(mode=0o700)
    os.chown(owned, 65534, 65534)
    refused(tmp, str(owned / "cache"), "owned by nobody", ["owner uid 65534"])
    link = tmp / "link"
    (tmp / "real").mkdir(mode=0o700)
    os.symlink(tmp / "real", link)
    refused(tmp, str(link), "a link", ["symbolic link", "give the real path"])
    refused(tmp, "relative/cache", "relative", ["give an absolute path"])
    refused(tmp, str(tmp / "missing" / "cache"), "missing parent", ["No such file or directory",
                                                                    "give an existing directory"])
    p = run([MEMTRACK, "track", "--stacks", "--unwind-cache", "", "--", "true"])
    check_eq(p.rc, 2, "empty --unwind-cache: " + p.describe())
    check_true("empty --unwind-cache" in p.stderr, "named: %r" % p.stderr)


def test_no_cache_without_stacks(tmp):
    """With --no-stacks there are no tables: the directory is not even made."""
    cache = tmp / "cache"
    p = run([MEMTRACK, "track", "-q", "--no-stacks", "--unwind-cache", str(cache), "-o",
             str(tmp / "x.mtrk"),
             "--", fixture("stk_nofp"), "recurse"])
    require_eq(p.rc, 0, "track: " + p.describe())
    check_eq(cache.exists(), False, "no cache directory")


def test_large_entry_read_in_pieces(tmp):
    """python3.11's table (64K rows, 1.1 MB) is larger than the 256 KiB
    of an entry memtrack reads whole: it stays in its file and is stored a
    piece at a time.  Its stacks are as complete as the run that built it; a byte
    flipped in the middle of its rows makes it a miss, built again."""
    from test_stacks import complete_share
    cache = tmp / "cache"
    script = "import json; print(len(json.dumps([dict(a=i) for i in range(1000)])))"
    cmd = ["/usr/bin/python3", "-c", script]
    runs = []
    for name in ("cold", "warm", "damaged"):
        if name == "damaged":
            data = bytearray(big.read_bytes())
            data[len(data) // 2] ^= 0x01
            big.write_bytes(bytes(data))
        out = tmp / (name + ".mtrk")
        p = run([MEMTRACK, "track", "-v", "--stacks", "--unwind-cache", str(cache), "-o",
                 str(out), "--"] + cmd)
        require_eq(p.rc, 0, "track: " + p.describe())
        w = [ln for ln in p.stderr.splitlines() if ln.startswith("memtrack: stacks: ")][0].split()
        ok, n, where = complete_share(Artifact(out).events)
        require_eq(n > 1000, True, "%s: heap events %d" % (name, n))
        runs.append((int(w[2]), int(w[-5]), ok / n))
        if name == "cold":
            sizes = {e: (cache / e).stat().st_size for e in entries(cache)}
            large = [e for e, s in sizes.items() if s > 1 << 20]
            require_eq(len(large), 1, "one entry over 1 MiB (python3's): %r" % sizes)
            big = cache / large[0]
    (objs, cold_cached, cold), (_, warm_cached, warm), (_, dmg_cached, dmg) = runs
    check_eq((cold_cached, warm_cached, dmg_cached), (0, objs, objs - 1),
             "tables from the cache: cold, warm, one damaged")
    check_true(cold >= 0.99 and abs(warm - cold) < 0.001 and abs(dmg - cold) < 0.001,
               "complete shares: cold %.5f, warm %.5f, damaged %.5f" % (cold, warm, dmg))
