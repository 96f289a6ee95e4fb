# SPDX-License-Identifier: MIT
"""memtrack signalled mid-run: SIGINT, SIGTERM and SIGHUP are forwarded to the
command and the artifact is finished properly; a SIGKILL'd memtrack leaves
a file readable up to its last complete frame."""
import json
import os
import signal
import subprocess

from mtlib import (MEMTRACK, Failure, check_eq, check_true, fixture, kill_group,
                   of_type, parse_dump, report_json, require, require_eq, run,
                   signal_state, spawn_track, wait_until)

BLOCK_SIZE = 5555
NBLOCKS = 10


def key(e):
    return json.dumps(e, sort_keys=True)


def snapshot(path):
    """The records dump reads from a file memtrack is still writing, or None."""
    if not os.path.exists(path):
        return None
    p = run([MEMTRACK, "dump", path])
    if p.rc != 0:
        return None        # e.g. the header is not complete yet
    return parse_dump(p.stdout)


def start_blocker(tmp, name):
    """memtrack track --flush-ms 50 -- blocker, returned once the blocker has
    made its 10 allocations (it says "ready", then waits in pause())."""
    # the dispositions the signal tests check, whatever the shell left (mtlib.signal_state)
    p, art = spawn_track(tmp, [fixture("blocker")], opts=["--flush-ms", "50"], name=name,
                         preexec_fn=signal_state())
    line = p.stdout.readline()   # EOF if memtrack or the fixture died
    if line != "ready\n":
        kill_group(p)
        _, err = p.communicate()
        raise Failure("the blocker did not get ready (read %r); memtrack: %s, stderr %r"
                      % (line, p.returncode, err))
    return p, art


def wait_for_blocks(p, art, timeout):
    """Polls `memtrack dump` on the growing artifact until it shows the 10
    allocations; returns (records, whether they showed up in time)."""
    last = [[]]

    def shown():
        evs = snapshot(art.path)
        if evs is not None:
            last[0] = evs
        return evs and sum(1 for e in evs if e["type"] == "malloc"
                           and e["size"] == BLOCK_SIZE) == NBLOCKS

    try:
        wait_until(shown, "the 10 allocations in %s" % art.path, timeout=timeout)
        return last[0], True
    except Failure:
        return last[0], False


def proc_status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return " ".join(l.strip() for l in f if l.split(":")[0]
                            in ("State", "SigBlk", "ShdPnd", "SigPnd"))
    except OSError:
        return "gone"


def check_blocks(evs, root, what):
    b = [e for e in evs if e["pid"] == root and e["type"] == "malloc"
         and e["size"] == 987651]
    require_eq(len(b), 1, "%s: begin markers" % what)
    after = [e for e in evs if e["pid"] == root and e["ts"] > b[0]["ts"]
             and e["type"] == "malloc"]
    check_eq([e["size"] for e in after], [BLOCK_SIZE] * NBLOCKS,
             "%s: malloc sizes after the begin marker" % what)


def signalled_run(tmp, sig):
    p, art = start_blocker(tmp, "sig%d.mtrk" % sig)
    # what is on disk now must survive (the 10 allocations themselves are
    # checked in the finished artifact: test_partial_frames_... checks they
    # reach the disk while memtrack runs)
    before, shown = wait_for_blocks(p, art, timeout=30)
    require(shown, "the 10 allocations on disk before the signal (dump read %d records)" % len(before))
    root = of_type(before, "exec")[0]["pid"] if of_type(before, "exec") else None
    os.kill(p.pid, sig)
    try:
        p.wait(timeout=30)  # a hang guard: it ends, promptly when the machine is not loaded
    except subprocess.TimeoutExpired:
        state = proc_status(root) if root else "pid unknown"
        kill_group(p)
        p.communicate()
        raise Failure("memtrack did not end within 30 s of %s; the command (pid %s) is "
                      "still alive: %s" % (signal.Signals(sig).name, root, state))
    _, err = p.communicate()
    root = root or of_type(parse_dump(run([MEMTRACK, "dump", art.path]).stdout), "exec")[0]["pid"]
    check_eq(p.returncode, 128 + sig, "memtrack's exit status (the command died of %s; "
             "stderr %r)" % (signal.Signals(sig).name, err))
    rep = report_json(art.path)
    check_eq(rep["truncated"], False, "report --json truncated (the trailer was written)")
    check_eq((rep.get("exit_code"), rep.get("exit_signal")), (-1, sig),
             "report --json (exit_code, exit_signal)")
    d = run([MEMTRACK, "dump", art.path])
    check_eq((d.rc, d.stderr), (0, ""), "dump of the finished artifact (rc, stderr)")
    after = parse_dump(d.stdout)
    final = {key(e) for e in after}
    check_eq([e for e in before if key(e) not in final], [],
             "records seen before the signal but missing from the artifact")
    check_eq([(e["code"], e["signal"]) for e in of_type(after, "exit") if e["pid"] == root],
             [(-1, sig)], "exit record of the command (code, signal)")
    check_blocks(after, root, "after " + signal.Signals(sig).name)


def test_sigint_forwarded_and_artifact_finished(tmp):
    signalled_run(tmp, signal.SIGINT)


def test_sigterm_forwarded_and_artifact_finished(tmp):
    signalled_run(tmp, signal.SIGTERM)


def test_partial_frames_flushed_while_running(tmp):
    """With --flush-ms 50, what the command did reaches the artifact on disk
    while memtrack still runs: the blocker's 10 allocations are readable
    within 2 s (40 flush periods) of the blocker saying it made them.  The
    2 s is the promise (--flush-ms bounds what a crash can lose), so it is
    timed, with 40 periods of slack for a loaded machine."""
    p, art = start_blocker(tmp, "growing.mtrk")
    try:
        evs, shown = wait_for_blocks(p, art, timeout=2)
    finally:
        kill_group(p)
        p.communicate()
    check_true(shown, "the 10 allocations reach the disk within 2 s (dump read %d records: %s)"
               % (len(evs), [(e["type"], e.get("size", e.get("len"))) for e in evs]))


def test_sighup_forwarded_and_artifact_finished(tmp):
    signalled_run(tmp, signal.SIGHUP)


def test_sigkilled_memtrack_leaves_readable_file(tmp):
    p, art = start_blocker(tmp, "killed.mtrk")
    before, shown = wait_for_blocks(p, art, timeout=30)
    require(shown, "the 10 allocations on disk before the SIGKILL (dump read %d records)" % len(before))
    root = of_type(before, "exec")[0]["pid"]
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    kill_group(p)          # the command, left behind in pause()
    p.communicate()
    d = run([MEMTRACK, "dump", art.path])
    check_eq(d.rc, 0, "dump exit status on a file without trailer")
    check_true(d.stderr.startswith("memtrack: ") and len(d.stderr.splitlines()) == 1,
               "dump says on stderr (one line) where the file ends: %r" % d.stderr)
    after = parse_dump(d.stdout)
    final = {key(e) for e in after}
    check_eq([e for e in before if key(e) not in final], [],
             "records on disk before the SIGKILL but not read back")
    check_blocks(after, root, "after SIGKILL")
    rep = report_json(art.path)
    check_eq(rep["truncated"], True, "report --json truncated")
    check_eq(rep["events"], len(after), "report --json events vs records dump printed")


def test_cut_trailer_reads_every_event(tmp):
    """A finished artifact cut by one byte (its trailer broken) still reads
    every event; the report says truncated."""
    p = run([MEMTRACK, "track", "-q", "-o", str(tmp / "full.mtrk"), "--",
             fixture("heap_pairs")])
    require(p.rc == 0, "track: " + p.describe())
    full = (tmp / "full.mtrk").read_bytes()
    d = run([MEMTRACK, "dump", str(tmp / "full.mtrk")])
    n = len(parse_dump(d.stdout))
    cut = tmp / "cut.mtrk"
    cut.write_bytes(full[:-1])
    d = run([MEMTRACK, "dump", str(cut)])
    check_eq(d.rc, 0, "dump exit status on the cut file")
    check_true(d.stderr.startswith("memtrack: "), "dump's message on stderr: %r" % d.stderr)
    check_eq(len(parse_dump(d.stdout)), n, "records read from the cut file")
    rep = report_json(cut)
    check_eq((rep["truncated"], rep["events"]), (True, n), "report --json (truncated, events)")
