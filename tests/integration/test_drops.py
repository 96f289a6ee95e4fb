# SPDX-License-Identifier: MIT
"""Lost events: counted exactly, memtrack's exit status, --allow-drops, and
no process left parked when its fork record is the one lost.

Exactness: `spinner N` makes the same records on every run (N malloc/free
pairs plus its start-up's fixed set), rss records excepted (their number
varies from run to run: the kernel's per-CPU RSS counters fold in at
different moments).  A run with a ring large enough to lose nothing gives,
per type, the records every run generates; with a tiny ring, present +
dropped of each type must equal it.

The per-type drop counts are in the artifact's trailer (dropped.<type>,
docs/FORMAT.md §6), but neither `dump` nor `report --json` shows them (the
report has only the total, dropped_events), so the test reads the trailer
itself (mtlib.read_trailer).

To be sure records are lost, the tiny ring gets --wakeup-bytes 1M: BPF never
wakes the reader for heap records, which then drains the ring only at its
poll timeout.
"""
import os
import subprocess

from mtlib import (Failure, check_eq, check_true, finish, fixture, kill_group,
                   read_trailer, require, shared_track, spawn_track, track)

# the BPF ring's drops are counted on the uprobe path (--fast stalls instead)
UPROBES = ["--no-fast"]
TINY = UPROBES + ["--ring-size", "4096", "--wakeup-bytes", "1M"]
PAIRS = 30000
# record types whose number does not change from run to run (all but rss)
STABLE_TYPES = ("malloc", "calloc", "realloc", "aligned_alloc", "free", "mmap", "munmap",
                "mremap", "brk", "fork", "exec", "exit", "physical")


def reference_run():
    """spinner PAIRS with the default ring: nothing lost, so its records per
    type are what every run of it generates (rss aside)."""
    return shared_track("spinner-%d-uprobes" % PAIRS, [fixture("spinner"), str(PAIRS)],
                        opts=UPROBES)


def check_exact(ref, t, what):
    r = t.report
    require(r["dropped_events"] != 0, "%s: nothing was lost; the test proves nothing "
            "(report: %r)" % (what, r))
    check_eq(len(t.events), r["events"], "%s: records dump printed vs report's events" % what)
    tr = read_trailer(t.artifact.path)
    dropped = {k[len("dropped."):]: v for k, v in tr.items() if k.startswith("dropped.")}
    check_eq(sum(dropped.values()), r["dropped_events"],
             "%s: the trailer's dropped.* vs report's dropped_events" % what)
    check_eq(dropped.get("unknown"), 0, "%s: dropped.unknown" % what)
    present = {ty: sum(1 for e in t.events if e["type"] == ty) for ty in STABLE_TYPES + ("rss",)}
    check_eq({ty: tr.get("events." + ty) for ty in present}, present,
             "%s: the trailer's events.<type> vs the records dump printed" % what)
    generated = ref.report["events_by_type"]
    check_eq({ty: present[ty] + dropped.get(ty, 0) for ty in STABLE_TYPES},
             {ty: generated.get(ty, 0) for ty in STABLE_TYPES},
             "%s: present + dropped, per type, vs what every run generates" % what)
    check_eq(r["truncated"], False, "%s: report --json truncated" % what)


def test_lost_events_counted_exactly(tmp):
    ref = reference_run()
    require(ref.report["dropped_events"] == 0, "the reference run lost events: %r" % ref.report)
    t = track(tmp, [fixture("spinner"), str(PAIRS)], opts=TINY, expect_rc=1)
    check_exact(ref, t, "tiny ring")
    check_true("lost" in t.stderr, "stderr says events were lost: %r" % t.stderr)
    check_eq(t.report["exit_code"], 0, "report --json exit_code (the command succeeded)")


def test_allow_drops_exits_with_command_status(tmp):
    ref = reference_run()
    t = track(tmp, [fixture("spinner"), str(PAIRS)], opts=TINY + ["--allow-drops"],
              expect_rc=0)
    check_exact(ref, t, "tiny ring, --allow-drops")


def stopped_in_group(pgid):
    """'pid state cmdline' of the stopped processes of process group pgid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] in "tT":
            out.append("%s %s %s" % (d, fields[0], cmd))
    return out


def test_fork_under_ring_pressure_does_not_hang(tmp):
    """A thread fills the tiny ring while main forks 50 children.  A child is
    parked (SIGSTOP) in the fork tracepoint and memtrack sends SIGCONT when
    it reads the fork record: if that record is lost, nobody wakes the child
    and the run never ends.  5 runs; each normally takes well under a second
    (the 60 s bound only tells a hang from a loaded machine)."""
    for attempt in range(5):
        p, art = spawn_track(tmp, [fixture("fork_pressure"), "50"],
                             opts=TINY + ["--allow-drops"], name="fp%d.mtrk" % attempt)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stuck = stopped_in_group(p.pid)
            kill_group(p)
            p.communicate()
            raise Failure("run %d did not end within 60 s; stopped processes of its "
                          "tree: %s" % (attempt + 1, stuck or "none"))
        r = finish(p)
        check_eq(r.rc, 0, "run %d: memtrack exit status (%s)" % (attempt + 1, r.stderr.strip()))
        tr = read_trailer(art.path)
        evs = art.events
        # main's 50 children and the churn thread: 51 fork records; 51 exits
        got = {ty: sum(1 for e in evs if e["type"] == ty) + tr.get("dropped." + ty, 0)
               for ty in ("fork", "exit")}
        check_eq(got, {"fork": 51, "exit": 51}, "run %d: present + dropped fork and "
                 "exit records" % (attempt + 1))
