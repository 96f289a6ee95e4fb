# SPDX-License-Identifier: MIT
"""The control socket: track --control PATH / --start-disabled, the
enable/disable/ping/mark protocol (docs/CONTROL.md), libmemtrack-ctl,
memtrack ctl, the mark/enable/disable records and report's markers,
windows and --between."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import mtlib
from mtlib import (MEMTRACK, REPO, BUILD, ControlClient, Failure, Proc, check_eq, check_true, finish,
                   fixture, heap, kill_group, of_type, proj, require, require_eq, run,
                   shared_track, spawn_track, track, wait_until)

CONTROL_TYPES = ("mark", "enable", "disable")


def phases_run():
    """ctl_phases under --start-disabled, once for every test that looks at it."""
    d = Path(tempfile.mkdtemp(prefix="ctl-", dir=mtlib.SESSION_TMP))
    return shared_track("ctl_phases", [fixture("ctl_phases")],
                        opts=["--control", str(d / "ctl.sock"), "--start-disabled"])


def phase2_addrs(t):
    a = dict(line.split() for line in t.stdout.splitlines())
    return [int(a["a%d" % i]) for i in range(3)]


def phase2_heap(a):
    """ctl_phases' enabled phase, the only heap records of its run: three
    mallocs at the addresses @a it printed, then two of them freed."""
    return [{"type": "malloc", "addr": a[0], "size": 5002},
            {"type": "malloc", "addr": a[1], "size": 5002},
            {"type": "malloc", "addr": a[2], "size": 5002},
            {"type": "free", "addr": a[0]},
            {"type": "free", "addr": a[1]}]


def test_only_the_enabled_phase_is_recorded(tmp):
    t = phases_run()
    a = phase2_addrs(t)
    # every heap record of the whole artifact: libc start-up, phase 1 and
    # phase 3 (and the free of a[2] in it) ran disabled
    check_eq([proj(e) for e in heap(t.events)], phase2_heap(a),
             "heap records of the whole run")


def test_control_records_in_order(tmp):
    t = phases_run()
    pid = of_type(t.events, "exec")[-1]["pid"]
    ctl = [proj(e, ("ts",)) for e in t.events if e["type"] in CONTROL_TYPES]
    require(ctl, "no control record")
    start = ctl[0]
    check_eq(start["type"], "disable", "first control record (--start-disabled)")
    check_true(start["pid"] not in (e["pid"] for e in of_type(t.events, "exec")),
               "the start record's pid is memtrack's, not the command's")
    check_eq(ctl[1:],
             [{"type": "mark", "pid": pid, "tid": pid, "name": "setup"},
              {"type": "enable", "pid": pid, "tid": pid},
              {"type": "mark", "pid": pid, "tid": pid, "name": "measure"},
              {"type": "mark", "pid": pid, "tid": pid, "name": "measured"},
              {"type": "disable", "pid": pid, "tid": pid},
              {"type": "mark", "pid": pid, "tid": pid, "name": "teardown"}],
             "control records after the start")
    # dump prints them in timestamp order among the heap records
    printed = [e["type"] for e in t.events if e["type"] in CONTROL_TYPES + ("malloc", "free")]
    check_eq(printed, ["disable", "mark", "enable", "mark", "malloc", "malloc", "malloc",
                       "free", "free", "mark", "disable", "mark"], "record order")


def test_socket_env_mode_and_removal(tmp):
    # a relative --control path: the command (which changes directory) sees
    # it absolute in MEMTRACK_CONTROL; the socket is 0600 and gone at exit
    sock = tmp / "c.sock"
    probe = ('import os,stat,sys; os.chdir("/"); p=os.environ["MEMTRACK_CONTROL"]; '
             'st=os.stat(p); print(p, oct(stat.S_IMODE(st.st_mode)), stat.S_ISSOCK(st.st_mode), st.st_uid)')
    argv = [MEMTRACK, "track", "-q", "-o", str(tmp / "o.mtrk"), "--control", "c.sock", "--",
            sys.executable, "-c", probe]
    c = subprocess.run(argv, cwd=str(tmp), capture_output=True, text=True, timeout=60)
    p = Proc(argv, c.returncode, c.stdout, c.stderr)
    require_eq(p.rc, 0, "memtrack exit status: " + p.describe())
    check_eq(p.stdout.split(), [str(sock), "0o600", "True", "0"], "path, mode, socket?, owner")
    check_eq(sock.exists(), False, "socket removed at exit")


def test_report_lists_markers_and_windows(tmp):
    t = phases_run()
    r = t.report
    marks = [e for e in t.events if e["type"] == "mark"]
    check_eq(r["markers"], [{"name": e["name"], "ts": e["ts"], "pid": e["pid"]} for e in marks],
             "report's markers")
    en = of_type(t.events, "enable")
    dis = of_type(t.events, "disable")
    check_eq(r["enabled_windows"], [{"start_ns": en[0]["ts"], "end_ns": dis[1]["ts"]}],
             "report's enabled windows")
    check_eq(r["alloc_count"], 3, "alloc_count of the whole run")
    text = run([MEMTRACK, "report", t.artifact.path])
    require_eq(text.rc, 0, "report: " + text.describe())
    names = [ln.split()[2] for ln in text.stdout.splitlines() if ln.startswith("  +") and " s  " in ln
             and "(pid" in ln]
    check_eq(names, ["setup", "measure", "measured", "teardown"], "marker lines of the text report")
    check_true("heap recording on: 1 window\n" in text.stdout, "window line in: " + text.stdout)


def test_report_between_two_marks(tmp):
    t = phases_run()
    a = {e["name"]: e["ts"] for e in of_type(t.events, "mark")}
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "measure", "measured", "--json"])
    require_eq(p.rc, 0, "report --between: " + p.describe())
    check_eq(json.loads(p.stdout),
             {"from": "measure", "to": "measured", "start_ns": a["measure"],
              "end_ns": a["measured"], "duration_ns": a["measured"] - a["measure"],
              "alloc_count": 3, "total_allocated_bytes": 3 * 5002, "free_count": 2,
              "peak_heap_bytes": 3 * 5002, "leaked_count": 1, "leaked_bytes": 5002,
              "peak_mapped_bytes": 0, "peak_memory_bytes": 3 * 5002, "mapped_count": 0,
              "leaked_mapped_bytes": 0, "heap_recording_complete": True,
              "processes": [{"pid": t.report["processes"][0]["pid"], "command": "ctl_phases",
                             "alloc_count": 3, "allocated_bytes": 3 * 5002,
                             "peak_heap_bytes": 3 * 5002, "leaked_bytes": 5002,
                             "peak_mapped_bytes": 0, "peak_memory_bytes": 3 * 5002,
                             "mapped_count": 0, "leaked_mapped_bytes": 0}]},
             "the section's summary (no mapping in it)")
    # a section with recording off: nothing in it
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "setup", "measure", "--json"])
    require_eq(p.rc, 0, "report --between setup measure: " + p.describe())
    s = json.loads(p.stdout)
    check_eq((s["alloc_count"], s["free_count"], s["leaked_bytes"], s["heap_recording_complete"]),
             (0, 0, 0, False), "setup..measure (disabled until enable)")
    # measure..teardown spans the disable: complete no more
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "measure", "teardown", "--json"])
    s = json.loads(p.stdout)
    check_eq((s["alloc_count"], s["heap_recording_complete"]), (3, False), "measure..teardown")
    text = run([MEMTRACK, "report", t.artifact.path, "--between", "measure", "measured"])
    check_true("leaked:       1 allocation, 4.9 KiB not freed by the end of the section"
               in text.stdout, "text section report: " + text.stdout)


def test_report_between_missing_mark(tmp):
    t = phases_run()
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "nope", "measured"])
    check_eq(p.rc, 1, "exit status")
    check_eq(p.stderr.strip(), "memtrack: %s has no mark 'nope'; its marks: 'setup', 'measure', "
             "'measured', 'teardown' (see memtrack report %s)" % (t.artifact.path, t.artifact.path),
             "message")
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "teardown", "setup"])
    check_eq(p.rc, 1, "exit status (B before A)")
    check_true("has no mark 'setup' after mark 'teardown'" in p.stderr, "message: " + p.stderr)
    p = run([MEMTRACK, "report", t.artifact.path, "--between", "setup"])
    check_eq((p.rc, p.stderr.strip()), (2, "memtrack: --between needs two mark names; usage: "
             "memtrack report FILE --between MARK_A MARK_B; see memtrack help report"),
             "one name only")


def test_start_disabled_needs_control(tmp):
    p = run([MEMTRACK, "track", "-o", tmp / "o.mtrk", "--start-disabled", "--", "true"])
    check_eq((p.rc, p.stderr.strip()), (2, "memtrack: --start-disabled needs --control PATH, or "
             "nothing could ever enable recording; add --control PATH"), "status and message")


def start_session(tmp, opts=()):
    """memtrack --control on a fixture that waits for tmp/go; returns
    (Popen, artifact, socket path, go path) once the socket exists."""
    sock = tmp / "c.sock"
    go = tmp / "go"
    p, art = spawn_track(tmp, [fixture("wait_file"), go], opts=["--control", str(sock)] + list(opts))
    try:
        wait_until(lambda: sock.exists() or p.poll() is not None, "the control socket")
    except Failure:
        kill_group(p)
        raise
    if p.poll() is not None:
        raise Failure("memtrack exited early: " + finish(p).describe())
    return p, art, sock, go


def end_session(p, go):
    go.touch()
    done = finish(p)
    require_eq(done.rc, 0, "memtrack exit status: " + done.describe())
    return done


def test_errors_leave_the_session_running(tmp):
    p, art, sock, go = start_session(tmp)
    try:
        c = ControlClient(sock)
        check_eq(c.cmd("ping"), "ok\n", "ping")
        check_eq(c.cmd("bogus"), "error unknown command 'bogus'; use enable, disable, ping or mark NAME\n",
                 "bad command")
        check_eq(c.cmd("mark"), "error mark needs a name: mark NAME\n", "mark without a name")
        check_eq(c.cmd("mark " + "x" * 256),
                 "error mark name too long (256 bytes, at most 255); use a shorter name\n",
                 "mark name too long")
        # a second client at the same time is refused; the first goes on
        c2 = ControlClient(sock)
        check_eq(c2.answer(), "error busy: another client is connected; one client at a time, "
                 "retry when it has disconnected\n", "second client")
        c2.close()
        check_eq(c.cmd("mark first"), "ok\n", "first client after the refusal")
        c.close()
        # a client that disconnects in the middle of a command: not run
        c3 = ControlClient(sock)
        c3.send(b"mark half")
        c3.close()
        # one that sends a whole command and leaves without reading: run
        c4 = wait_until(lambda: _connect_when_free(sock), "the socket to take a new client")
        c4.send(b"mark unread\n")
        c4.close()
        c5 = wait_until(lambda: _connect_when_free(sock), "the socket to take a new client")
        check_eq(c5.cmd("mark last"), "ok\n", "a new client afterwards")
        check_eq(c5.cmd("enable"), "ok\n", "enable while enabled")
        c5.close()
    except BaseException:
        kill_group(p)
        raise
    done = end_session(p, go)
    check_true("memtrack: control: refused a second client (one at a time)" in done.stderr,
               "second client notice: " + done.stderr)
    check_true("memtrack: control: the client disconnected in the middle of a command ('mark half'); "
               "it was not run" in done.stderr, "mid-command notice: " + done.stderr)
    check_eq([(e["type"], e.get("name")) for e in art.events if e["type"] in CONTROL_TYPES],
             [("mark", "first"), ("mark", "unread"), ("mark", "last")],
             "control records (no half command, no enable while enabled)")
    check_eq(art.report["truncated"], False, "artifact complete")


def _connect_when_free(sock):
    """A ControlClient once the previous one has been dropped (ping answers ok)."""
    c = ControlClient(sock)
    try:
        if c.cmd("ping") == "ok\n":
            return c
    except OSError:
        pass    # refused as busy: memtrack closed it
    c.close()
    return None


def test_existing_path_is_an_error_and_the_run_goes_on(tmp):
    sock = tmp / "c.sock"
    sock.write_text("not a socket\n")
    t = track(tmp, [fixture("heap_pairs")], opts=["--control", str(sock), "--start-disabled"])
    check_eq(t.stderr.strip(), "memtrack: cannot create control socket '%s': the path already exists; "
             "remove it (a memtrack that was killed leaves it behind) or choose another --control "
             "path (the command runs without control, heap recording on)" % sock, "message")
    check_eq(sock.read_text(), "not a socket\n", "the existing file is left alone")
    check_eq(len([e for e in heap(t.events) if e.get("size") == 4099]), 3,
             "mallocs of 4099 recorded (recording on)")
    check_eq([e for e in t.events if e["type"] in CONTROL_TYPES], [], "control records")


def test_unwritable_directory_is_an_error_and_the_run_goes_on(tmp):
    for path, why in (("/sys/memtrack-test.sock", "Operation not permitted"),
                      (str(tmp / "missing" / "c.sock"), "No such file or directory")):
        t = track(tmp, [fixture("heap_pairs")], opts=["--control", path])
        check_eq(t.stderr.strip(), "memtrack: cannot create control socket '%s': %s; choose a path in "
                 "a directory you can write (the command runs without control, heap recording on)"
                 % (path, why), "message for " + path)
        check_eq(len([e for e in heap(t.events) if e.get("size") == 4099]), 3,
                 "mallocs of 4099 recorded with " + path)


def test_ctl_command_line(tmp):
    p, art, sock, go = start_session(tmp, ["--start-disabled"])
    try:
        r = run([MEMTRACK, "ctl", sock, "ping"])
        check_eq((r.rc, r.stdout, r.stderr), (0, "", ""), "ctl ping")
        r = run([MEMTRACK, "ctl", sock, "mark", "two", "words"])
        check_eq((r.rc, r.stderr), (0, ""), "ctl mark two words")
        r = run([MEMTRACK, "ctl", sock, "enable"])
        check_eq((r.rc, r.stderr), (0, ""), "ctl enable")
        r = run([MEMTRACK, "ctl", sock, "disable"])
        check_eq((r.rc, r.stderr), (0, ""), "ctl disable")
        r = run([MEMTRACK, "ctl", sock, "frobnicate"])
        check_eq((r.rc, r.stderr.strip()), (2, "memtrack: unknown or incomplete command 'frobnicate'; "
                 "usage: memtrack ctl PATH enable|disable|ping|mark NAME; see memtrack help ctl"),
                 "ctl bad command")
        r = run([MEMTRACK, "ctl", sock, "mark"])
        check_eq(r.rc, 2, "ctl mark without a name")
    except BaseException:
        kill_group(p)
        raise
    end_session(p, go)
    check_eq([(e["type"], e.get("name")) for e in art.events if e["type"] in CONTROL_TYPES],
             [("disable", None), ("mark", "two words"), ("enable", None), ("disable", None)],
             "control records")
    r = run([MEMTRACK, "ctl", sock, "ping"])
    check_eq((r.rc, r.stderr.strip()), (1, "memtrack: no control socket at '%s'; start memtrack "
             "track --control %s first" % (sock, sock)), "ctl after the session ended")


def test_docs_examples(tmp):
    """docs/CONTROL.md's C and Python examples, built and run as written."""
    exe = tmp / "example"
    cc = run(["cc", "-O0", "-o", exe, REPO / "docs" / "examples" / "ctl_example.c",
              "-I", REPO / "include", BUILD / "libmemtrack-ctl.a"])
    require_eq(cc.rc, 0, "building the C example: " + cc.describe())
    for name, cmd in (("c", [exe]), ("py", [sys.executable, REPO / "docs" / "examples" / "ctl_example.py"])):
        t = track(tmp, cmd, opts=["--control", str(tmp / ("%s.sock" % name)), "--start-disabled"],
                  name="%s.mtrk" % name)
        check_eq([(e["type"], e.get("name")) for e in t.events if e["type"] in CONTROL_TYPES],
                 [("disable", None), ("enable", None), ("mark", "work"), ("disable", None)],
                 "control records of the %s example" % name)


def test_sudo_invoker_owns_the_socket(tmp):
    """Under sudo (SUDO_UID/SUDO_GID, as test_sudo.py sets them) the command
    runs as nobody; it can use the 0600 socket only if nobody owns it."""
    import os
    import pwd
    import shutil
    nobody = pwd.getpwnam("nobody")
    pub = Path(tempfile.mkdtemp(prefix="mt-sudo-ctl-"))
    try:
        os.chmod(pub, 0o755)
        os.chown(pub, nobody.pw_uid, nobody.pw_gid)  # nobody makes the artifact and the socket
        exe = pub / "ctl_phases"
        shutil.copy(fixture("ctl_phases"), exe)
        os.chmod(exe, 0o755)
        out = pub / "run.mtrk"
        env = dict(os.environ, SUDO_UID=str(nobody.pw_uid), SUDO_GID=str(nobody.pw_gid),
                   SUDO_USER="nobody")
        argv = [MEMTRACK, "track", "-q", "-o", str(out), "--control", str(pub / "c.sock"),
                "--start-disabled", "--", str(exe)]
        c = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        require_eq(c.returncode, 0, "memtrack exit status (stderr %s)" % c.stderr)
        p = run([MEMTRACK, "dump", out])
        marks = [line for line in p.stdout.splitlines() if '"type":"mark"' in line]
        check_eq(len(marks), 4, "marks the command (as nobody) set")
        check_eq((pub / "c.sock").exists(), False, "socket removed at exit")
    finally:
        shutil.rmtree(pub, ignore_errors=True)
