# SPDX-License-Identifier: MIT
"""One run of the suite: its settings (Run), the inputs it makes, and the
commands of its rows (a workload under a variant), run once."""
import ctypes
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from .config import REPO, Suite, Variant
from .machine import OWN_PIDS, MachineLog, last_line
from .render import fmt_bytes

NA_UNSUPPORTED = "n/a (not supported by this build)"


@dataclass
class Run:
    """What every row of one run needs.  Set up by cli.run_suite before the
    first row; only workload_rss (a cache) and machine change after."""
    suite: Suite
    variants: list                  # [Variant] selected (the baseline always among them)
    baseline: Variant               # the untracked variant (the memory rows' workload RSS)
    costs: dict                     # bench/costs.json's rows (round_plan)
    smoke: bool                     # each command once, no statistics
    runs_override: int | None       # --runs
    memory_jobs: int                # memory rows at a time
    memtrack: str                   # the snapshot of build/memtrack the rows run
    fixtures: str                   # the snapshot of build/fixtures
    scratch: str                    # this run's scratch directory
    artifacts: str                  # ... and its artifacts' directory
    track_options: set = field(default_factory=set)   # `memtrack track --help`'s options
    inputs: dict = field(default_factory=dict)        # input name -> path
    workload_rss: dict = field(default_factory=dict)  # benchmark -> its untracked max RSS (memory rows)
    machine: MachineLog = field(default_factory=MachineLog)
    deadline: float | None = None   # monotonic time the suite's budget ends (walltime.paced)
    daemon: str = ""                # the socket of the run's `memtrack daemon` ({daemon}), "" if none


# ------------------------------------------------------------------ inputs

def pick_scratch(setting):
    if setting and setting != "auto":
        return os.path.abspath(setting)
    try:
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= 3 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return os.path.join(REPO, "build", "bench-work")


def copy_tree_shape(src, dst):
    """@src's directories, symlinks and files, each file sparse of its size
    and mode: what `tar -cf /dev/null` looks at (it reads no contents),
    and no one else changes during the run.  (tar of the live /usr/include
    exited 1, "file changed as we read it", while another job's apt-get
    unpacked headers into it: issue 35.)"""
    for root, dirs, files in os.walk(src):
        out = os.path.join(dst, os.path.relpath(root, src))
        os.makedirs(out, exist_ok=True)
        for name in dirs + files:
            s, d = os.path.join(root, name), os.path.join(out, name)
            try:
                if os.path.islink(s):
                    os.symlink(os.readlink(s), d)
                elif name in files:
                    st = os.stat(s)
                    with open(d, "wb") as f:
                        f.truncate(st.st_size)
                    os.chmod(d, st.st_mode & 0o7777)
            except OSError:
                pass  # gone meanwhile, or unreadable: the copy is what was there
        dirs[:] = [n for n in dirs if not os.path.islink(os.path.join(root, n))]


def make_inputs(inputs, needed, inputs_dir, log):
    """Makes the inputs named in @needed (of @inputs: name -> Input) in
    @inputs_dir, before any measured round; returns name -> path."""
    paths = {}
    for name in sorted(needed):
        spec = inputs[name]
        t0 = time.monotonic()
        if spec.kind == "file":
            path = os.path.join(inputs_dir, f"{name}.bin")
            chunk = bytes(1 << 20)
            with open(path, "wb") as f:
                for _ in range(spec.size_mib):
                    f.write(chunk)
        elif spec.kind == "tar":
            src = os.path.abspath(spec.source)
            path = os.path.join(inputs_dir, f"{name}.tar")
            r = subprocess.run(["tar", "-cf", path, "-C", os.path.dirname(src), os.path.basename(src)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # exit 1 = "some files changed while being archived": still usable
            if r.returncode not in (0, 1):
                sys.exit(f"bench: cannot create input '{name}' (tar of {src}): {last_line(r.stderr)}")
        elif spec.kind == "tree":
            path = os.path.join(inputs_dir, name)
            copy_tree_shape(os.path.abspath(spec.source), path)
        else:
            sys.exit(f"bench: input '{name}': unknown kind '{spec.kind}' (use file, tar or tree)")
        size = (f"{sum(len(f) for _, _, f in os.walk(path)):,} files" if os.path.isdir(path)
                else fmt_bytes(os.path.getsize(path)))
        log(f"bench: input {name}: {path} ({size}, "
            f"{time.monotonic() - t0:.1f} s, untimed)")
        paths[name] = path
    return paths


# ---------------------------------------------------------------- commands

def expand(template, values):
    def sub(m):
        key = m.group(1)
        if key not in values:
            raise KeyError(f"unknown placeholder {{{key}}} in: {template}")
        return values[key]
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*(?::[A-Za-z0-9_]+)?)\}", sub, template)


@functools.lru_cache(maxsize=1)
def cc1_path():
    """gcc's compiler proper, the program `gcc -c` runs (the cc1 benchmark)."""
    try:
        out = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return out or "cc1"


def build_command(run, bench, variant, artifact_dir, tag):
    """Returns (argv, fresh_dir or None) for one workload under one variant."""
    fresh = os.path.join(run.scratch, "fresh", f"{bench.name}.{variant.name}.{tag}")
    values = {"memtrack": run.memtrack, "fixtures": run.fixtures, "fresh": shlex.quote(fresh),
              "repo": shlex.quote(REPO), "daemon": shlex.quote(run.daemon)}
    if "{cc1}" in bench.command:
        values["cc1"] = shlex.quote(cc1_path())
    for name, path in run.inputs.items():
        values[f"input:{name}"] = shlex.quote(path)
    workload = expand(bench.command, values)
    values["workload"] = workload
    ext = {"memtrack": "mtrk", "peer": "out"}.get(variant.kind, "out")
    values["artifact"] = shlex.quote(os.path.join(artifact_dir, f"{bench.name}.{variant.name}.{tag}.{ext}"))
    argv = shlex.split(expand(variant.command, values))
    if variant.kind == "peer" and run.suite.peer_timeout_s:
        argv = ["timeout", "-k", "5", str(run.suite.peer_timeout_s)] + argv
    return argv, (fresh if "{fresh}" in bench.command else None)


def die_with_parent():
    """In the daemon's child before its exec: SIGTERM when the bench dies
    (killed by a timeout, the finally that stops it never runs), so no
    daemon of a dead run stays loaded."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def start_daemon(run, log):
    """Starts the snapshot's `memtrack daemon` on a socket in the scratch
    directory, for the variants with daemon = true (its one BPF load is
    not in any row: a resident daemon has loaded long before a user's
    run); returns the Popen.  Exits with its log's last line if it does
    not listen within 60 s."""
    run.daemon = os.path.join(run.scratch, "daemon.sock")
    logpath = os.path.join(run.scratch, "daemon.log")
    # without the run's token: the reapers of its loaded BPF sides live as
    # long as it does, and every round's wait for the suite's reapers
    # (reapers.py) would wait its whole limit for them
    env = {k: v for k, v in os.environ.items() if k != "MEMTRACK_BENCH_RUN"}
    with open(logpath, "w") as f:
        p = subprocess.Popen([run.memtrack, "daemon", "--socket", run.daemon], stdin=subprocess.DEVNULL,
                             stdout=f, stderr=f, start_new_session=True, preexec_fn=die_with_parent,
                             env=env)
    OWN_PIDS.add(p.pid)
    t0 = time.monotonic()
    while not os.path.exists(run.daemon) and p.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    if not os.path.exists(run.daemon):
        stop_daemon(p)
        with open(logpath) as f:
            sys.exit(f"bench: memtrack daemon did not start: {last_line(f.read())}")
    log(f"bench: memtrack daemon on {run.daemon} ({time.monotonic() - t0:.1f} s, untimed)")
    return p


def stop_daemon(p):
    """SIGTERM, then SIGKILL after 60 s, to the daemon start_daemon started."""
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def reset_dir(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)


def unavailable(run, variant):
    """Why a variant cannot run with this build/machine, or None."""
    opt = variant.requires_option
    if opt and opt not in run.track_options:
        return NA_UNSUPPORTED
    prog = variant.requires_program
    if prog and not shutil.which(prog):
        return f"n/a ({prog} not installed)"
    return None


def run_once(argv, fresh, timeout):
    """Runs argv once (output discarded); returns (rc, seconds, stderr)."""
    if fresh:
        reset_dir(fresh)
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, errors="replace", timeout=timeout)
        return r.returncode, time.monotonic() - t0, r.stderr
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, f"no result after {timeout} s"
    except OSError as e:
        return 127, time.monotonic() - t0, str(e)


def describe_rc(rc, timeout_s=None):
    if rc is None:
        return "did not finish"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"killed by {name}"
    if timeout_s and rc == 124:
        return f"timed out after {timeout_s} s"
    if rc > 128 and rc - 128 < 65:
        try:
            return f"exit {rc} ({signal.Signals(rc - 128).name})"
        except ValueError:
            pass
    return f"exit {rc}"


def why_line(text, kind, rc=None):
    """The stderr line that best says why a command failed: memtrack's own
    last message for memtrack rows; the workload's last line only when no
    signal was involved (after a crash it is the workload's chatter)."""
    if kind == "memtrack":
        mine = [l for l in (text or "").splitlines() if l.startswith("memtrack:")]
        if mine:
            return mine[-1].strip()[:200]
        if rc is None or rc < 0 or rc > 128:
            return ""
    return last_line(text)


def failure_note(rc, err, kind, timeout_s=None):
    """A failed row's note: how the command ended, and why if it said."""
    detail = why_line(err, kind, rc)
    return describe_rc(rc, timeout_s) + (f": {detail}" if detail else "")


def row_base(bench, variant, kind):
    """The fields every row starts with."""
    return {"benchmark": bench.name, "benchmark_label": bench.label, "variant": variant.name, "label": variant.label,
            "kind": kind, "optional": variant.optional, "status": "ok", "note": ""}
