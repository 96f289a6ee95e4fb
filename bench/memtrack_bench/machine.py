# SPDX-License-Identifier: MIT
"""What the results say about the machine, the tools and the load, and the
wait between rows for the suite's own memtrack reapers."""
import os
import platform
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from .config import REPO
from .reapers import RUN_TOKEN, wait_for_reapers


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


# The suite's own long-lived memtracks (its daemon, run.start_daemon) and
# their children: not foreign, though they run between rows.
OWN_PIDS = set()


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read()
        return int(st[st.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def foreign_trackers():
    """Tracers running outside this suite (between rows none of ours runs
    but its daemon): their BPF programs fire machine-wide and inflate every
    timing."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:  # any bytes: a tracked program names itself
                comm = f.read().decode(errors="replace").strip()
        except OSError:
            continue
        if int(pid) in OWN_PIDS or parent_of(pid) in OWN_PIDS:
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


def mark_children():
    """Puts RUN_TOKEN into the environment every command inherits."""
    name, _, value = RUN_TOKEN.partition("=")
    os.environ[name] = value


def wait_reapers_argv():
    """A command that runs wait_for_reapers: hyperfine's --prepare before
    every round, so that no round pays for the teardown of the round before
    it (a --stacks round's ends in more closes than a default round's).
    The interpreter running the suite, without site (-S), on reapers.py
    alone (os and time): `python3` was a pyenv shim here, and the package's
    imports with it cost ~0.25 s a round, ~70 s of a loaded suite's 493."""
    return [sys.executable, "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "reapers.py")]


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
