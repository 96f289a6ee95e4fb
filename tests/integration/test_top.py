# SPDX-License-Identifier: MIT
"""Issue 24: `memtrack top FILE` follows an artifact while `memtrack track`
writes it.  The command tracked here is a shell that starts a `sleep 0.1`
until a file STOP exists: a steady stream of fork/exec/exit, heap and RSS
records, ended by the test.  The plain mode (stdout not a terminal) prints
one key=value line per interval, its last one the run's final numbers,
which must be report's exactly; the terminal view is driven in tmux
(send-keys, capture-pane)."""
import re
import shutil
import subprocess
import threading
import time

from mtlib import (MEMTRACK, Artifact, Failure, check_eq, check_true, fixture, kill_group, proc_stats,
                   require, run, wait_until)

LOOP = "while [ ! -e STOP ]; do sleep 0.1; done"


class LiveTrack:
    """memtrack track of LOOP in @tmp, running until stop()."""

    def __init__(self, tmp, opts=()):
        self.tmp, self.out = tmp, tmp / "run.mtrk"
        self.p = subprocess.Popen([MEMTRACK, "track", "-q", "--flush-ms", "100", "-o",
                                   str(self.out)] + list(opts) + ["--", "sh", "-c", LOOP],
                                  cwd=str(tmp), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)

    def kill(self):
        """For a test that failed before stop(): ends the session for good."""
        if self.p.poll() is None:
            kill_group(self.p)
            self.p.wait()

    def stop(self):
        (self.tmp / "STOP").write_text("")
        try:
            _, err = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(self.p)
            raise
        require(self.p.returncode == 0, "track exited %s: %s" % (self.p.returncode, err))
        return Artifact(self.out)


def proc_state(pid):
    """The state letter of process @pid (R, S, ...), or None when it is gone."""
    return next((f[0] for p, _, f in proc_stats() if p == pid), None)


def logfmt(line):
    return dict(kv.split("=", 1) for kv in line.split())


def final_numbers(art):
    r = art.report
    return {"events": str(r["events"]), "dropped": str(r["dropped_events"]),
            "peak_heap_bytes": str(r["peak_heap_bytes"]),
            "peak_rss_bytes": str(r["peak_rss_bytes"]), "leaked_bytes": str(r["leaked_bytes"]),
            "processes": str(len(r["processes"])), "running": "0", "complete": "1"}


def test_plain_mode_follows_to_the_end(tmp):
    """top started before the file exists waits for it, prints a line per
    interval while track runs (time and events grow), and ends by itself
    after the trailer with report's numbers."""
    top = subprocess.Popen([MEMTRACK, "top", "--interval", "0.25", str(tmp / "run.mtrk")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    got = []  # top's lines as they come
    reader = threading.Thread(target=lambda: got.extend(iter(top.stdout.readline, "")), daemon=True)
    reader.start()

    def grown(key):
        vals = [int(logfmt(line)[key]) for line in got]
        return len(vals) >= 2 and vals[-1] > vals[0]
    live = None
    try:
        # top waits for the file (asleep, between looks) before track makes it
        wait_until(lambda: proc_state(top.pid) == "S", "top waiting for run.mtrk", timeout=30)
        check_eq(got, [], "top printed nothing before the file existed")
        live = LiveTrack(tmp)
        wait_until(lambda: len(got) >= 4 and grown("events") and grown("processes"),
                   "top's lines while track runs, with events and processes grown", timeout=60)
        art = live.stop()
        top.wait(timeout=30)
        reader.join(timeout=30)
        err = top.stderr.read()
    finally:
        kill_group(top)
        if live:
            live.kill()
    check_eq((top.returncode, err), (0, ""), "top's exit status and stderr")
    out = "".join(got)
    lines = [logfmt(line) for line in out.splitlines()]
    require(len(lines) >= 5, "top printed a line per interval: %r" % out)
    during, last = lines[:-1], lines[-1]
    check_eq([x.get("complete") for x in during], [None] * len(during),
             "no line before the last says complete")
    elapsed = [float(x["elapsed_s"]) for x in during]
    check_eq(elapsed, sorted(set(elapsed)), "elapsed_s strictly grows: %r" % elapsed)
    events = [int(x["events"]) for x in during]
    check_true(events == sorted(events) and events[-1] > events[0],
               "events grow while the command runs: %r" % events)
    pids = {str(q["pid"]) for q in art.report["processes"]}
    check_eq({x["busiest_pid"] for x in during if "busiest_pid" in x} - pids, set(),
             "busiest_pid: processes of the run")
    procs = [int(x["processes"]) for x in during]
    check_true(procs == sorted(procs) and procs[-1] > procs[0],
               "the shell's sleeps add processes: %r" % procs)
    want = final_numbers(art)
    check_eq({k: last.get(k) for k in want}, want, "the last line: report's numbers")
    check_eq(float(last["elapsed_s"]), round(art.report["duration_ns"] / 1e9, 3),
             "the last line's elapsed_s: the run's duration")


def test_plain_mode_missing_file_gives_up(tmp):
    """stdout not a terminal and the file never made: after 10 s top says
    that the file does not exist, exit 1 (it used to wait, silent, for
    ever)."""
    path = tmp / "never.mtrk"
    start = time.monotonic()
    p = run([MEMTRACK, "top", "--interval", "0.2", path], timeout=40)
    took = time.monotonic() - start
    check_eq((p.rc, p.stdout, p.stderr),
             (1, "", "memtrack: '%s' does not exist after 10 s; start memtrack track -o %s "
              "first, or run memtrack top -- CMD\n" % (path, path)), "top of a file nobody makes")
    check_true(10 <= took < 30, "it gave up after 10 s: %.1f s" % took)


def test_top_runs_the_command(tmp):
    """top -o FILE -- CMD: track runs CMD into FILE while top follows it;
    the command's output goes to FILE.log; the last line is report's;
    top exits with the command's status."""
    out = tmp / "grow.mtrk"
    p = run([MEMTRACK, "top", "--interval", "0.2", "-o", out, "--", "sh", "-c",
             '"$0" 2000000 1000; echo done; exit 3', fixture("heap_grow")], timeout=60)
    check_eq((p.rc, p.stderr), (3, "memtrack: wrote %s (the command's output: %s.log; memtrack "
                                "report %s for the whole report)\n" % (out, out, out)),
             "top -- CMD: the command's exit status, and what it wrote")
    lines = [logfmt(line) for line in p.stdout.splitlines()]
    require(lines, "top printed no line: %r" % p.stdout)
    art = Artifact(out)
    want = final_numbers(art)
    check_eq({k: lines[-1].get(k) for k in want}, want, "the last line: report's numbers")
    check_eq(max(q["peak_heap_bytes"] for q in art.report["processes"]
                 if q["command"] == "heap_grow"), 2000000, "heap_grow's peak heap")
    log = (tmp / "grow.mtrk.log").read_text().splitlines()
    check_eq((len(log), log[-1]), (2, "done"), "the command's output, in FILE.log: %r" % log)


def test_top_command_refusals(tmp):
    for argv, msg in ((["--"], "memtrack: no command after --; usage: memtrack top"),
                      (["x.mtrk", "--", "true"], "memtrack: top -- CMD records its own artifact: "
                       "give -o x.mtrk instead of 'x.mtrk'"),
                      (["-o", "x.mtrk"], "memtrack: -o names the artifact of top -- CMD; to follow "
                       "a file give it alone: memtrack top x.mtrk")):
        p = run([MEMTRACK, "top"] + argv)
        check_eq((p.rc, p.stderr.startswith(msg), p.stderr.count("\n")), (2, True, 1),
                 "top %s: %r" % (" ".join(argv), p.stderr))
    p = run([MEMTRACK, "top", "-o", tmp / "no" / "x.mtrk", "--", "true"])
    check_eq((p.rc, p.stderr.startswith("memtrack: cannot write"), p.stderr.count("\n")),
             (1, True, 1), "top -o into a missing directory: %r" % p.stderr)


def test_refusals(tmp):
    junk = tmp / "junk"
    junk.write_text("not an artifact\n")
    p = run([MEMTRACK, "top", str(junk)])
    check_eq((p.rc, p.stdout, p.stderr.count("\n")), (1, "", 1), "top of a non-artifact: %r"
             % p.stderr)
    check_true(p.stderr.startswith("memtrack: cannot read '%s'" % junk), "its message: %r"
               % p.stderr)
    for argv in (["--interval", "0", str(junk)], ["--interval", "x", str(junk)]):
        p = run([MEMTRACK, "top"] + argv)
        check_eq((p.rc, p.stderr.startswith("memtrack: --interval takes seconds")), (2, True),
                 "top %s: %r" % (" ".join(argv), p.stderr))


# --- the terminal view, in tmux ---------------------------------------------

class Tmux:
    """A detached tmux session of its own, 100x30, running @shell_cmd."""

    def __init__(self, name, shell_cmd):
        require(shutil.which("tmux") is not None, "tmux is not installed (make deps)")
        self.name = name
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30",
                        shell_cmd], check=True)

    def screen(self):
        return subprocess.run(["tmux", "capture-pane", "-t", self.name, "-p"],
                              capture_output=True, text=True).stdout

    def wait_for(self, pattern, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            m = re.search(pattern, s, re.M)
            if m:
                return m
            time.sleep(0.1)
        require(False, "the screen never showed %r:\n%s" % (pattern, self.screen()))

    def keys(self, *keys):
        subprocess.run(["tmux", "send-keys", "-t", self.name] + list(keys), check=True)

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def top_in_tmux(tmp, name):
    """tmux running top on tmp/run.mtrk, then its exit status and the
    terminal's mode (icanon or -icanon) once it ended."""
    return Tmux(name, "cd '%s' && '%s' top --interval 0.3 run.mtrk; echo \"rc=$?\"; "
                "stty -a | grep -o -- '-*icanon\\b'; sleep 60" % (tmp, MEMTRACK))


VIEW = (r"^heap   [\d.]+ \S*B live, peak", r"^mapped [\d.]+ \S*B, peak [\d.]+ \S*B;  memory ",
        r"^RSS    [\d.]+ \S*B \(anon",
        r"^processes \d+, [12] running", r"^ +PID  COMMAND +HEAP",
        r"^ +\d+  sh ", r"^call sites holding the most heap:",
        r"^recording   q quits")


def whole_view(screen):
    """@screen when it shows every line of VIEW, else None."""
    return screen if all(re.search(want, screen, re.M) for want in VIEW) else None


def test_view_redraws_then_quits_on_q_and_ctrl_c(tmp):
    live = LiveTrack(tmp, ["--stacks"])
    try:
        for key, name in (("q", "mt-top-q"), ("C-c", "mt-top-c")):
            t = top_in_tmux(tmp, name)
            try:
                t.wait_for(r"^memtrack top  run\.mtrk  sh -c while")
                first = t.wait_for(r"^elapsed ([\d.]+) s   events (\d+)")
                # a redraw shows a later time: wait for one (every 0.3 s; later when loaded)
                wait_until(lambda: float(t.wait_for(r"^elapsed ([\d.]+) s   events (\d+)").group(1))
                           > float(first.group(1)), "%s: the view redrawn after elapsed %s"
                           % (key, first.group(1)), timeout=30)
                # a capture may catch a redraw half done: wait for a whole view
                try:
                    s = wait_until(lambda: whole_view(t.screen()), "%s: a whole view" % key, timeout=30)
                except Failure:
                    s = t.screen()
                for want in VIEW:
                    check_true(re.search(want, s, re.M) is not None,
                               "%s: the view shows %r:\n%s" % (key, want, s))
                t.keys(key)
                t.wait_for(r"^rc=0$")
                # the shell prints stty's word after rc=: wait for it, then check it
                mode = t.wait_for(r"^-*icanon$")
                check_eq(mode.group(0), "icanon",
                         "%s: the terminal's mode restored:\n%s" % (key, t.screen()))
                check_eq(live.p.poll(), None, "%s: track still running after top quit" % key)
            finally:
                t.close()
    except BaseException:
        live.kill()
        raise
    art = live.stop()
    check_eq(art.report["exit_code"], 0, "the command's exit code")


def test_view_of_top_running_the_command(tmp):
    """top -- CMD in one terminal: the view of the run it started; q stops
    the command (SIGINT through track), and the artifact is whole."""
    t = Tmux("mt-top-cmd", "cd '%s' && '%s' top --interval 0.3 -o cmd.mtrk -- sh -c '%s'; "
             "echo \"rc=$?\"; sleep 60" % (tmp, MEMTRACK, LOOP))
    try:
        t.wait_for(r"^memtrack top  cmd\.mtrk  sh -c while")
        t.wait_for(r"^processes \d+, [12] running", timeout=30)
        t.keys("q")
        t.wait_for(r"^rc=130$", timeout=30)
        check_true("memtrack: wrote cmd.mtrk (the command's output: cmd.mtrk.log" in
                   "".join(t.screen().split("\n")), "it says what it wrote:\n%s" % t.screen())
    finally:
        t.close()
    rep = Artifact(tmp / "cmd.mtrk").report
    check_eq((rep["truncated"], rep["exit_signal"]), (False, 2),
             "the artifact is whole; the command ended by the SIGINT")


def test_view_ends_when_the_artifact_is_complete(tmp):
    live = LiveTrack(tmp)
    t = top_in_tmux(tmp, "mt-top-end")
    try:
        t.wait_for(r"^recording   q quits")
        art = live.stop()
        t.wait_for(r"^rc=0$")
        s = t.screen()
        check_true(re.search(r"^complete: the command exited with 0$", s, re.M) is not None,
                   "the last view says so:\n%s" % s)
        m = re.search(r"^elapsed [\d.]+ s   events (\d+) \(\d+/s\)   (\d+) dropped$", s, re.M)
        require(m is not None, "the last view's events line:\n%s" % s)
        check_eq((int(m.group(1)), int(m.group(2))),
                 (art.report["events"], art.report["dropped_events"]),
                 "events and drops of the last view: report's")
        check_true(re.search(r"^processes %d, 0 running$" % len(art.report["processes"]), s,
                             re.M) is not None, "the process count: report's\n%s" % s)
        check_true(re.search(r"^mapped peak [\d.]+ \S*B, [\d.]+ \S*B still mapped at exit;  "
                             r"memory peak [\d.]+ \S*B$", s, re.M) is not None,
                   "the last view's mapped line:\n%s" % s)
    finally:
        t.close()
        live.kill()


def test_stopped_writer_seen_on_a_killed_run(tmp):
    """Issue 41: memtrack SIGKILLed while top follows its file: top notices
    the writer is gone (its lock released, no trailer), prints a last line
    with stopped=1 and an elapsed time that stops at the last record, says
    in one line that the recording stopped without finishing, and exits 0
    within seconds instead of counting on."""
    live = LiveTrack(tmp)
    top = None
    try:
        wait_until(lambda: live.out.exists(), "track's artifact", timeout=30)
        top = subprocess.Popen([MEMTRACK, "top", "--interval", "0.2", str(live.out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        time.sleep(1.0)
        check_eq(top.poll(), None, "top follows while track runs")
        live.p.kill()  # memtrack alone, SIGKILL: the shell loop runs on
        live.p.wait()
        t0 = time.monotonic()
        out, err = top.communicate(timeout=20)
        waited = time.monotonic() - t0
    finally:
        (tmp / "STOP").write_text("")
        if top:
            kill_group(top)
        live.kill()
    lines = [logfmt(line) for line in out.splitlines()]
    require(len(lines) >= 2, "top's lines: %r" % out)
    check_eq((top.returncode, [x.get("stopped") for x in lines]),
             (0, [None] * (len(lines) - 1) + ["1"]), "top's exit status and stopped=1 last only")
    check_true(waited < 10, "top ended %.1f s after the kill" % waited)
    rep = Artifact(live.out).report  # a file without trailer: its duration ends at its last record
    check_eq((rep["truncated"], float(lines[-1]["elapsed_s"])),
             (True, round(rep["duration_ns"] / 1e9, 3)),
             "the last line's elapsed_s: up to the last record, not the wall clock")
    check_eq(err, "memtrack: %s: the recording stopped without finishing (no trailer, and no "
                  "memtrack writes it any more: it was killed, or this is a copy); memtrack "
                  "report reads what it holds\n" % live.out, "top's stderr")


def test_stopped_writer_seen_on_a_cut_copy(tmp):
    """A finished artifact cut before its trailer (a copy, nobody writes it):
    top says at once that it stopped without finishing, exit 0."""
    live = LiveTrack(tmp)
    time.sleep(0.5)
    live.stop()
    data = live.out.read_bytes()
    cut = tmp / "cut.mtrk"
    cut.write_bytes(data[:len(data) - 64])
    p = run([MEMTRACK, "top", str(cut)], timeout=20)
    lines = [logfmt(line) for line in p.stdout.splitlines()]
    check_eq((p.rc, len(lines), lines[-1].get("stopped") if lines else None), (0, 1, "1"),
             "top of a cut copy: exit status, lines, stopped=1 (%r)" % p.stderr)
    check_true(p.stderr.startswith("memtrack: %s: the recording stopped without finishing" % cut),
               "its message: %r" % p.stderr)
