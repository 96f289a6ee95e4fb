# SPDX-License-Identifier: MIT
"""Reading what the tools wrote: memtrack's report --json and dump, GNU
time's %M, the inner memtrack in the outer one's report."""
import json
import os
import subprocess

from .machine import last_line


def report_json(memtrack, path):
    r = subprocess.run([memtrack, "report", path, "--json"], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"memtrack report {os.path.basename(path)} failed: {last_line(r.stderr)}")
    return json.loads(r.stdout)


def heap_peak_from_dump(memtrack, path, pid):
    """Peak live heap bytes of one pid, replaying `memtrack dump` the way
    analysis.c does (realloc = free old + alloc new; exec/exit drop all)."""
    live, cur, peak = {}, 0, 0
    needle = f'"pid":{pid},'
    p = subprocess.Popen([memtrack, "dump", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, errors="replace")
    for line in p.stdout:
        if needle not in line:
            continue
        ev = json.loads(line)
        if ev.get("pid") != pid:
            continue
        t = ev["type"]
        if t in ("malloc", "calloc", "aligned_alloc", "realloc"):
            if t == "realloc":
                cur -= live.pop(ev.get("old_addr"), 0)
            cur -= live.pop(ev["addr"], 0)
            if ev["addr"]:
                live[ev["addr"]] = ev["size"]
                cur += ev["size"]
            peak = max(peak, cur)
        elif t == "free":
            cur -= live.pop(ev["addr"], 0)
        elif t in ("exec", "exit"):
            live.clear()
            cur = 0
    err = p.stderr.read()
    if p.wait() != 0:
        raise RuntimeError(f"memtrack dump failed: {last_line(err)}")
    return peak


def read_time_kib(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
        return int(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def find_inner(report):
    """The inner memtrack in the outer report: the process named memtrack
    whose parent is not itself a memtrack (its parked child is)."""
    procs = report.get("processes", [])
    mt = {p["pid"] for p in procs if p.get("command") == "memtrack"}
    for p in procs:
        if p["pid"] in mt and p.get("ppid") not in mt:
            return p
    return None
