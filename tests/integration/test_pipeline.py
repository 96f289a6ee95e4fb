# SPDX-License-Identifier: MIT
"""The event pipeline end to end, under real BPF (issue 3): which flush
path wrote each frame, and that none loses an event.  The unit tests
(tests/unit/test_pipeline.c) cover each path without BPF."""
import re
from pathlib import Path

from mtlib import (MEMTRACK, Artifact, check_eq, check_true, count, fixture, read_frames,
                   require, require_eq, root_pid, run, window)

N = 3000  # malloc/free pairs of alloc_pairs: 6000 heap records in the window


def frames(path):
    """[(kind, event_count)] of the artifact's frames."""
    return [(f.kind, f.nevents) for f in read_frames(path)]


def flushes(stderr):
    """{cause: batches} from `track -v`'s pipeline line."""
    m = re.search(r"full (\d+), timeout (\d+), drain (\d+), shutdown (\d+)", stderr)
    require(m, "no pipeline statistics in: %s" % stderr[-2000:])
    return dict(zip(("full", "timeout", "drain", "shutdown"), map(int, m.groups())))


def tracked(tmp, opts):
    out = Path(tmp) / "p.mtrk"
    p = run([MEMTRACK, "track", "-v", "-o", out] + opts + ["--", fixture("alloc_pairs"), N])
    require_eq(p.rc, 0, "memtrack: " + p.describe())
    evs = Artifact(out).events
    win = window(evs, root_pid(evs))
    check_eq((count(win, type="malloc"), count(win, type="free")), (N, N),
             "mallocs and frees in the window")
    return out, flushes(p.stderr)


def test_burst_before_exit_drained_into_a_partial_frame(tmp):
    """Everything fits one batch and no timeout fires: the only events frame
    is written by the drain path, partial, with every event."""
    out, f = tracked(tmp, ["--flush-ms", "3600000"])
    check_eq(f, {"full": 0, "timeout": 0, "drain": 1, "shutdown": 0}, "flushes by cause")
    fr = frames(out)
    check_eq([k for k, _ in fr], [1, 2], "frame kinds (events, trailer)")
    events = Artifact(out).report["events"]
    check_eq(fr[0][1], events, "the drained frame holds every event")


def test_full_batches_handed_on_as_they_fill(tmp):
    """With 4 KiB batches the burst fills batch after batch: every frame but
    the last is full (the same size in bytes of raw records, so nearly the
    same count), the last is the drain's partial one.  Without stacks: a
    stack record is up to 2 KiB, so a frame holding some holds fewer."""
    out, f = tracked(tmp, ["--no-stacks", "--batch-size", "4K", "--flush-ms", "3600000"])
    fr = [n for k, n in frames(out) if k == 1]
    check_eq(len(fr), f["full"] + f["drain"], "events frames == full + drain flushes")
    check_eq((f["timeout"], f["drain"], f["shutdown"]), (0, 1, 0), "timeout, drain, shutdown flushes")
    check_true(f["full"] >= 2 * N * 24 // 4096, "full flushes %d for %d heap records" % (f["full"], 2 * N))
    # a raw record is 24 + 8 * nfields bytes (32..72): a full 4 KiB batch
    # holds 56..128 of them
    check_true(all(56 <= n <= 128 for n in fr[:-1]), "full frames' counts %s" % fr[:-1])
    check_true(fr[-1] <= 128, "the last frame is partial: %d" % fr[-1])
