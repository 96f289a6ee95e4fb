# SPDX-License-Identifier: MIT
"""Issue 35: N memtrack sessions at once on one machine, as on a shared CI
runner: each records exactly what its own program did, none fails, none
sees another's.

The program is fixtures/oracle.c, whose every heap call between its
markers is known (EXPECTED below, from the same constants): a main thread's
mallocs, callocs, reallocs, posix_memaligns and frees, and a fork child's
malloc/free pairs.  The sessions cover track and attach, both heap paths
(--fast, the default, and --no-fast), with and without stacks, --physical,
and --no-allocators (the bench row of issue 35: exit 0, the two processes,
no heap record).  Every session's program waits for one go file, so all N
run their calls at the same time, also with a CPU hog on every core.

oracle_sessions() is also the bench's "4 concurrent sessions" row
(bench/sessions.py runs this module's main with the bench's memtrack)."""
import os
import subprocess
import sys
import time
from pathlib import Path

from mtlib import (MEMTRACK, Artifact, Failure, check_eq, check_true, fixture, heap, kill_group,
                   require, require_eq, tree_pids, window)

M, C, R, A, K = 50, 20, 10, 5, 30  # fixtures/oracle.c's ORACLE_*
EXPECTED_MAIN = {
    ("malloc", "n"): M, ("malloc", "bytes"): sum(3000 + i for i in range(M)),
    ("calloc", "n"): C, ("calloc", "bytes"): sum(7 * (100 + i) for i in range(C)),
    ("realloc", "n"): R, ("realloc", "bytes"): sum(9000 + i for i in range(R)),
    ("aligned_alloc", "n"): A, ("aligned_alloc", "bytes"): sum(5000 + i for i in range(A)),
    ("free", "n"): M + C + A, ("free", "bytes"): 0,
}
EXPECTED_CHILD = {("malloc", "n"): K, ("malloc", "bytes"): sum(777 + i for i in range(K)),
                  ("free", "n"): K, ("free", "bytes"): 0}

# (mode, options): every kind of session a CI job may run; N sessions take
# CONFIGS[i % len] in this order, so N = 8 runs eight different ones
CONFIGS = [
    ("track", []),                          # --fast, stacks: the default
    ("attach", []),
    ("track", ["--no-fast", "--physical"]),
    ("track", ["--no-allocators"]),         # the bench row of issue 35
    ("track", ["--no-stacks"]),
    ("attach", ["--stacks", "--physical"]),
    ("track", ["--no-fast"]),
    ("track", ["--no-stacks", "--no-fast", "--physical"]),
]


def counts(evs):
    out = {}
    for e in heap(evs):
        for key, v in (((e["type"], "n"), 1), ((e["type"], "bytes"), e.get("size", 0))):
            out[key] = out.get(key, 0) + v
    return out


class Session:
    """One memtrack session of the oracle: started, released by the go file, checked."""

    def __init__(self, tmp, i, mode, opts):
        self.i, self.mode, self.opts = i, mode, list(opts)
        self.out = Path(tmp) / ("s%d.mtrk" % i)
        self.err_path = Path(tmp) / ("s%d.err" % i)
        self.go = Path(tmp) / "go"
        self.fix = self.mt = None
        self.pid = None

    def name(self):
        return "session %d (%s %s)" % (self.i, self.mode, " ".join(self.opts) or "default")

    def start(self):
        err = open(self.err_path, "w")
        if self.mode == "track":
            argv = [MEMTRACK, "track", "-q", "-o", str(self.out)] + self.opts + [
                "--", fixture("oracle"), str(self.go)]
            self.mt = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=err, start_new_session=True)
            self.pid = self._ready(self.mt)
        else:
            self.fix = subprocess.Popen([fixture("oracle"), str(self.go)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
            self.pid = self._ready(self.fix)
            argv = [MEMTRACK, "attach", "-o", str(self.out)] + self.opts + [str(self.pid)]
            self.mt = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=err, start_new_session=True)
        err.close()

    def _ready(self, p):
        line = p.stdout.readline().decode(errors="replace")
        if not line.startswith("ready "):
            raise Failure("%s: no ready line (%r); stderr: %s" % (self.name(), line, self.stderr()))
        return int(line.split()[1])

    def attached(self):
        return self.mode == "track" or ("memtrack: attached to %d " % self.pid) in self.stderr()

    def stderr(self):
        try:
            return self.err_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait(self, deadline):
        """Waits for the program, then memtrack; returns memtrack's exit status."""
        try:
            if self.fix:
                self.fix.wait(timeout=max(1, deadline - time.monotonic()))
                # the tree has exited: attach stops by itself
            return self.mt.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in (self.mt, self.fix):
                if p:
                    kill_group(p)
                    p.wait()
            return None

    def check(self, rc):
        what = self.name()
        check_eq(rc, 0, "%s: memtrack's exit status (stderr: %s)" % (what, self.stderr().strip()))
        if rc != 0:
            return
        evs = Artifact(self.out).events
        # a physical record's pid is whoever freed the page (FORMAT.md: any task)
        pids = tree_pids([e for e in evs if e["type"] != "physical"])
        check_eq(len(pids), 2, "%s: processes recorded (the oracle and its child): %s" % (what, pids))
        if "--no-allocators" in self.opts:
            check_eq(counts(evs), {}, "%s: no heap record" % what)
            return
        child = [p for p in pids if p != self.pid]
        check_eq(counts(window(evs, self.pid)), EXPECTED_MAIN, "%s: the main thread's heap calls" % what)
        if len(child) == 1:
            check_eq(counts(window(evs, child[0])), EXPECTED_CHILD, "%s: the child's heap calls" % what)


def oracle_sessions(tmp, n, timeout=180):
    """Runs @n sessions of CONFIGS at once on the oracle; returns them with
    their exit statuses [(Session, rc)], after checking each."""
    tmp = Path(tmp)
    sessions = [Session(tmp, i, *CONFIGS[i % len(CONFIGS)]) for i in range(n)]
    deadline = time.monotonic() + timeout
    try:
        for s in sessions:
            s.start()
        while not all(s.attached() for s in sessions):
            dead = [s for s in sessions if s.mt.poll() is not None]
            require(not dead, "%s ended before the go: %s" % (
                ", ".join(s.name() for s in dead), " | ".join(s.stderr().strip() for s in dead)))
            require(time.monotonic() < deadline, "sessions not attached after %d s" % timeout)
            time.sleep(0.02)
        (tmp / "go").touch()
        results = [(s, s.wait(deadline)) for s in sessions]
    finally:
        for s in sessions:
            for p in (s.mt, s.fix):
                if p and p.poll() is None:
                    kill_group(p)
                    p.wait()
    for s, rc in results:
        s.check(rc)
    return results


def test_concurrent_same_output_says_so(tmp):
    """Two sessions given the same -o: the second does not unlink the
    first's recording under it (a rename over a file still being written
    lost it without a word); it says so in one line and records into its
    temporary file, which it names.  Both are exact."""
    first, second = Session(tmp, 0, "track", []), Session(tmp, 1, "track", ["--no-fast"])
    second.out = first.out
    try:
        first.start()
        second.start()
        (Path(tmp) / "go").touch()
        deadline = time.monotonic() + 120
        rcs = [first.wait(deadline), second.wait(deadline)]
    finally:
        for s in (first, second):
            if s.mt.poll() is None:
                kill_group(s.mt)
                s.mt.wait()
    check_eq(rcs, [0, 0], "exit statuses (stderr: %r, %r)" % (first.stderr(), second.stderr()))
    err = second.stderr().splitlines()
    require_eq(len(err), 1, "the second session's stderr: one line: %r" % err)
    prefix = "memtrack: '%s' is being written by another memtrack session; this one records into '" % first.out
    require(err[0].startswith(prefix), "the line says so and where: %r" % err[0])
    first.check(0)
    second.out = Path(err[0][len(prefix):].split("'")[0])
    second.check(0)


def test_concurrent_same_control_socket_says_so(tmp):
    """Two sessions given the same --control path: the second says, in one
    line, that another session (its pid) listens there (it said "a memtrack
    that was killed leaves it behind", about a live one), and records
    without control; both are exact, the first's socket is untouched."""
    ctl = Path(tmp) / "ctl.sock"
    first = Session(tmp, 0, "track", ["--control", str(ctl)])
    second = Session(tmp, 1, "track", ["--control", str(ctl), "--no-stacks"])
    try:
        first.start()
        second.start()
        check_eq(ctl.is_socket(), True, "the first session's socket is there")
        (Path(tmp) / "go").touch()
        deadline = time.monotonic() + 120
        rcs = [first.wait(deadline), second.wait(deadline)]
    finally:
        for s in (first, second):
            if s.mt.poll() is None:
                kill_group(s.mt)
                s.mt.wait()
    check_eq(rcs, [0, 0], "exit statuses (stderr: %r, %r)" % (first.stderr(), second.stderr()))
    check_eq(first.stderr(), "", "the first session's stderr")
    check_eq(second.stderr().splitlines(),
             ["memtrack: cannot create control socket '%s': another memtrack session (pid %d) is listening "
              "on it; give each concurrent session its own --control path (the command runs without "
              "control, heap recording on)" % (ctl, first.mt.pid)], "the second session's one line")
    first.check(0)
    second.check(0)


class CpuHog:
    """One busy loop per CPU (own processes, killed at the end)."""

    def __enter__(self):
        self.procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
                      for _ in range(os.cpu_count() or 1)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            kill_group(p)
            p.wait()


def test_concurrent_2(tmp):
    oracle_sessions(tmp, 2)


def test_concurrent_4(tmp):
    oracle_sessions(tmp, 4)


def test_concurrent_8(tmp):
    oracle_sessions(tmp, 8)


def test_concurrent_4_under_cpu_hog(tmp):
    with CpuHog():
        oracle_sessions(tmp, 4)


def main(argv):
    """bench/sessions.py: `N DIR`: runs N sessions in DIR; exit 0 when all were exact."""
    import mtlib
    n, tmp = int(argv[1]), argv[2]
    mtlib.reset_failures()
    try:
        oracle_sessions(tmp, n)
    except Failure as e:
        mtlib._failures.append(str(e))
    for f in mtlib.failures():
        print("concurrent: " + f.splitlines()[0][:300], file=sys.stderr)
    return 1 if mtlib.failures() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
