#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Figures of `memtrack attach` (issue 21), on tests/fixtures/server.c:
the time from starting `memtrack attach` to the first recorded event, the
target's longest pause around the attach, and its request rate attached
against untraced, and from those rates the uprobe path's cost per heap
call (a request is 2 mallocs and 2 frees).
Usage: bench/attach_figures.py [RUNS] [LIBDIR | N]
(LIBDIR: a directory of *.so files the server dlopens; N: build N tiny
distinct libraries, each its own file and build-id, and use them).
Configurations are interleaved; medians are printed."""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUILD = Path(os.environ.get("MEMTRACK_BUILD", Path(__file__).resolve().parents[1] / "build"))
MEMTRACK = str(BUILD / "memtrack")
SERVER = str(BUILD / "fixtures" / "server")


CALLS_PER_REQUEST = 4  # server.c serve_request(): 2 malloc, 2 free


def make_libs(n):
    """n tiny shared libraries (one function each) in a fresh directory."""
    d = Path("/tmp/attach_fig_libs.%d" % n)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for i in range(n):
        src = d / ("tiny%02d.c" % i)
        src.write_text("int tiny%02d(int x) { return x * %d + 1; }\n" % (i, i + 2))
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wl,--build-id", "-o",
                        str(d / ("libtiny%02d.so" % i)), str(src)], check=True)
        src.unlink()
    return str(d)


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
    if libdir and libdir.isdigit():
        libdir = make_libs(int(libdir))
    nlibs = len([f for f in os.listdir(libdir) if f.endswith(".so")]) if libdir else 0
    configs = [("untraced, libc only", None, [], False),
               ("attach, libc only", None, [], True),
               ("attach --stacks, libc only", None, ["--stacks"], True)]
    if libdir:
        configs += [("untraced, %d libraries" % nlibs, libdir, [], False),
                    ("attach, %d libraries" % nlibs, libdir, [], True),
                    ("attach --stacks, %d libraries" % nlibs, libdir, ["--stacks"], True)]
    results = {c[0]: [] for c in configs}
    for _ in range(runs):
        for name, lib, opts, attach in configs:
            results[name].append(one(lib, opts, attach))
    med = {}
    for name, rs in results.items():
        med[name] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print("%-32s %s" % (name, "  ".join("%s=%.6g" % (k, v) for k, v in sorted(med[name].items()))))
    # per heap call: the attached request's extra time over the untraced one
    for name, m in med.items():
        base = [v for k, v in med.items() if k.startswith("untraced") and
                k.split(", ")[1] == name.split(", ")[1]]
        if base and not name.startswith("untraced") and m["rate1"] > 0:
            cost = (1 / m["rate1"] - 1 / base[0]["rate1"]) / CALLS_PER_REQUEST * 1e9
            print("%-32s rate attached/untraced=%.3f  per heap call +%.0f ns"
                  % (name, m["rate1"] / base[0]["rate1"], cost))


if __name__ == "__main__":
    main()
