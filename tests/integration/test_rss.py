# SPDX-License-Identifier: MIT
"""Resident and physical memory against the kernel's own numbers (issue 4).

The fixture (fixtures/rss.c) stops at each checkpoint until the test sends a
byte, so /proc/PID/status and the artifact describe the same moment.  The
artifact is read while memtrack runs (--flush-ms 20 puts each partial frame
on disk within 20 ms); the test waits until the record for the checkpoint
has arrived, then compares.
"""
import os
import re
import subprocess
from pathlib import Path

from mtlib import (MEMTRACK, Artifact, Failure, check_eq, check_true, finish,
                   fixture, require, require_eq, run, track_argv, wait_until)

MiB = 1 << 20
KiB = 1 << 10


# The kernel's shared counters (what rss records carry) lag the exact value
# by the per-CPU deltas not yet folded in: < 32 pages per CPU.
LAG = 512 * KiB


def at_least(size):
    """Recorded RSS that shows @size bytes were touched, allowing for LAG."""
    return size - LAG


def tolerance(expected):
    """The issue's bound: max(2%, 512 KiB)."""
    return max(expected * 2 // 100, 512 * KiB)


class Driver:
    """memtrack track -- rss MODE ..., stepped through its checkpoints."""

    def __init__(self, tmp, args, opts=()):
        self.out = Path(tmp) / "rss.mtrk"
        argv = track_argv([fixture("rss")] + list(args), self.out,
                          ["--flush-ms", "20"] + list(opts))
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)

    def expect(self, prefix):
        line = self.p.stdout.readline().strip()
        if not line.startswith(prefix):
            self.kill()
            raise Failure("fixture printed %r, expected %r; stderr: %s"
                          % (line, prefix, self.p.stderr.read()[:2000]))
        return line.split()[1:]

    def proceed(self):
        self.p.stdin.write("x")
        self.p.stdin.flush()

    def events(self):
        # memtrack renames the artifact into place once the command runs: the
        # command's first line can come before that (memtrack's main thread
        # is not scheduled ahead of the command), so until then nothing is there
        if not self.out.exists():
            return []
        return Artifact(self.out).events

    def rss_records(self, pid):
        return [e for e in self.events() if e["type"] == "rss" and e["pid"] == pid]

    def wait_rss(self, pid, pred, what):
        """The latest rss record of pid once it satisfies pred."""
        def latest():
            recs = self.rss_records(pid)
            return recs[-1] if recs and pred(recs[-1]) else None
        return wait_until(latest, what, timeout=10)

    def wait_physical(self, pred, what):
        def latest():
            recs = [e for e in self.events() if e["type"] == "physical"]
            return recs[-1] if recs and pred(recs[-1]) else None
        return wait_until(latest, what, timeout=10)

    def finish(self, expect_rc=0):
        out, err = self.p.communicate(timeout=60)
        require_eq(self.p.returncode, expect_rc, "memtrack exit status (stderr: %s)" % err[-2000:])
        return Artifact(self.out)

    def kill(self):
        try:
            os.killpg(self.p.pid, 9)
        except ProcessLookupError:
            pass


def status(pid):
    """VmRSS, RssAnon, RssFile, RssShmem of /proc/PID/status, in bytes."""
    text = Path("/proc/%d/status" % pid).read_text()
    return {k: int(v) * KiB for k, v in
            re.findall(r"^(VmRSS|RssAnon|RssFile|RssShmem):\s+(\d+) kB", text, re.M)}


def total(rec):
    return rec["anon"] + rec["file"] + rec["shmem"]


def close_to(actual, expected):
    return abs(actual - expected) <= tolerance(expected)


def fixture_pid(d):
    """The tracked fixture's pid: the root's exec record."""
    def find():
        ex = [e for e in d.events() if e["type"] == "exec"]
        return ex[0]["pid"] if ex else None
    return wait_until(find, "the fixture's exec record", timeout=10)


def test_rss_ramp(tmp):
    d = Driver(tmp, ["ramp"])
    try:
        d.expect("step")
        pid = fixture_pid(d)
        for i in range(8):
            if i:
                d.expect("step %d" % i)
            st = status(pid)
            rec = d.wait_rss(pid, lambda r: close_to(total(r), st["VmRSS"]),
                             "rss record of step %d within %d of VmRSS %d"
                             % (i, tolerance(st["VmRSS"]), st["VmRSS"]))
            check_true(close_to(rec["anon"], st["RssAnon"]),
                       "step %d anon %d vs RssAnon %d" % (i, rec["anon"], st["RssAnon"]))
            check_true(close_to(rec["file"], st["RssFile"]),
                       "step %d file %d vs RssFile %d" % (i, rec["file"], st["RssFile"]))
            d.proceed()
        d.expect("dontneed")
        st = status(pid)
        rec = d.wait_rss(pid, lambda r: close_to(r["anon"], st["RssAnon"]), "rss after MADV_DONTNEED")
        check_true(st["RssAnon"] < 40 * MiB, "RssAnon after DONTNEED %d" % st["RssAnon"])
        d.proceed()
        d.expect("unmapped")
        st = status(pid)
        d.wait_rss(pid, lambda r: close_to(r["anon"], st["RssAnon"]), "rss after munmap")
        d.proceed()
        d.finish()
    finally:
        d.kill()


def test_rss_file_and_shmem(tmp):
    path = Path(tmp) / "data32"
    path.write_bytes(os.urandom(32 * MiB))
    d = Driver(tmp, ["file", str(path)])
    try:
        d.expect("file")
        pid = fixture_pid(d)
        st = status(pid)
        require(st["RssFile"] >= 32 * MiB, "RssFile after reading the 32 MiB mapping: %d" % st["RssFile"])
        rec = d.wait_rss(pid, lambda r: close_to(r["file"], st["RssFile"]),
                         "file within tolerance of RssFile %d" % st["RssFile"])
        d.proceed()
        d.expect("shmem")
        st = status(pid)
        rec = d.wait_rss(pid, lambda r: close_to(r["shmem"], st["RssShmem"]),
                         "shmem within tolerance of RssShmem %d" % st["RssShmem"])
        check_true(close_to(rec["shmem"], 16 * MiB), "shmem %d vs 16 MiB" % rec["shmem"])
        d.proceed()
        d.finish()
    finally:
        d.kill()


def test_cow_rss_and_physical(tmp):
    d = Driver(tmp, ["cow"], ["--physical"])
    try:
        d.expect("parent")
        pid = fixture_pid(d)
        d.wait_physical(lambda r: r["bytes"] >= 64 * MiB, "physical >= 64 MiB after the parent touched")
        d.proceed()
        child = int(d.expect("child-read")[0])
        sp, sc = status(pid), status(child)
        d.wait_rss(child, lambda r: close_to(total(r), sc["VmRSS"]), "child's rss after reading")
        d.wait_rss(pid, lambda r: close_to(total(r), sp["VmRSS"]), "parent's rss")
        tree = total(d.rss_records(pid)[-1]) + total(d.rss_records(child)[-1])
        check_true(abs(tree - 128 * MiB) <= 128 * MiB // 10, "tree RSS %d vs 128 MiB" % tree)
        phys = [e for e in d.events() if e["type"] == "physical"][-1]["bytes"]
        check_true(abs(phys - 64 * MiB) <= 64 * MiB // 10, "physical %d vs 64 MiB while shared" % phys)
        d.proceed()
        d.expect("child-wrote")
        rec = d.wait_physical(lambda r: abs(r["bytes"] - 128 * MiB) <= 128 * MiB // 10,
                              "physical within 10% of 128 MiB after the child wrote")
        d.proceed()
        a = d.finish()
        r = a.report
        check_true(abs(r["peak_physical_bytes"] - 128 * MiB) <= 128 * MiB // 10,
                   "peak_physical_bytes %s" % r["peak_physical_bytes"])
    finally:
        d.kill()


def test_threads_one_process(tmp):
    d = Driver(tmp, ["threads"])
    try:
        d.expect("threads")
        pid = fixture_pid(d)
        st = status(pid)
        rec = d.wait_rss(pid, lambda r: close_to(total(r), st["VmRSS"]), "rss of the threaded process")
        check_true(rec["anon"] >= at_least(32 * MiB), "anon %d covers the 4 x 8 MiB" % rec["anon"])
        d.proceed()
        a = d.finish()
        pids = {e["pid"] for e in a.events if e["type"] == "rss"}
        check_eq(pids, {pid}, "processes with rss records")
    finally:
        d.kill()


def test_exec_replaces_rss(tmp):
    d = Driver(tmp, ["exec", fixture("rss")])
    try:
        d.expect("touched")
        pid = fixture_pid(d)
        d.wait_rss(pid, lambda r: r["anon"] >= at_least(32 * MiB), "32 MiB anon before exec")
        d.proceed()
        d.expect("small")
        st = status(pid)
        require(st["VmRSS"] < 8 * MiB, "the new image's VmRSS %d" % st["VmRSS"])
        d.wait_rss(pid, lambda r: close_to(total(r), st["VmRSS"]), "rss of the new image")
        d.proceed()
        d.finish()
    finally:
        d.kill()


def touch_then_small(tmp, mode, size):
    """Runs `rss MODE rss`: the fixture touches size bytes, then (itself or a
    vfork child) execs `rss small`.  Returns (pid, finished artifact)."""
    d = Driver(tmp, [mode, fixture("rss")])
    try:
        d.expect("touched")
        pid = fixture_pid(d)
        d.wait_rss(pid, lambda r: r["anon"] >= at_least(size), "%d bytes touched" % size)
        d.proceed()
        d.expect("small")
        d.proceed()
        return pid, d.finish()
    finally:
        d.kill()


def test_mm_reuse_not_misattributed(tmp):
    """A tracked process execs and exits while an untracked one churns 250
    forks through freed mm_structs; no record of the tree comes from them."""
    churner = subprocess.Popen([fixture("rss"), "churn", "250"], stdin=subprocess.DEVNULL)
    try:
        pid, a = touch_then_small(tmp, "exec", 32 * MiB)
    finally:
        churner.wait(timeout=60)
    evs = a.events
    tree = {e["pid"] for e in evs if e["type"] in ("exec", "fork")}
    rss_pids = {e["pid"] for e in evs if e["type"] == "rss"}
    check_true(rss_pids <= tree | {pid}, "rss records only for the tree: %s vs %s" % (rss_pids, tree))
    ex = [e for e in evs if e["type"] == "exec" and e["pid"] == pid]
    require_eq(len(ex), 2, "exec records of the fixture")
    before = [e for e in evs if e["type"] == "rss" and e["pid"] == pid and e["ts"] < ex[1]["ts"]]
    full = [e for e in before if e["anon"] >= at_least(32 * MiB)]
    require(full, "an rss record with the 32 MiB")
    after_full = [e for e in before if e["ts"] > full[0]["ts"]]
    check_eq([e for e in after_full if e["anon"] < at_least(32 * MiB)], [],
             "rss records between the 32 MiB touch and exec that dropped")
    # after its exit, a freed mm recycled by the churner must not speak for it
    for ex in [e for e in evs if e["type"] == "exit"]:
        late = [e for e in evs if e["type"] == "rss" and e["pid"] == ex["pid"] and e["ts"] > ex["ts"]]
        check_eq(late, [], "rss records of pid %d after its exit" % ex["pid"])


def test_external_pageout_attributed_to_owner(tmp):
    path = Path(tmp) / "data16"
    path.write_bytes(os.urandom(16 * MiB))
    d = Driver(tmp, ["pagefile", str(path)])
    try:
        addr, length = d.expect("mapped")
        pid = fixture_pid(d)
        st = status(pid)
        d.wait_rss(pid, lambda r: close_to(r["file"], st["RssFile"]), "file pages mapped")
        p = run([fixture("rss"), "pageout", pid, addr, length])
        require_eq(p.rc, 0, "process_madvise(MADV_PAGEOUT): " + p.describe())
        st2 = status(pid)
        require(st2["RssFile"] <= st["RssFile"] - 8 * MiB,
                "PAGEOUT reclaimed the file pages: %d -> %d" % (st["RssFile"], st2["RssFile"]))
        d.wait_rss(pid, lambda r: close_to(r["file"], st2["RssFile"]),
                   "the drop recorded for the owner (RssFile %d)" % st2["RssFile"])
        d.proceed()
        d.expect("after")
        d.proceed()
        a = d.finish()
        caller = {e["pid"] for e in a.events if e["type"] == "rss"} - {pid}
        check_eq(caller, set(), "rss records of other pids (the caller)")
    finally:
        d.kill()


def test_vfork_child_keeps_parent_as_owner(tmp):
    pid, a = touch_then_small(tmp, "vfork", 16 * MiB)
    evs = a.events
    forks = [e for e in evs if e["type"] == "fork" and e["parent"] == pid]
    require_eq(len(forks), 1, "vfork records")
    child = forks[0]["child"]
    check_eq(forks[0]["flags"] & 2, 2, "the vfork child shares the parent's mm (flag 2)")
    big = [e for e in evs if e["type"] == "rss" and e["pid"] == child and e["anon"] >= at_least(16 * MiB)]
    check_eq(big, [], "rss records giving the child the parent's 16 MiB")
    parent_recs = [e for e in evs if e["type"] == "rss" and e["pid"] == pid]
    check_true(max(total(e) for e in parent_recs) >= at_least(16 * MiB), "parent keeps its 16 MiB")


def test_mremap_and_hole(tmp):
    d = Driver(tmp, ["mremap"])
    try:
        d.expect("touched")
        pid = fixture_pid(d)
        st = status(pid)
        d.wait_rss(pid, lambda r: close_to(total(r), st["VmRSS"]), "rss after touching 32 MiB")
        d.proceed()
        d.expect("moved")
        st2 = status(pid)
        d.wait_rss(pid, lambda r: close_to(total(r), st2["VmRSS"]), "rss after the move")
        check_true(close_to(st2["VmRSS"], st["VmRSS"]), "the move kept VmRSS: %d -> %d" % (st["VmRSS"], st2["VmRSS"]))
        d.proceed()
        d.expect("touched48")
        st3 = status(pid)
        r3 = d.wait_rss(pid, lambda r: close_to(total(r), st3["VmRSS"]), "rss with 48 MiB")
        d.proceed()
        d.expect("hole")
        st4 = status(pid)
        r4 = d.wait_rss(pid, lambda r: close_to(total(r), st4["VmRSS"]), "rss after the hole")
        # the kernel's own drop is the reference: on a busy host a few of the
        # 48 MiB's pages may leave RSS before the hole (reclaim, DAMON)
        drop, kernel_drop = total(r3) - total(r4), st3["VmRSS"] - st4["VmRSS"]
        check_true(abs(drop - kernel_drop) <= 512 * KiB and kernel_drop > 12 * MiB,
                   "the 16 MiB hole lowered RSS by %d, VmRSS by %d" % (drop, kernel_drop))
        d.proceed()
        a = d.finish()
    finally:
        d.kill()
    peak = max(total(e) for e in a.events if e["type"] == "rss" and e["pid"] == pid
               and e["ts"] < [x for x in a.events if x["type"] == "mremap"][-1]["ts"] + 1)
    check_true(peak < 48 * MiB, "the move did not double RSS (peak before the 48 MiB map: %d)" % peak)


def _crosscheck(tmp, argv):
    """memtrack tracks /usr/bin/time running argv: both measure the same run
    of the workload (separate runs differ by several percent on their own:
    the kernel's shared RSS counters lag by up to 31 pages per CPU, and by
    how much depends on the run)."""
    out = Path(tmp) / "x.mtrk"
    tfile = Path(tmp) / "time.txt"
    p = run([MEMTRACK, "track", "-q", "-o", out, "--", "/usr/bin/time", "-o", tfile, "-f", "%M"] + argv)
    require_eq(p.rc, 0, "memtrack: " + p.describe())
    theirs = int(tfile.read_text().split()[-1]) * KiB
    r = Artifact(out).report
    ours = max(pr["peak_rss_bytes"] for pr in r["processes"] if pr["command"] == Path(argv[0]).name)
    check_true(abs(ours - theirs) <= theirs * 2 // 100,
               "%s: memtrack peak %d vs /usr/bin/time %d (%.1f%%)"
               % (" ".join(argv), ours, theirs, 100.0 * (ours - theirs) / theirs))


def test_crosscheck_tar(tmp):
    _crosscheck(tmp, ["tar", "-cf", "/dev/null", "/usr/include"])


def test_crosscheck_ls_recursive(tmp):
    _crosscheck(tmp, ["ls", "-laR", "/usr/share"])
