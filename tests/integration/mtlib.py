# SPDX-License-Identifier: MIT
"""mtlib - what every integration test shares.

Runs `memtrack track` on a fixture into the test's temporary directory,
parses `memtrack dump` (one JSON object per line) and `memtrack report
--json`, cuts the marker window out of the records, and checks values
exactly, printing both sides when they differ.

The build directory is $MEMTRACK_BUILD, else <repo>/build: memtrack is
$MEMTRACK_BUILD/memtrack and the fixtures $MEMTRACK_BUILD/fixtures/NAME
(built from tests/fixtures/NAME.c).

Checks: check_eq()/check_true() record a failure and let the test go on
(so one run shows every difference); require_eq()/require() stop the test.
Tests run under pytest (conftest.py: the `tmp` fixture, and the glue that
turns these checks into one failure per test).
"""
import json
import os
import signal
import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MEMTRACK_BUILD", REPO / "build")).resolve()
MEMTRACK = str(BUILD / "memtrack")

MARKER_BEGIN_SIZE = 987651
MARKER_END_SIZE = 987653

HEAP_TYPES = ("malloc", "calloc", "realloc", "aligned_alloc", "free")
ALLOC_TYPES = ("malloc", "calloc", "realloc", "aligned_alloc")

# Keys that change from run to run; proj() drops them.
VOLATILE_KEYS = ("ts", "pid", "tid", "stack")  # stack: an id (a hash), 0 without --stacks

DEFAULT_TIMEOUT = 60


class Failure(Exception):
    """Stops the current test (require_*)."""


# --------------------------------------------------------------------------
# checks

_failures = []   # messages of the current test, reset by the runner


def reset_failures():
    del _failures[:]


def failures():
    return list(_failures)


def _fmt(v, limit=4000):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "... (%d chars)" % len(s)


def _diff_lists(actual, expected):
    """The first index where two lists differ, with both sides around it."""
    n = min(len(actual), len(expected))
    i = next((k for k in range(n) if actual[k] != expected[k]), n)
    lines = ["lengths: got %d, expected %d; first difference at index %d"
             % (len(actual), len(expected), i)]
    for k in range(max(0, i - 2), min(max(len(actual), len(expected)), i + 3)):
        a = _fmt(actual[k], 400) if k < len(actual) else "(none)"
        e = _fmt(expected[k], 400) if k < len(expected) else "(none)"
        lines.append("  [%d] got      %s" % (k, a))
        lines.append("  [%d] expected %s" % (k, e))
    return "\n".join(lines)


def _eq_message(what, actual, expected):
    if isinstance(actual, list) and isinstance(expected, list):
        return "%s differ:\n%s" % (what, _diff_lists(actual, expected))
    return "%s: got %s, expected %s" % (what, _fmt(actual), _fmt(expected))


def check_eq(actual, expected, what):
    """Records a failure unless actual == expected; returns whether equal."""
    if actual == expected:
        return True
    _failures.append(_eq_message(what, actual, expected))
    return False


def check_true(cond, what):
    if cond:
        return True
    _failures.append("%s: not true" % what)
    return False


def require_eq(actual, expected, what):
    if actual != expected:
        raise Failure(_eq_message(what, actual, expected))


def require(cond, what):
    if not cond:
        raise Failure(what)


# --------------------------------------------------------------------------
# running things

def fixture(name):
    path = BUILD / "fixtures" / name
    require(path.exists(), "fixture %s is not built (make %s)" % (path, path))
    return str(path)


class Proc:
    """A finished command: rc, stdout, stderr (text)."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv, self.rc, self.stdout, self.stderr = argv, rc, stdout, stderr

    def describe(self):
        return "command %s exited %s\n  stdout: %s\n  stderr: %s" % (
            " ".join(map(str, self.argv)), self.rc, _fmt(self.stdout, 1500),
            _fmt(self.stderr, 1500))


def kill_group(p):
    """SIGKILLs the process group of a Popen started with start_new_session."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(argv, timeout=DEFAULT_TIMEOUT, stdin=subprocess.DEVNULL):
    """Runs argv in a session of its own; on timeout kills that session."""
    argv = [str(a) for a in argv]
    p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        raise Failure("timed out after %ss: %s\n  stdout: %s\n  stderr: %s"
                      % (timeout, " ".join(argv), _fmt(out, 1500), _fmt(err, 1500)))
    return Proc(argv, p.returncode, out, err)


class Artifact:
    """One artifact file: its records (dump) and report (report --json)."""

    def __init__(self, path):
        self.path = str(path)
        self._events = None
        self._report = None
        self.dump_proc = None

    @property
    def events(self):
        if self._events is None:
            self.dump_proc = run([MEMTRACK, "dump", self.path])
            require(self.dump_proc.rc == 0, "dump failed: " + self.dump_proc.describe())
            self._events = parse_dump(self.dump_proc.stdout)
        return self._events

    @property
    def report(self):
        if self._report is None:
            self._report = report_json(self.path)
        return self._report


def parse_dump(text, sort=True):
    """JSON lines -> list of dicts, sorted by ts (stable) unless sort=False
    (then in the order dump printed them)."""
    evs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            evs.append(json.loads(line))
        except ValueError as e:
            raise Failure("dump line %d is not JSON (%s): %r" % (n, e, line[:300]))
    if sort:
        evs.sort(key=lambda e: e["ts"])
    return evs


def report_json(path):
    p = run([MEMTRACK, "report", str(path), "--json"])
    require(p.rc == 0, "report --json failed: " + p.describe())
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Failure("report --json printed no JSON (%s): %r" % (e, p.stdout[:500]))


FRAME_HDR_LEN = 44
FRAME_EVENTS, FRAME_TRAILER = 1, 2


class Frame:
    """One frame of an artifact: offset (of its header), kind, comp_len,
    raw_len, nevents, payload (the comp_len bytes after the header)."""

    def __init__(self, offset, kind, comp_len, raw_len, nevents, payload):
        self.offset, self.kind = offset, kind
        self.comp_len, self.raw_len, self.nevents = comp_len, raw_len, nevents
        self.payload = payload


def read_frames(path):
    """Every frame of an artifact, in file order, walked by docs/FORMAT.md:
    the file header (magic, u16 version, u16 reserved, u32 body length,
    body, u32 CRC), then 44-byte frame headers ("FRM1", kind at byte 4,
    comp_len at 8, raw_len at 12, event_count at 16, CRC32 of bytes 0..39 at
    40), each followed by comp_len bytes.  The one reader of frames the
    tests share; a file that does not end on a frame boundary fails."""
    data = Path(path).read_bytes()
    require(len(data) >= 16, "%s: shorter than a file header" % path)
    body_len = struct.unpack_from("<I", data, 12)[0]
    at = 16 + body_len + 4
    out = []
    while at + FRAME_HDR_LEN <= len(data):
        require(data[at:at + 4] == b"FRM1", "frame magic at offset %d" % at)
        comp, raw, nev = struct.unpack_from("<III", data, at + 8)
        crc = struct.unpack_from("<I", data, at + 40)[0]
        require(zlib.crc32(data[at:at + 40]) == crc, "frame header checksum at %d" % at)
        body = at + FRAME_HDR_LEN
        out.append(Frame(at, data[at + 4], comp, raw, nev, data[body:body + comp]))
        at = body + comp
    require_eq(at, len(data), "frames end at the end of the file")
    return out


def read_trailer(path):
    """The trailer's key/value list as {key: int}, read straight from the
    file by docs/FORMAT.md (§3: the last frame, kind 2, comp_len == raw_len;
    §6: the payload is uncompressed `key NUL value NUL` pairs).  dump and
    report do not show per-type drop counts (dropped.<type>); this is the
    only way to see them."""
    frames = read_frames(path)
    require(frames and frames[-1].kind == FRAME_TRAILER, "no trailer frame in %s" % path)
    tr = frames[-1]
    require_eq(tr.comp_len, tr.raw_len, "the trailer is stored uncompressed")
    parts = tr.payload.split(b"\0")
    require(parts[-1] == b"" and len(parts) % 2 == 1, "trailer is not a key/value list")
    kv = {}
    for k, v in zip(parts[0:-1:2], parts[1:-1:2]):
        kv[k.decode()] = int(v)
    return kv


class Track(Proc):
    """A finished `memtrack track` with its artifact."""

    def __init__(self, proc, artifact):
        Proc.__init__(self, proc.argv, proc.rc, proc.stdout, proc.stderr)
        self.artifact = artifact

    @property
    def events(self):
        return self.artifact.events

    @property
    def report(self):
        return self.artifact.report


def track_argv(cmd, out, opts=()):
    """memtrack track argv; cmd is a list (run after --) or a str (shell form)."""
    argv = [MEMTRACK, "track", "-q", "-o", str(out)] + list(opts)
    if isinstance(cmd, str):
        return argv + [cmd]
    return argv + ["--"] + [str(c) for c in cmd]


def track(tmp, cmd, opts=(), name="out.mtrk", expect_rc=0, timeout=DEFAULT_TIMEOUT):
    """Tracks cmd into tmp/name; requires memtrack's exit status expect_rc
    (None: any)."""
    out = Path(tmp) / name
    p = run(track_argv(cmd, out, opts), timeout=timeout)
    if expect_rc is not None:
        require(p.rc == expect_rc, "memtrack exit status %s, expected %s: %s"
                % (p.rc, expect_rc, p.describe()))
    return Track(p, Artifact(out))


def spawn_track(tmp, cmd, opts=(), name="out.mtrk", stdout=subprocess.PIPE, preexec_fn=None):
    """Starts memtrack track in the background (own session); returns
    (Popen, Artifact)."""
    out = Path(tmp) / name
    p = subprocess.Popen(track_argv(cmd, out, opts), stdin=subprocess.DEVNULL,
                         stdout=stdout, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=preexec_fn)
    return p, Artifact(out)


def signal_state(ignored=()):
    """A preexec_fn: every signal's default disposition, nothing blocked,
    then @ignored ignored.  A test of signals sets up the state it checks
    itself: the shell that started the tests may have left others (nohup
    ignores SIGHUP, a background job SIGINT and SIGQUIT), which memtrack
    passes on to the command as they are."""
    def setup():
        for s in signal.valid_signals():
            if s not in (signal.SIGKILL, signal.SIGSTOP):
                try:
                    signal.signal(s, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
        for s in ignored:
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    return setup


def finish(p, timeout=DEFAULT_TIMEOUT):
    """Waits for a spawn_track Popen; returns a Proc."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        raise Failure("memtrack timed out after %ss: %s\n  stderr: %s"
                      % (timeout, " ".join(p.args), _fmt(err, 1500)))
    return Proc(p.args, p.returncode, out, err)


def wait_until(cond, what, timeout=20.0, interval=0.02):
    """Polls cond() (no fixed sleep stands in for synchronisation: this
    returns as soon as cond holds)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Failure("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def kv_lines(text):
    """'name value' lines -> dict of ints (fixtures print their addresses so)."""
    d = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            d[parts[0]] = int(parts[1])
    return d


# --------------------------------------------------------------------------
# records

def proj(e, drop=VOLATILE_KEYS):
    """A record without the keys that change from run to run."""
    return {k: v for k, v in e.items() if k not in drop}


def of_type(evs, *types):
    return [e for e in evs if e["type"] in types]


def heap(evs):
    return of_type(evs, *HEAP_TYPES)


def count(evs, **match):
    return sum(1 for e in evs if all(e.get(k) == v for k, v in match.items()))


def root_pid(evs):
    """The pid of the tracked command: the first exec record's."""
    execs = of_type(evs, "exec")
    require(execs, "no exec record in the artifact")
    return execs[0]["pid"]


def tree_pids(evs):
    """Every process (not thread) the records mention.  An `object` record
    is memtrack's own (pid 0, FORMAT.md 8.2): it names no process."""
    return sorted({e["pid"] for e in evs if e["type"] != "object"})


def _covers(e, addr):
    return e["addr"] <= addr < e["addr"] + e["len"]


def markers(evs, pid, tid=None):
    """(begin, end) marker malloc records of pid's thread tid (default: the
    main thread, tid == pid); each must occur exactly once."""
    tid = pid if tid is None else tid
    mine = [e for e in evs if e["pid"] == pid and e["tid"] == tid]
    b = [e for e in mine if e["type"] == "malloc" and e["size"] == MARKER_BEGIN_SIZE]
    en = [e for e in mine if e["type"] == "malloc" and e["size"] == MARKER_END_SIZE]
    require_eq(len(b), 1, "begin markers (malloc %d) of pid %d tid %d"
               % (MARKER_BEGIN_SIZE, pid, tid))
    require_eq(len(en), 1, "end markers (malloc %d) of pid %d tid %d"
               % (MARKER_END_SIZE, pid, tid))
    require(b[0]["ts"] < en[0]["ts"], "begin marker after end marker")
    return b[0], en[0]


def window(evs, pid, tid=None):
    """The records of pid's thread tid (default the main thread) between its
    begin and end marker mallocs, without the markers' own records: the free
    of the begin block, the munmap of its mapping, the mmap of the end
    block.  (A brk the end marker's malloc makes stays: tests that look at
    brk records make the markers mmap, see fixtures/vm.c.)"""
    tid = pid if tid is None else tid
    b, en = markers(evs, pid, tid)
    inner = [e for e in evs if e["pid"] == pid and e["tid"] == tid
             and b["ts"] < e["ts"] < en["ts"]]
    out, freed, unmapped = [], False, False
    for e in inner:
        if not freed and e["type"] == "free" and e["addr"] == b["addr"]:
            freed = True
            continue
        if not unmapped and e["type"] == "munmap" and _covers(e, b["addr"]):
            unmapped = True
            continue
        if e["type"] == "mmap" and _covers(e, en["addr"]):
            continue
        out.append(e)
    return out


def ts_window(evs, pids, marker_pid):
    """Records of any of pids between marker_pid's begin and end markers (by
    timestamp), for tests with several threads or processes."""
    b, en = markers(evs, marker_pid)
    pids = set(pids)
    return [e for e in evs if e["pid"] in pids and b["ts"] < e["ts"] < en["ts"]]


# --------------------------------------------------------------------------
# runs shared by several tests

SESSION_TMP = None   # set by conftest.py: a directory removed when the run ends
_shared = {}


def shared_track(key, cmd, opts=(), expect_rc=0, timeout=DEFAULT_TIMEOUT):
    """track() once per test run for all tests that ask for the same key
    (a fixture several tests look at is tracked once).  A failed run is
    remembered too, and fails every test that asks for it."""
    if key not in _shared:
        import tempfile
        d = Path(tempfile.mkdtemp(prefix="shared-", dir=SESSION_TMP))
        try:
            _shared[key] = track(d, cmd, opts, expect_rc=expect_rc, timeout=timeout)
        except Failure as e:
            _shared[key] = e
    v = _shared[key]
    if isinstance(v, Failure):
        raise Failure("(shared run %s) %s" % (key, v))
    return v


class ControlClient:
    """A raw client of the control socket (what docs/CONTROL.md's Python
    example does)."""

    def __init__(self, path, timeout=10):
        """@timeout: how long an answer() may take (socket.timeout after)."""
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(str(path))
        self.f = self.s.makefile("rb")

    def send(self, data):
        self.s.sendall(data)

    def answer(self):
        return self.f.readline().decode()

    def cmd(self, line):
        self.send(line.encode() + b"\n")
        return self.answer()

    def close(self):
        self.f.close()
        self.s.close()


def proc_stats():
    """(pid, name, fields after the name) of every process in /proc/*/stat
    (fields[0] is the state, fields[1] the ppid, ...); gone ones are skipped."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        yield int(d), st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()


def live_reapers():
    """Pids of memtrack-reaper processes still running (not zombies)."""
    return [pid for pid, name, f in proc_stats() if name == "memtrack-reaper" and f[0] != "Z"]


def wait_for_reapers(timeout=30.0, besides=()):
    """Waits (at most timeout s) until earlier runs' reapers are done closing
    their links: each uprobe detach takes the kernel's uprobe locks, which a
    fork or a burst of uprobe hits then waits behind, so a test that times
    forks or counts drops starts on a machine that is not still tearing down
    the previous tests.  Reapers in `besides` (pids alive before the run
    waited for started: another memtrack's on the machine) are not waited
    for.  Returns the reapers still alive (none, normally)."""
    besides = set(besides)
    deadline = time.monotonic() + timeout
    left = [r for r in live_reapers() if r not in besides]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [r for r in live_reapers() if r not in besides]
    return left

