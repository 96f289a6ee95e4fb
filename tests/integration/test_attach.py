# SPDX-License-Identifier: MIT
"""Issue 21: `memtrack attach PID` records a process that is already
running, its threads and descendants, from the attach on, never stopping it
for longer than attaching takes, and leaves nothing of memtrack's on it
afterwards, also when memtrack is killed with SIGKILL."""
import os
import pwd
import select
import signal
import subprocess
import time

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
        argv = ["setpriv", "--reuid=%s" % user, "--regid=%s" % user, "--clear-groups"] + argv
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


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def kv(line):
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def test_attach_server_leaks(tmp):
    """The server fixture attached with --stacks for its 2 s window: exactly
    the leaks it made inside the window are recorded between its markers,
    every leak recorded is live at the end and ranked under leak_request, the
    frees of the blocks it allocated before the attach are unknown frees
    (never errors), each process starts with an rss record, and the fixture
    runs on after the detach with no link of memtrack's left on it."""
    srv, srv_out = start_fixture([fixture("server")])
    pid = srv.pid
    cache = [int(line.split()[1]) for line in srv_out.seen if line.startswith("cache ")]
    require_eq(len(cache), CACHE_BLOCKS, "cache blocks the fixture printed")
    out = tmp / "srv.mtrk"
    mt, mt_err = start_attach(pid, out, ["--stacks"])
    check_true(uprobe_links_of(pid) != [], "memtrack holds uprobe links on %d" % pid)
    srv.send_signal(signal.SIGUSR1)
    srv_out.expect("window open")
    time.sleep(2)
    srv.send_signal(signal.SIGUSR2)
    closed = kv(srv_out.expect("window closed"))
    rc, lines = stop_attach(mt, mt_err)
    check_eq(rc, 0, "memtrack attach's exit status (stderr %r)" % lines)
    wait_until(lambda: uprobe_links_of(pid) == [], "no uprobe link left on %d" % pid)
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
    check_eq(rep["unknown_free_count"], len(unknown), "report's unknown_free_count")
    check_true(set(cache) <= set(unknown), "the cache blocks' frees are unknown frees")
    rss = [e for e in evs if e["type"] == "rss" and e["pid"] == pid]
    begin, _ = markers(evs, pid)
    check_true(rss and rss[0]["ts"] < begin["ts"] and rss[0]["file"] > 0,
               "an rss record of %d at the attach: %r" % (pid, rss[:1]))


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
