# SPDX-License-Identifier: MIT
"""What the results say about the machine, the tools and the load, and the
wait between rows for the suite's own memtrack reapers."""
import os
import platform
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .config import REPO


def last_line(text):
    """The last non-empty line of @text, at most 200 characters."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    distro = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    mem_kib = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kib = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "nproc": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "distro": distro,
        "mem_gib": round(mem_kib / 1048576, 1),
    }


def tool_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return last_line(out.stdout or out.stderr) if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_describe():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty-src" if dirty else "") if rev else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def foreign_trackers():
    """Tracers running outside this suite (between rows none of ours runs):
    their BPF programs fire machine-wide and inflate every timing."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:  # any bytes: a tracked program names itself
                comm = f.read().decode(errors="replace").strip()
        except OSError:
            continue
        if comm in ("memtrack", "heaptrack", "heaptrack_inter", "bpftrace") or comm.startswith("valgrind"):
            found.append(f"{comm}[{pid}]")
    return found


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


# Every command the suite runs has this in its environment: a reaper is the
# suite's own when its /proc/PID/environ (memtrack's, which it forked from)
# carries it.
# A round's --prepare (wait_reapers_argv) runs in a child: it finds the
# token its suite exported.
RUN_TOKEN = "MEMTRACK_BENCH_RUN=" + (os.environ.get("MEMTRACK_BENCH_RUN")
                                     or f"{os.getpid()}.{time.time_ns()}")


def mark_children():
    """Puts RUN_TOKEN into the environment every command inherits."""
    name, _, value = RUN_TOKEN.partition("=")
    os.environ[name] = value


def wait_for_reapers(limit_s=10.0):
    """A finished memtrack leaves a memtrack-reaper closing its links and BPF
    objects (the kernel's grace periods): the next row waits for it, so it
    does not pay for the last one's teardown.  Only the suite's own reapers
    (RUN_TOKEN): on a shared machine another user's can live for a minute,
    asleep in the kernel, and waiting for them cost up to limit_s a row."""
    token = RUN_TOKEN.encode()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:  # comm may be any bytes
                    st = f.read()
                # comm in parentheses, then the state: a zombie has closed everything
                if b"(memtrack-reaper)" not in st or st[st.rindex(b")") + 2:][:1] == b"Z":
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    busy = token in f.read().split(b"\0")
            except OSError:
                continue
            if busy:
                break
        if not busy:
            return
        time.sleep(0.05)


def wait_reapers_argv():
    """A command that runs wait_for_reapers: hyperfine's --prepare before
    every round, so that no round pays for the teardown of the round before
    it (a --stacks round's ends in more closes than a default round's)."""
    bench = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return ["python3", "-c", "import sys; sys.path.insert(0, %r); "
            "from memtrack_bench.machine import wait_for_reapers; wait_for_reapers()" % bench]


@dataclass
class MachineLog:
    """The load and the foreign tracers seen over a run (the results'
    "load"); memory rows add to it from their threads."""
    loads: list = field(default_factory=list)
    foreign: set = field(default_factory=set)
    foreign_rows: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sample_load(self):
        la = loadavg()
        if la is not None:
            with self._lock:
                self.loads.append(la)

    def before_row(self):
        """Called before each row: waits for our reapers, records load and foreign tracers."""
        wait_for_reapers()
        self.sample_load()
        ft = foreign_trackers()
        if ft:
            with self._lock:
                self.foreign_rows += 1
                self.foreign.update(ft)

    def summary(self):
        return {"loadavg_1min_min": min(self.loads, default=None), "loadavg_1min_max": max(self.loads, default=None),
                "rows_with_foreign_tracers": self.foreign_rows, "foreign_tracers": sorted(self.foreign)}
