# SPDX-License-Identifier: MIT
"""Issue 21: `memtrack attach PID` records a process that is already
running, its threads and descendants, from the attach on, never stopping it
for longer than attaching takes, and leaves nothing of memtrack's on it
afterwards, also when memtrack is killed with SIGKILL."""
import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import time

import pytest

from mtlib import (MEMTRACK, Artifact, Failure, check_eq, check_true, fixture, markers,
                   require, require_eq, run, wait_until, window)

LEAK_SIZE = 3001  # fixtures/server.c
CACHE_BLOCKS = 7


class Lines:
    """Reads lines of a pipe with a deadline (a fixture's stdout, memtrack's stderr)."""

    def __init__(self, pipe):
        self.pipe, self.buf, self.seen = pipe, b"", []

    def expect(self, prefix, timeout=20.0):
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.seen.append(text)
                if text.startswith(prefix):
                    return text
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.pipe], [], [], left)[0]:
                raise Failure("timed out waiting for a line %r; got %r" % (prefix, self.seen))
            chunk = os.read(self.pipe.fileno(), 65536)
            if not chunk:
                raise Failure("EOF waiting for a line %r; got %r" % (prefix, self.seen))
            self.buf += chunk

    def rest(self):
        """Everything until EOF, as lines."""
        while True:
            chunk = os.read(self.pipe.fileno(), 65536)
            if not chunk:
                break
            self.buf += chunk
        out = self.buf.decode(errors="replace").splitlines()
        self.buf = b""
        self.seen += out
        return out


def start_fixture(argv, user=None):
    """Starts argv (own session), waits for its "ready" line; returns (Popen, Lines)."""
    if user:
        pw = pwd.getpwnam(user)
        argv = ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                "--clear-groups"] + argv
    p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    out = Lines(p.stdout)
    out.expect("ready")
    return p, out


def start_attach(pid, out, opts=()):
    """Starts memtrack attach and waits for its "attached" line; returns (Popen, Lines)."""
    argv = [MEMTRACK, "attach", "-o", str(out)] + list(opts) + [str(pid)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    err = Lines(p.stderr)
    err.expect("memtrack: attached to %d " % pid)
    return p, err


def stop_attach(p, err, sig=signal.SIGINT):
    """Signals memtrack attach, waits for it; returns (rc, its stderr lines)."""
    p.send_signal(sig)
    lines = err.rest()
    return p.wait(timeout=60), err.seen + lines[:0]


def stop_fixture(p, out):
    p.send_signal(signal.SIGTERM)
    lines = out.rest()
    return p.wait(timeout=30), lines


def uprobe_links_of(pid):
    """The uprobe-multi links on process pid that any process holds (fdinfo)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fdinfo" % d)
        except OSError:
            continue
        for fd in fds:
            try:
                with open("/proc/%s/fdinfo/%s" % (d, fd)) as f:
                    info = f.read()
            except OSError:
                continue
            if "uprobe_multi" in info and ("\npid:\t%d\n" % pid) in info:
                found.append((int(d), int(fd)))
    return found


def session_probe_fds(marker):
    """(pid, fd) of every BPF link and perf event fd held by a process whose
    command line holds marker (memtrack and its reaper, a fork of it): the
    uprobes on 6.1 (perf-event uprobes, which no fdinfo ties to the target)
    and every link of the session."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if marker.encode() not in f.read():
                    continue
            fds = os.listdir("/proc/%s/fd" % d)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink("/proc/%s/fd/%s" % (d, fd))
            except OSError:
                continue
            if link in ("anon_inode:bpf_link", "anon_inode:[perf_event]"):
                found.append((int(d), int(fd)))
    return found


def nothing_left(pid, marker):
    """No uprobe-multi link names pid, and no process of the session holds a
    link or perf event any more: nothing of memtrack's is attached."""
    return uprobe_links_of(pid) == [] and session_probe_fds(marker) == []


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def kv(line):
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def test_attach_server_leaks(tmp):
    """The server fixture attached with --stacks for its 2 s window: exactly
    the leaks it made inside the window are recorded between its markers,
    every leak recorded is live at the end and ranked under leak_request as
    live at end (the server runs on: not leaked, issue 39), the
    frees of the blocks it allocated before the attach are unknown frees
    (never errors), each process starts with an rss record, and the fixture
    runs on after the detach with no link of memtrack's left on it."""
    srv, srv_out = start_fixture([fixture("server")])
    pid = srv.pid
    cache = [int(line.split()[1]) for line in srv_out.seen if line.startswith("cache ")]
    require_eq(len(cache), CACHE_BLOCKS, "cache blocks the fixture printed")
    out = tmp / "srv.mtrk"
    mt, mt_err = start_attach(pid, out, ["--stacks"])
    check_true(session_probe_fds(str(out)) != [], "memtrack holds links while attached")
    srv.send_signal(signal.SIGUSR1)
    srv_out.expect("window open")
    time.sleep(2)
    srv.send_signal(signal.SIGUSR2)
    closed = kv(srv_out.expect("window closed"))
    rc, lines = stop_attach(mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (stderr %r)" % lines)
    wait_until(lambda: nothing_left(pid, str(out)), "no link left on %d" % pid, timeout=30)
    check_true(proc_state(pid) not in ("T", "t"), "the fixture runs on (state %s)"
               % proc_state(pid))
    time.sleep(0.3)
    frc, phases = stop_fixture(srv, srv_out)
    check_eq(frc, 0, "the fixture's exit status")
    after = [kv(line) for line in phases if line.startswith("phase 2 ")]
    check_true(after and int(after[0]["requests"]) > 0,
               "the fixture served requests after the detach: %r" % phases)

    art = Artifact(out)
    evs = art.events
    win = window(evs, pid)
    leaks = [e for e in win if e["type"] == "malloc" and e["size"] == LEAK_SIZE]
    check_eq(len(leaks), int(closed["leaks"]), "leaks recorded inside the fixture's window")
    check_eq((leaks[0]["addr"], leaks[-1]["addr"]) if leaks else None,
             (int(closed["first"]), int(closed["last"])), "first and last leak addresses")
    all_leaks = [e for e in evs if e["type"] == "malloc" and e["size"] == LEAK_SIZE]
    last_free = {}
    for e in evs:
        if e["type"] == "free":
            last_free[e["addr"]] = e["ts"]
    check_eq([e["addr"] for e in all_leaks if last_free.get(e["addr"], 0) > e["ts"]], [],
             "leaked blocks freed")
    # frees of blocks the recording never saw allocated
    seen, unknown = set(), []
    for e in evs:
        if e["type"] in ("malloc", "calloc", "aligned_alloc") and e["addr"]:
            seen.add(e["addr"])
        elif e["type"] == "realloc":
            seen.discard(e.get("old_addr"))
            seen.add(e["addr"])
        elif e["type"] == "free" and e["addr"]:
            if e["addr"] not in seen:
                unknown.append(e["addr"])
            seen.discard(e["addr"])
    check_true(set(cache) <= {e["addr"] for e in win if e["type"] == "free"},
               "the cache blocks' frees are recorded in the window")
    rep = art.report
    check_eq(rep["attached"], True, "report --json: attached")
    check_true(0 < rep["attach_ns"] <= evs[0]["ts"], "attach_ns %r is before the first record %r"
               % (rep["attach_ns"], evs[0]["ts"]))
    check_eq(rep["unknown_free_count"], len(unknown), "report's unknown_free_count")
    check_true(set(cache) <= set(unknown), "the cache blocks' frees are unknown frees")
    # the leak candidates: ranked by bytes and by age, at leak_request
    p = run([MEMTRACK, "report", out, "--json", "--top", "3"])
    require_eq(p.rc, 0, "report --top 3 (%r)" % p.stderr)
    top = json.loads(p.stdout)["top"]
    end = max(e["ts"] for e in evs)
    ages = [end - e["ts"] for e in all_leaks]
    site = top["live_at_end"][0] if top["live_at_end"] else {}
    check_eq([f["function"] for f in site.get("frames", [])[:1]], ["leak_request"],
             "the first site by live_at_end")
    check_eq((site.get("live_at_end_count"), site.get("live_at_end_bytes"),
              site.get("live_at_end_age_max_ns"), site.get("live_at_end_age_mean_ns")),
             (len(all_leaks), LEAK_SIZE * len(all_leaks), max(ages),
              sum(ages) // len(ages)), "the leak site's blocks live at end (count, bytes, ages)")
    check_eq((rep["leaked_count"], rep["leaked_bytes"], top["leaked"], top["leak_age"]),
             (0, 0, [], []), "nothing leaked: the server is alive at the end")
    check_eq(rep["live_at_end_processes"], 1, "one process holds blocks at the end")
    check_true(rep["live_at_end_count"] >= len(all_leaks), "the leaks are among the live blocks")
    text = run([MEMTRACK, "report", out]).stdout
    check_true("leaked:       0 allocations, 0 B never freed\n" in text, "text: nothing leaked:\n" + text)
    check_true(("live at end:  %d allocation%s, " % (rep["live_at_end_count"],
                                                    "" if rep["live_at_end_count"] == 1 else "s"))
               in text, "text: live at end:\n" + text)
    rss = [e for e in evs if e["type"] == "rss" and e["pid"] == pid]
    begin, _ = markers(evs, pid)
    check_true(rss and rss[0]["ts"] < begin["ts"] and rss[0]["file"] > 0,
               "an rss record of %d at the attach: %r" % (pid, rss[:1]))
    # later ones come from the kernel, its mm adopted at its first page fault (rss.bpf.c)
    check_true(len(rss) >= 2, "rss records of %d after the attach's: %r" % (pid, rss))


def test_attach_unreadable(tmp):
    """memtrack with CAP_BPF and CAP_PERFMON but as nobody cannot read init's
    memory map: one line naming CAP_SYS_PTRACE, exit 2."""
    require(os.geteuid() == 0, "needs root to start memtrack as nobody with capabilities")
    pw = pwd.getpwnam("nobody")
    p = run(["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid, "--clear-groups",
             "--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon",
             MEMTRACK, "attach", "-o", tmp / "x.mtrk", "1"])
    check_eq((p.rc, p.stderr), (2, "memtrack: cannot read process 1's memory map (/proc/1/maps: "
             "Permission denied); attaching to another user's process needs CAP_SYS_PTRACE: "
             "run memtrack as root or with that capability\n"), "memtrack attach 1 as nobody")


def test_attach_fails_part_way(tmp):
    """A tree of 41 processes under a hard limit of 72 fds: attaching runs
    out of fds part way, exit 1 with one line, no artifact, and nothing is
    left attached to any process of the tree, none stopped."""
    import resource

    sh = subprocess.Popen(["sh", "-c", 'for i in $(seq 40); do sleep 60 & done; echo ready; wait'],
                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        Lines(sh.stdout).expect("ready")
        out = tmp / "part.mtrk"

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (72, 72))
        p = subprocess.run([MEMTRACK, "attach", "-o", str(out), str(sh.pid)], preexec_fn=limit,
                           capture_output=True, text=True, timeout=120)
        check_eq(p.returncode, 1,
                 "exit status (stderr %r)" % p.stderr)
        check_true(p.stderr.startswith("memtrack: cannot attach to process ") and
                   p.stderr.endswith(": Too many open files; nothing is left attached\n") and
                   p.stderr.count("\n") == 1, "its one line: %r" % p.stderr)
        check_eq(out.exists(), False, "an artifact of the failed attach")
        tree = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
                and pid != str(sh.pid) and os.path.exists("/proc/%s/stat" % pid)
                and _ppid(int(pid)) == sh.pid] + [sh.pid]
        check_eq(len(tree), 41, "the tree's processes")
        wait_until(lambda: all(nothing_left(pid, str(out)) for pid in tree),
                   "no link left on the tree", timeout=30)
        check_eq([pid for pid in tree if proc_state(pid) in ("T", "t")], [],
                 "stopped processes of the tree")
    finally:
        os.killpg(sh.pid, signal.SIGKILL)
        sh.wait()


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def test_attach_refuses(tmp):
    """What cannot be attached: one line naming it, exit 2, no artifact."""
    out = tmp / "x.mtrk"
    zombie = subprocess.Popen(["sh", "-c", "sleep 0.01 & exec sleep 30"],
                              start_new_session=True)
    zpid = None
    try:
        def child():
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        with open("/proc/%s/stat" % d) as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if int(fields[1]) == zombie.pid and fields[0] == "Z":
                        return int(d)
            return None
        zpid = wait_until(child, "a zombie child of sleep")
        free_pid = 4194000
        while os.path.exists("/proc/%d" % free_pid):
            free_pid -= 1
        cases = [
            ([str(free_pid)], "memtrack: no process %d; give the PID of a running process "
             "(see ps or pidof)\n" % free_pid),
            (["2"], "memtrack: process 2 is a kernel thread: it has no user space to record; "
             "give the PID of a user process\n"),
            ([str(zpid)], "memtrack: process %d has exited (a zombie, not yet reaped by its "
             "parent): nothing runs to record\n" % zpid),
            (["abc"], "memtrack: invalid PID 'abc'; give the process id of a running process, "
             "e.g. memtrack attach $(pidof server)\n"),
            (["--duration", "0", "1"], "memtrack: invalid --duration '0'; give seconds, e.g. "
             "--duration 30 or 0.5\n"),
        ]
        for args, msg in cases:
            p = run([MEMTRACK, "attach", "-o", out] + args)
            check_eq((p.rc, p.stderr), (2, msg), "memtrack attach %s" % " ".join(args))
        # memtrack itself: a shell that execs memtrack attach $$
        p = run(["sh", "-c", 'exec "$0" attach -o "$1" $$', MEMTRACK, out])
        check_eq(p.rc, 2, "memtrack attach of itself (rc): %r" % p.stderr)
        check_true(p.stderr.startswith("memtrack: process ") and
                   p.stderr.endswith(" is this memtrack; give the PID of another process\n"),
                   "its message: %r" % p.stderr)
        check_eq(out.exists(), False, "an artifact of a refused attach")
    finally:
        zombie.kill()
        zombie.wait()


def window_run(srv, srv_out, mt, mt_err, secs=0.5):
    """Opens the fixture's window, keeps it open secs, closes it, stops
    memtrack; returns (the "window closed" fields, memtrack's rc, its lines)."""
    srv.send_signal(signal.SIGUSR1)
    srv_out.expect("window open")
    time.sleep(secs)
    srv.send_signal(signal.SIGUSR2)
    closed = kv(srv_out.expect("window closed"))
    rc, lines = stop_attach(mt, mt_err)
    return closed, rc, lines


def check_window_leaks(evs, pid, closed, what):
    leaks = [e for e in window(evs, pid) if e["type"] == "malloc" and e["size"] == LEAK_SIZE]
    check_eq(len(leaks), int(closed["leaks"]), "%s: leaks inside the window" % what)
    check_eq((leaks[0]["addr"], leaks[-1]["addr"]) if leaks else None,
             (int(closed["first"]), int(closed["last"])), "%s: first and last leak" % what)


def test_attach_threads(tmp):
    """A process with 3 more threads: each thread's leak inside the window
    is recorded once, under its own tid."""
    srv, srv_out = start_fixture([fixture("server"), "10000", "3"])
    out = tmp / "thr.mtrk"
    mt, mt_err = start_attach(srv.pid, out)
    closed, rc, lines = window_run(srv, srv_out, mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    tids = {int(line.split()[1]): int(line.split()[2])
            for line in srv_out.seen if line.startswith("thread ")}
    stop_fixture(srv, srv_out)
    evs = Artifact(out).events
    for t, tid in sorted(tids.items()):
        got = [e for e in evs if e["type"] == "malloc" and e["size"] == 4000 + t]
        check_eq([(e["pid"], e["tid"]) for e in got], [(srv.pid, tid)],
                 "thread %d's leak (pid, tid)" % t)
    check_eq(len(tids), 3, "threads the fixture reported")
    check_window_leaks(evs, srv.pid, closed, "main thread")


def test_attach_fork_exec(tmp):
    """A child forked while attached is followed: its own leaks before its
    exec, then the exec'd spinner's 1000 pairs between its markers."""
    srv, srv_out = start_fixture([fixture("server"), "10000", "0", fixture("spinner"), "1000"])
    out = tmp / "fork.mtrk"
    mt, mt_err = start_attach(srv.pid, out)
    closed, rc, lines = window_run(srv, srv_out, mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    child = [line for line in srv_out.seen if line.startswith("child ")]
    stop_fixture(srv, srv_out)
    require_eq(len(child), 1, "the fixture's child line")
    cpid, code = int(child[0].split()[1]), int(child[0].split()[3])
    check_eq(code, 0, "the child's exit code")
    evs = Artifact(out).events
    forks = [e for e in evs if e["type"] == "fork" and e.get("child") == cpid]
    check_eq(len(forks), 1, "fork records of the child")
    execs = [e for e in evs if e["type"] == "exec" and e["pid"] == cpid]
    require_eq(len(execs), 1, "exec records of the child")
    pre = [e for e in evs if e["pid"] == cpid and e["type"] == "malloc" and e["size"] == 4321
           and e["ts"] < execs[0]["ts"]]
    check_eq(len(pre), 5, "the child's mallocs before its exec")
    win = window(evs, cpid)
    check_eq((sum(1 for e in win if e["type"] == "malloc" and e["size"] == 5001),
              sum(1 for e in win if e["type"] == "free")), (1000, 1000),
             "the exec'd spinner's mallocs and frees between its markers")
    check_window_leaks(evs, srv.pid, closed, "the server")


def test_attach_static(tmp):
    """A statically linked process (malloc inside the executable)."""
    srv, srv_out = start_fixture([fixture("server_static")])
    out = tmp / "static.mtrk"
    mt, mt_err = start_attach(srv.pid, out)
    closed, rc, lines = window_run(srv, srv_out, mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    stop_fixture(srv, srv_out)
    check_window_leaks(Artifact(out).events, srv.pid, closed, "server_static")


def test_attach_other_user(tmp):
    """A process run as nobody, attached by root."""
    require(os.geteuid() == 0, "needs root")
    nobody = pwd.getpwnam("nobody")
    srv, srv_out = start_fixture([fixture("server")], user="nobody")
    out = tmp / "nobody.mtrk"
    with open("/proc/%d/status" % srv.pid) as f:
        uid = [line.split()[1] for line in f if line.startswith("Uid:")]
    check_eq(uid, [str(nobody.pw_uid)], "the fixture's uid")
    mt, mt_err = start_attach(srv.pid, out)
    closed, rc, lines = window_run(srv, srv_out, mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    stop_fixture(srv, srv_out)
    check_window_leaks(Artifact(out).events, srv.pid, closed, "nobody's server")


def test_attach_shell_children(tmp):
    """A shell with two running servers: the tree is found (3 processes),
    each child's window recorded exactly; the run ends when the tree has
    exited."""
    srv = fixture("server")
    files = [tmp / "s1.out", tmp / "s2.out"]
    sh = subprocess.Popen(["sh", "-c", '"$0" > "$1" & "$0" > "$2" & echo started; wait',
                           srv, files[0], files[1]], stdout=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    Lines(sh.stdout).expect("started")
    wait_until(lambda: all(f.exists() and "ready" in f.read_text() for f in files),
               "both servers ready")
    pids = [int(f.read_text().split("ready ")[1].split()[0]) for f in files]
    out = tmp / "sh.mtrk"
    mt, mt_err = start_attach(sh.pid, out)
    check_true(any("(3 processes)" in line for line in mt_err.seen),
               "memtrack found the tree of 3: %r" % mt_err.seen)
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    for f in files:
        wait_until(lambda: "window open" in f.read_text(), "window open in %s" % f)
    time.sleep(0.3)
    for pid in pids:
        os.kill(pid, signal.SIGUSR2)
    for f in files:
        wait_until(lambda: "window closed" in f.read_text(), "window closed in %s" % f)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    check_eq(sh.wait(timeout=30), 0, "the shell's exit")
    # the tree has exited: memtrack ends by itself
    rest = mt_err.rest()
    check_eq(mt.wait(timeout=30), 0, "memtrack attach's exit status (%r)" % rest)
    check_true(any(line.endswith(", the tree exited") for line in rest),
               "the summary says the tree exited: %r" % rest)
    evs = Artifact(out).events
    for pid, f in zip(pids, files):
        closed = kv([line for line in f.read_text().splitlines()
                     if line.startswith("window closed")][0])
        check_window_leaks(evs, pid, closed, "server %d" % pid)
    exits = sorted(e["pid"] for e in evs if e["type"] == "exit")
    check_eq(exits, sorted(pids + [sh.pid]), "exit records of the tree")


def test_attach_sigkill(tmp):
    """memtrack SIGKILLed while attached: the process runs on, unstopped,
    and no uprobe link is left on it once memtrack's reaper is done."""
    srv, srv_out = start_fixture([fixture("server")])
    out = tmp / "kill.mtrk"
    mt, mt_err = start_attach(srv.pid, out, ["--stacks"])
    check_true(session_probe_fds(str(out)) != [], "memtrack holds links while attached")
    mt.kill()
    mt.wait(timeout=30)
    wait_until(lambda: nothing_left(srv.pid, str(out)), "no link left on the fixture",
               timeout=30)
    check_true(proc_state(srv.pid) not in ("T", "t"), "the fixture is not stopped")
    srv.send_signal(signal.SIGUSR1)
    srv_out.expect("window open")
    srv.send_signal(signal.SIGUSR2)
    srv_out.expect("window closed")
    frc, phases = stop_fixture(srv, srv_out)
    check_eq(frc, 0, "the fixture's exit status")
    check_eq(len([line for line in phases if line.startswith("phase ")]), 3,
             "the fixture's phases: %r" % phases)


def test_attach_duration(tmp):
    """--duration ends the recording by itself, the process running on."""
    srv, srv_out = start_fixture([fixture("server")])
    out = tmp / "dur.mtrk"
    p = run([MEMTRACK, "attach", "--duration", "0.5", "-o", out, srv.pid])
    check_eq(p.rc, 0, "memtrack attach --duration 0.5 (%r)" % p.stderr)
    check_true(proc_state(srv.pid) not in ("T", "t", "Z"), "the fixture runs on")
    stop_fixture(srv, srv_out)
    rep = Artifact(out).report
    check_true(rep["alloc_count"] > 0, "allocations recorded in 0.5 s")


def test_attach_control(tmp):
    """--control: a mark and a disable sent while attached are in the artifact."""
    srv, srv_out = start_fixture([fixture("server")])
    out, sock = tmp / "ctl.mtrk", tmp / "ctl.sock"
    mt, mt_err = start_attach(srv.pid, out, ["--control", str(sock)])
    for cmd in (["mark", "hello"], ["disable"]):
        p = run([MEMTRACK, "ctl", sock] + cmd)
        check_eq(p.rc, 0, "memtrack ctl %s (%r)" % (" ".join(cmd), p.stderr))
    rc, lines = stop_attach(mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
    stop_fixture(srv, srv_out)
    evs = Artifact(out).events
    marks = [e for e in evs if e["type"] == "mark"]
    check_eq([m.get("name") for m in marks], ["hello"], "marks")
    dis = [e for e in evs if e["type"] == "disable"]
    require_eq(len(dis), 1, "disable records")
    check_eq([e["type"] for e in evs if e["type"] in ("malloc", "free")
              and e["ts"] > dis[0]["ts"]], [], "heap records after the disable")


def test_attach_leaves_other_memtrack(tmp):
    """A shell running `memtrack track` (another session): attaching the
    shell leaves that memtrack and its tree to it (two sessions parking one
    process would race); attaching that memtrack is refused."""
    inner = tmp / "inner.mtrk"
    sh = subprocess.Popen(["sh", "-c", '"$0" track -q --no-fast -o "$1" -- sleep 30 & wait',
                           MEMTRACK, inner], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        inner_mt = wait_until(lambda: [p for p in _children(sh.pid)], "the inner memtrack")[0]
        wait_until(lambda: any(open("/proc/%d/comm" % c).read().strip() == "sleep"
                               for c in _children(inner_mt)), "the inner memtrack's sleep")
        out = tmp / "outer.mtrk"
        mt, mt_err = start_attach(sh.pid, out)
        check_true(any("attached to %d (1 processes)" % sh.pid in line for line in mt_err.seen),
                   "the outer tree is the shell alone: %r" % mt_err.seen)
        rc, lines = stop_attach(mt, mt_err)
        check_eq(rc, 0, "memtrack attach's exit status (%r)" % lines)
        p = run([MEMTRACK, "attach", "-o", tmp / "x.mtrk", inner_mt])
        check_eq((p.rc, p.stderr), (2, "memtrack: process %d is a memtrack: its tree is that "
                 "memtrack's recording; attach to a process outside it, or record it with that "
                 "memtrack\n" % inner_mt), "memtrack attach of another memtrack")
    finally:
        os.killpg(sh.pid, signal.SIGTERM)
        sh.wait(timeout=30)


def _children(pid):
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and _ppid(int(d)) == pid]


def test_attach_stopped_target_stays_stopped(tmp):
    """A target its user stopped (SIGSTOP, a debugger) before the attach is
    left stopped when memtrack detaches: memtrack resumes only what it
    parked itself.  Resumed by its user, it runs on to a clean exit."""
    srv, srv_out = start_fixture([fixture("server")])
    os.kill(srv.pid, signal.SIGSTOP)
    wait_until(lambda: proc_state(srv.pid) == "T", "the fixture is stopped")
    out = tmp / "stopped.mtrk"
    p = run([MEMTRACK, "attach", "--duration", "0.5", "-o", out, srv.pid])
    check_eq(p.rc, 0, "memtrack attach --duration 0.5 (%r)" % p.stderr)
    wait_until(lambda: nothing_left(srv.pid, str(out)), "no link left on the fixture",
               timeout=30)
    check_eq(proc_state(srv.pid), "T", "the fixture is still stopped after the detach")
    rep = Artifact(out).report
    check_eq(rep["alloc_count"], 0, "a stopped process allocates nothing")
    os.kill(srv.pid, signal.SIGCONT)
    frc, phases = stop_fixture(srv, srv_out)
    check_eq(frc, 0, "the fixture's exit status")


def test_attach_names(tmp):
    """Every process found at the attach is named by a running record (its
    /proc/PID/exe, the kernel's path, ' (deleted)' for a removed file) that
    dump shows, and report names it so, text and JSON, with the parents the
    tree has: a shell, a sleep, and a copy of sleep deleted while running."""
    exe = tmp / "sleeper"
    shutil.copy("/usr/bin/sleep", exe)
    sh = subprocess.Popen(["sh", "-c", '"$0" 60 & sleep 60 & echo started; wait', exe],
                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        Lines(sh.stdout).expect("started")
        want = {sh.pid: os.path.realpath("/bin/sh")}
        sh_parent = _ppid(sh.pid)

        def both():
            kids = {k: os.readlink("/proc/%d/exe" % k) for k in _children(sh.pid)}
            return kids if sorted(kids.values()) == sorted([str(exe), "/usr/bin/sleep"]) else None
        wait_until(both, "the shell's two children started")
        kids = both()
        os.unlink(exe)
        for k, path in kids.items():
            want[k] = path + (" (deleted)" if path == str(exe) else "")
        out = tmp / "names.mtrk"
        p = run([MEMTRACK, "attach", "--duration", "0.3", "-o", out, sh.pid])
        require_eq(p.rc, 0, "memtrack attach (%r)" % p.stderr)
    finally:
        os.killpg(sh.pid, signal.SIGTERM)
        sh.wait(timeout=30)
    art = Artifact(out)
    running = [e for e in art.events if e["type"] == "running"]
    check_eq({e["pid"]: (e["path"], e["comm"]) for e in running},
             {k: (v, 0) for k, v in want.items()}, "the running records dump shows")
    check_eq({e["pid"]: e["ppid"] for e in running},
             {k: sh_parent if k == sh.pid else sh.pid for k in want}, "their parents at attach")
    procs = {q["pid"]: (q["command"], q["ppid"]) for q in art.report["processes"]}
    check_eq(procs, {k: (os.path.basename(v), 0 if k == sh.pid else sh.pid)
                     for k, v in want.items()}, "report --json: each process's command and ppid")
    p = run([MEMTRACK, "report", out])
    require_eq(p.rc, 0, "memtrack report (%r)" % p.stderr)
    rows = {int(line.split()[0]): line for line in p.stdout.splitlines()
            if line.startswith("  ") and line.split()[0].isdigit()}
    for k, v in want.items():
        check_true(k in rows and " %s " % os.path.basename(v) in rows[k] and "?" not in rows[k],
                   "report's line of %d names %r: %r" % (k, os.path.basename(v), rows.get(k)))


RESIDENT_MIB = 64


def start_resident(fork=False):
    """fixtures/resident: RESIDENT_MIB MiB written in base pages before the
    attach; returns (Popen, Lines, [pids])."""
    p = subprocess.Popen([str(fixture("resident")), str(RESIDENT_MIB)] + (["fork"] if fork else []),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    out = Lines(p.stdout)
    return p, out, [int(x) for x in out.expect("ready").split()[1:]]


def resident_command(p, out, cmd):
    p.stdin.write(cmd.encode() + b"\n")
    p.stdin.flush()
    out.expect(cmd + "ed" if cmd == "reap" else cmd + "ped")


def physical_records(out):
    return [e for e in Artifact(out).events if e["type"] == "physical"]


def present_pfns(pid):
    """The page frames pid maps, from its pagemap (root sees them)."""
    pfns = set()
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/pagemap" % pid, "rb") as pm:
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if line.split()[-1] in ("[vsyscall]", "[vvar]", "[vdso]", "[vvar_vclock]"):
                continue
            pm.seek(start // 4096 * 8)
            data = pm.read((end - start) // 4096 * 8)
            for i in range(0, len(data), 8):
                e = int.from_bytes(data[i:i + 8], "little")
                if e >> 63:
                    pfns.add(e & ((1 << 55) - 1))
    return pfns


def test_attach_physical_resident(tmp):
    """--physical at attach counts the pages the process has resident: its
    first physical record (memtrack's, at the attach) holds the fixture's
    64 MiB and its other resident frames (within 1% of the frames its
    pagemap shows), and unmapping the 64 MiB after the attach takes exactly
    16384 pages off: their frees find the bits the attach set."""
    require(os.geteuid() == 0, "needs root to read page frame numbers")
    require(os.sysconf("SC_PAGE_SIZE") == 4096, "the fixture counts 4 KiB pages")
    fx, fx_out, (pid,) = start_resident()
    pages = RESIDENT_MIB << 8
    try:
        frames = len(present_pfns(pid))
        out = tmp / "res.mtrk"
        mt, mt_err = start_attach(pid, out, ["--physical"])
        resident_command(fx, fx_out, "unmap")
        time.sleep(0.3)
        rc, lines = stop_attach(mt, mt_err)
        check_eq(rc, 0, "memtrack attach --physical (%r)" % lines)
    finally:
        fx.stdin.close()
        fx.wait(timeout=30)
    recs = physical_records(out)
    require(recs, "physical records")
    first = recs[0]
    check_eq(first["pid"], mt.pid, "the first physical record is memtrack's, at the attach")
    check_true(pages <= first["bytes"] // 4096 and abs(first["bytes"] // 4096 - frames) <= frames // 100,
               "pages counted at attach %d: the fixture's %d, of %d frames mapped"
               % (first["bytes"] // 4096, pages, frames))
    check_eq(recs[-1]["bytes"], first["bytes"] - pages * 4096,
             "physical after the fixture unmapped its %d resident pages" % pages)
    check_eq(Artifact(out).report["peak_physical_bytes"], first["bytes"], "report's peak_physical_bytes")


def test_attach_physical_shared(tmp):
    """A parent and a child sharing 64 MiB of frames (written before a fork,
    neither wrote since), attached: the frames are counted once (the count
    at attach is within 1% of the union of both pagemaps, 16384 pages short
    of their sum); the parent's unmap frees nothing (the child still maps
    them), the child's exit frees exactly the 16384."""
    require(os.geteuid() == 0, "needs root to read page frame numbers")
    require(os.sysconf("SC_PAGE_SIZE") == 4096, "the fixture counts 4 KiB pages")
    fx, fx_out, (pid, child) = start_resident(fork=True)
    pages = RESIDENT_MIB << 8
    try:
        a, b = present_pfns(pid), present_pfns(child)
        require(len(a & b) >= pages, "the child shares the parent's %d pages (%d)"
                % (pages, len(a & b)))
        out = tmp / "shared.mtrk"
        mt, mt_err = start_attach(pid, out, ["--physical"])
        check_true(any("(2 processes)" in line for line in mt_err.seen),
                   "memtrack found the tree of 2: %r" % mt_err.seen)
        resident_command(fx, fx_out, "unmap")
        time.sleep(0.3)
        t_reap = time.monotonic_ns()  # the records' clock
        resident_command(fx, fx_out, "reap")
        time.sleep(0.3)
        rc, lines = stop_attach(mt, mt_err)
        check_eq(rc, 0, "memtrack attach --physical (%r)" % lines)
    finally:
        fx.stdin.close()
        fx.wait(timeout=30)
    recs = physical_records(out)
    require(recs, "physical records")
    first = recs[0]["bytes"] // 4096
    union = len(a | b)
    check_true(abs(first - union) <= union // 100 and first <= len(a) + len(b) - pages,
               "pages at attach %d: the union of both pagemaps %d, their sum %d"
               % (first, union, len(a) + len(b)))
    check_eq([r["bytes"] for r in recs if r["ts"] < t_reap and r["bytes"] != recs[0]["bytes"]],
             [], "physical records that changed before the child exited")
    check_eq(recs[-1]["bytes"] // 4096, first - pages,
             "physical after the parent unmapped and the child exited")


def test_attach_unreadable_with_ptrace(tmp):
    """A process memtrack cannot read although it has CAP_SYS_PTRACE (here
    pid 1: it holds CAP_SYS_RESOURCE, outside this session's bounding set,
    and the kernel refuses root its /proc/1/maps): one line that does not
    ask for the capability memtrack has, exit 2."""
    require(os.geteuid() == 0, "needs root")
    try:
        open("/proc/1/maps").close()
        pytest.skip("pid 1 is readable here: no process memtrack cannot read with CAP_SYS_PTRACE")
    except PermissionError:
        pass
    p = run([MEMTRACK, "attach", "-o", tmp / "x.mtrk", "1"])
    check_eq((p.rc, p.stderr), (2, "memtrack: cannot read process 1's memory map (/proc/1/maps: "
             "Permission denied) although memtrack has CAP_SYS_PTRACE: the kernel refuses even "
             "so (the process holds capabilities memtrack lacks, or a security module protects "
             "it); run memtrack with every capability the process has\n"),
             "memtrack attach 1 as root")
    check_true(not (tmp / "x.mtrk").exists(), "no artifact")
