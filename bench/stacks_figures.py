#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Figures of issue 20 (call stacks at the in-process path's speed), in one
interleaved run: every round runs each workload untracked, under memtrack
--no-stacks, memtrack --stacks (the default) and heaptrack, in an order that alternates
between rounds, each memtrack run after the previous one's reaper is done.
`make bench` times each variant's rounds back to back, so a machine whose
speed drifts (these VMs': the same command 240 ms, then 450 ms) moves one
row against another; here each round compares runs made seconds apart, and
the ratios are medians of the per-round ratios.
Prints medians, the issue's ratios, the kernel's table bytes, artifact
bytes per event and events lost, from the last round's artifacts.
Usage: bench/stacks_figures.py [ROUNDS] [WORKLOAD,...]"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("MEMTRACK_BUILD", REPO / "build"))
MEMTRACK = str(BUILD / "memtrack")


def cc1():
    out = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True).stdout
    return out.strip() or "cc1"


def workloads(fresh):
    """The bench rows of bench/benchmarks.toml the issue names, as argv lists."""
    src = REPO / "src"
    return {
        "ls": ["ls", "-la", "/usr/bin"],
        "tar_c": ["tar", "-cf", "/dev/null", "/usr/include"],
        "cc1": [cc1(), "-quiet", f"-I{src}", f"-I{src}/format", "-imultiarch", "x86_64-linux-gnu",
                f"{src}/format/artifact_reader.c", "-dumpbase", "x.c", "-mtune=generic",
                "-march=x86-64", "-O2", "-o", f"{fresh}/x.s"],
        "alloc_1m": [str(BUILD / "fixtures" / "alloc_pairs"), "1000000"],
    }


def variants(out):
    return {
        "untracked": lambda w, cmd: cmd,
        "memtrack": lambda w, cmd: [MEMTRACK, "track", "-q", "--no-stacks", "-o", f"{out}/{w}.mt",
                                    "--"] + cmd,
        "stacks": lambda w, cmd: [MEMTRACK, "track", "-q", "--stacks", "-o", f"{out}/{w}.stk.mt",
                                  "--"] + cmd,
        "heaptrack": lambda w, cmd: ["heaptrack", "-o", f"{out}/{w}.ht"] + cmd,
    }


def wait_for_reapers(limit_s=10.0):
    """As make bench: no run pays for the previous memtrack's teardown."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    st = f.read()
            except OSError:
                continue
            if b"(memtrack-reaper)" in st and st[st.rindex(b")") + 2:][:1] != b"Z":
                busy = True
                break
        if not busy:
            return
        time.sleep(0.01)


def timed(argv):
    wait_for_reapers()
    t0 = time.monotonic()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    t = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"stacks_figures: {argv[0]} ... exited {r.returncode}")
    return t


def report(path):
    r = subprocess.run([MEMTRACK, "report", "--json", path], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def artifact_figures(out, w):
    figs = {}
    for v, name in (("memtrack", f"{w}.mt"), ("stacks", f"{w}.stk.mt")):
        rep = report(f"{out}/{name}")
        events = rep.get("events") or 0
        size = os.path.getsize(f"{out}/{name}")
        figs[v] = {"bytes_per_event": size / events if events else None,
                   "lost": rep.get("dropped_events"),
                   "table_bytes": rep.get("stack_table_bytes")}
    return figs


def ms(s):
    return "%.1f ms" % (s * 1000) if s < 1 else "%.2f s" % s


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    out = tempfile.mkdtemp(prefix="stacks_fig.")
    fresh = os.path.join(out, "fresh")
    os.makedirs(fresh)
    wl = workloads(fresh)
    if len(sys.argv) > 2:
        wl = {k: v for k, v in wl.items() if k in sys.argv[2].split(",")}
    vs = variants(out)
    times = {w: {v: [] for v in vs} for w in wl}
    names = list(vs)
    for i in range(rounds):
        order = names if i % 2 == 0 else names[::-1]
        for w, cmd in wl.items():
            for v in order:
                times[w][v].append(timed(vs[v](w, cmd)))
    print(f"stacks_figures: {rounds} interleaved rounds; medians, and medians of per-round ratios")
    print("| workload | untracked | --no-stacks | --stacks | heaptrack | --stacks/heaptrack | "
          "--stacks/--no-stacks | --stacks - --no-stacks | bytes/event (no stacks, stacks) | "
          "kernel tables | lost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for w in wl:
        t = times[w]
        med = {v: statistics.median(t[v]) for v in vs}
        r_ht = statistics.median(s / h for s, h in zip(t["stacks"], t["heaptrack"]))
        r_ns = statistics.median(s / m for s, m in zip(t["stacks"], t["memtrack"]))
        d_ns = statistics.median(s - m for s, m in zip(t["stacks"], t["memtrack"]))
        a = artifact_figures(out, w)
        bpe = "%.2f, %.2f" % (a["memtrack"]["bytes_per_event"] or 0, a["stacks"]["bytes_per_event"] or 0)
        tb = a["stacks"]["table_bytes"]
        print(f"| {w} | {ms(med['untracked'])} | {ms(med['memtrack'])} | {ms(med['stacks'])} | "
              f"{ms(med['heaptrack'])} | {r_ht:.2f} | {r_ns:.2f} | {d_ns * 1000:+.1f} ms | {bpe} | "
              f"{(tb or 0) // 1024} KiB | {a['stacks']['lost']} |")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
