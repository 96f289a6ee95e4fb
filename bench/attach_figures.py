#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Figures of `memtrack attach` (issue 21), on tests/fixtures/server.c:
the time from starting `memtrack attach` to the first recorded event, the
target's longest pause around the attach, and its request rate attached
against untraced.  Usage: bench/attach_figures.py [RUNS] [LIBDIR]
(LIBDIR: a directory of *.so files the server dlopens, e.g. 50 of them).
Configurations are interleaved; medians are printed."""
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUILD = Path(os.environ.get("MEMTRACK_BUILD", Path(__file__).resolve().parents[1] / "build"))
MEMTRACK = str(BUILD / "memtrack")
SERVER = str(BUILD / "fixtures" / "server")


def readline(pipe, prefix):
    while True:
        line = pipe.readline()
        if not line:
            raise SystemExit("EOF waiting for %r" % prefix)
        if line.startswith(prefix):
            return line


def phases(lines):
    out = {}
    for line in lines:
        if line.startswith("phase "):
            w = line.split()
            out[int(w[1])] = dict(x.split("=") for x in w[2:])
    return out


def pauses(lines):
    """(end_ns, ns) of the fixture's pauses over 200 us."""
    return [(int(w[1]), int(w[2])) for w in (line.split() for line in lines)
            if w and w[0] == "pause"]


def longest_in(ps, lo, hi):
    """The longest pause that overlaps [lo, hi] (CLOCK_MONOTONIC ns), in us; 0 if none."""
    return max([ns for end, ns in ps if end >= lo and end - ns <= hi] or [0]) / 1e3


def one(libdir, opts, attach=True):
    env = dict(os.environ)
    if libdir:
        env["SERVER_DLOPEN_DIR"] = libdir
    srv = subprocess.Popen([SERVER], stdout=subprocess.PIPE, text=True, env=env)
    readline(srv.stdout, "ready")
    time.sleep(1.0)
    res = {}
    out = "/tmp/attach_fig.%d.mtrk" % os.getpid()
    t0 = time.monotonic_ns()
    if attach:
        mt = subprocess.Popen([MEMTRACK, "attach", "-v", "-o", out] + opts + [str(srv.pid)],
                              stderr=subprocess.PIPE, text=True)
        readline(mt.stderr, "memtrack: attached to")
    else:
        time.sleep(0.1)  # the control: as long as an attach takes
    t_ready = time.monotonic_ns()
    srv.send_signal(signal.SIGUSR1)
    readline(srv.stdout, "window open")
    time.sleep(2.0)
    srv.send_signal(signal.SIGUSR2)
    readline(srv.stdout, "window closed")
    if attach:
        mt.send_signal(signal.SIGINT)
        err = mt.stderr.read()
        mt.wait()
        for line in err.splitlines():
            if line.startswith("memtrack: attach: "):
                res["root_probed_ms"] = float(line.split()[2])
        dump = subprocess.run([MEMTRACK, "dump", out], capture_output=True, text=True).stdout
        first = min(int(line.split('"ts":')[1].split(",")[0]) for line in dump.splitlines()
                    if '"type":"malloc"' in line or '"type":"free"' in line)
        res["first_event_ms"] = (first - t0) / 1e6
        res["cmd_to_attached_ms"] = (t_ready - t0) / 1e6
        os.unlink(out)
    time.sleep(1.0)
    srv.send_signal(signal.SIGTERM)
    lines = srv.stdout.read().splitlines()
    ph = phases(lines)
    srv.wait()
    # the longest pause while memtrack attached (the control: the same 0.1 s)
    res["attach_pause_us"] = longest_in(pauses(lines), t0, t_ready)
    res["pause0_us"] = float(ph[0]["max_pause_us"])  # the attach falls in phase 0
    res["rate1"] = float(ph[1]["rate"])  # attached (or untraced in the control)
    res["rate2"] = float(ph[2]["rate"])  # after the detach
    return res


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    libdir = sys.argv[2] if len(sys.argv) > 2 else None
    configs = [("untraced, libc only", None, [], False),
               ("attach, libc only", None, [], True),
               ("attach --stacks, libc only", None, ["--stacks"], True)]
    if libdir:
        configs += [("untraced, 50 libraries", libdir, [], False),
                    ("attach, 50 libraries", libdir, [], True),
                    ("attach --stacks, 50 libraries", libdir, ["--stacks"], True)]
    results = {c[0]: [] for c in configs}
    for _ in range(runs):
        for name, lib, opts, attach in configs:
            results[name].append(one(lib, opts, attach))
    for name, rs in results.items():
        keys = sorted(rs[0])
        print("%-32s %s" % (name, "  ".join("%s=%.6g" % (k, statistics.median(r[k] for r in rs))
                                            for k in keys)))


if __name__ == "__main__":
    main()
