# SPDX-License-Identifier: MIT
"""The offline readers facing what a user can hand root's memtrack (issue
27): an artifact cut short as a SIGKILLed `track --stacks` leaves it, an
artifact that is a FIFO or a device, and recorded binaries replaced by a
FIFO, a device, a directory or a huge sparse file.

Every artifact is a real `memtrack track` run of a fixture; the hostile
part is done to it afterwards, as an attacker would: `head -c N` and
mkfifo/mknod/truncate where the binary was.  Whether a FIFO or device was
opened at all is asked of the kernel (inotify IN_OPEN on it), not guessed
from timing."""
import ctypes
import gzip
import json
import os
import shutil
import stat
import struct
import subprocess

import mtlib
from mtlib import (ALLOC_TYPES, FRAME_HDR_LEN, MEMTRACK, check_eq, check_true, fixture,
                   parse_dump, read_frames, require, require_eq, run, track)
from callsites import line_of, own_cache

TIMEOUT = 20  # a hang fails the test instead of stalling the suite
METRICS = ("peak", "allocations", "allocated", "leaked")


def mt(*args, rc=0, timeout=TIMEOUT):
    p = run([MEMTRACK] + [str(a) for a in args], timeout=timeout)
    require(p.rc == rc, "exit status %s, expected %s: %s" % (p.rc, rc, p.describe()))
    return p


class Opens:
    """Counts the kernel's IN_OPEN events on one path (inotify, via libc)."""
    IN_OPEN = 0x20

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        require(self.fd >= 0, "inotify_init1: errno %d" % ctypes.get_errno())
        wd = self.libc.inotify_add_watch(self.fd, str(path).encode(), self.IN_OPEN)
        require(wd >= 0, "inotify_add_watch %s: errno %d" % (path, ctypes.get_errno()))
        self.n = 0

    def count(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.n
            at = 0
            while at < len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, at)
                self.n += bool(mask & self.IN_OPEN)
                at += 16 + length

    def close(self):
        os.close(self.fd)


def stacks_run(tmp, exe, name="full.mtrk"):
    """exe tracked with --stacks in 4 KiB frames (several frames to cut between)."""
    t = track(tmp, [exe], opts=["--stacks", "--batch-size", "4K"], name=name)
    return t.artifact.path


def cut(src, n, dst):
    data = open(src, "rb").read()
    require(n < len(data), "cut at %d of a %d-byte file" % (n, len(data)))
    with open(dst, "wb") as f:
        f.write(data[:n])
    return str(dst)


def events_before(frames, n):
    """Records a reader returns of a file cut to n bytes: those of every whole frame before it."""
    return sum(f.nevents for f in frames
               if f.kind == mtlib.FRAME_EVENTS and f.offset + FRAME_HDR_LEN + f.comp_len <= n)


def expected_sites(evs):
    """stack id -> {metric: value} worked out from the records by
    docs/METRICS.md ("Call sites"): in file order, a realloc releases its old
    block, an allocation over a live address replaces it, exit/exec and the
    end of the file leak what is live; a site's peak is what it held when the
    tree's live bytes last rose to a new maximum."""
    live, site_live, sites = {}, {}, {}
    tree, peak, at_peak = 0, 0, {}

    def site(s):
        return sites.setdefault(s, {"allocations": 0, "allocated": 0, "leaked": 0,
                                    "leaked_count": 0})

    def release(key):
        nonlocal tree
        size, s = live.pop(key)
        site_live[s] -= size
        tree -= size
        return size, s

    def sweep(pid):
        for key in [k for k in live if k[0] == pid]:
            size, s = release(key)
            site(s)["leaked"] += size
            site(s)["leaked_count"] += 1

    for e in evs:
        t, pid = e["type"], e["pid"]
        if t == "realloc" and (pid, e["old_addr"]) in live:
            release((pid, e["old_addr"]))
        if t in ALLOC_TYPES:
            key, s = (pid, e["addr"]), e.get("stack", 0)
            if key in live:
                release(key)
            live[key] = (e["size"], s)
            site(s)["allocations"] += 1
            site(s)["allocated"] += e["size"]
            site_live[s] = site_live.get(s, 0) + e["size"]
            tree += e["size"]
            if tree > peak:
                peak, at_peak = tree, dict(site_live)
        elif t == "free" and (pid, e["addr"]) in live:
            release((pid, e["addr"]))
        elif t in ("exit", "exec"):
            sweep(pid)
    for pid in {k[0] for k in live}:
        sweep(pid)
    for s, v in sites.items():
        v["peak"] = at_peak.get(s, 0)
    return sites, peak


def ranking(sites, metric):
    """[(stack, value)] as report --top ranks them: value down, then stack id up; zeros left out."""
    v = [(s, d[metric]) for s, d in sites.items() if d[metric]]
    return sorted(v, key=lambda x: (-x[1], x[0]))


def frames_by_stack(doc):
    return {s["stack"]: s["frames"] for m in METRICS for s in doc["top"][m]}


def test_top_on_truncated_stacks_file(tmp):
    """Item 7: report --top on a --stacks artifact cut inside a frame, as a
    SIGKILLed track leaves it, ranks the call sites of exactly the records
    before the cut, each with the stack the whole file gives it, says the
    file is truncated and exits 0 (it segfaulted: no symbolizer was made)."""
    own_cache(tmp)
    full = stacks_run(tmp, fixture("callsites"))
    frames = read_frames(full)
    ev_frames = [f for f in frames if f.kind == mtlib.FRAME_EVENTS]
    require(len(ev_frames) >= 3, "callsites in 4 KiB frames: %d event frames" % len(ev_frames))
    n = ev_frames[2].offset + FRAME_HDR_LEN + 10  # inside the third frame's payload
    path = cut(full, n, tmp / "cut.mtrk")
    k = events_before(frames, n)
    dump = mt("dump", path)
    evs = parse_dump(dump.stdout, sort=False)
    all_evs = parse_dump(mt("dump", full).stdout, sort=False)
    require_eq(evs, all_evs[:k], "the cut file's records: the first %d of the whole file's" % k)
    sites, peak = expected_sites(evs)
    require(sites and peak, "records before the cut hold allocations: %d records" % k)

    whole = frames_by_stack(json.loads(mt("report", full, "--top", 1000000, "--json").stdout))
    stacks_before = {e["id"] for e in evs if e["type"] == "stack"}
    p = mt("report", path, "--top", 1000000, "--json")
    doc = json.loads(p.stdout)
    check_eq(doc["truncated"], True, "report --json says truncated")
    check_eq(doc["peak_heap_bytes"], peak, "peak heap of the records before the cut")
    for m in METRICS:
        got = [(s["stack"], s[{"peak": "peak_bytes", "allocations": "alloc_count",
                               "allocated": "allocated_bytes", "leaked": "leaked_bytes"}[m]])
               for s in doc["top"][m]]
        check_eq(got, ranking(sites, m), "ranking by %s of the cut file" % m)
        for s in doc["top"][m]:
            want = whole.get(s["stack"], []) if s["stack"] in stacks_before else []
            check_eq(s["frames"], want, "frames of stack %d (by %s)" % (s["stack"], m))
    text = mt("report", path, "--top", 3, "--by", "stack").stdout
    warning = ("warning:      file truncated at offset %d (inside a frame payload): %d events read\n"
               % (n, k))
    check_true(warning in text, "%r in:\n%s" % (warning, text))
    kk = min(3, len(ranking(sites, "allocations")))
    heading = "\ntop %d call site%s by allocations:\n" % (kk, "" if kk == 1 else "s")
    check_true(heading in text, "%r in:\n%s" % (heading, text))


def cuts_of(full):
    """Cut sizes that end the file at each kind of place: right after the file
    header (no frame), inside a frame header, inside a payload, at a frame
    boundary, inside the trailer."""
    frames = read_frames(full)
    ev = [f for f in frames if f.kind == mtlib.FRAME_EVENTS]
    require(len(ev) >= 3, "need 3 event frames, got %d" % len(ev))
    return [ev[0].offset, ev[1].offset + 20, ev[1].offset + FRAME_HDR_LEN + 10, ev[2].offset,
            frames[-1].offset + FRAME_HDR_LEN + 5]


def test_every_command_on_truncated_file(tmp):
    """Every reader on a --stacks artifact cut at each kind of place finishes
    with exit status 0 and the numbers of the records before the cut: dump
    (those records), report text/--json/--top/--html/--svg/--per-process,
    diff, export perfetto/csv/pprof, flamegraph (its peak graph sums to the
    report's peak heap)."""
    own_cache(tmp)
    full = stacks_run(tmp, fixture("callsites"))
    frames = read_frames(full)
    all_evs = parse_dump(mt("dump", full).stdout, sort=False)
    for n in cuts_of(full):
        path = cut(full, n, tmp / ("cut%d.mtrk" % n))
        k = events_before(frames, n)
        what = "cut at %d (%d records)" % (n, k)
        d = mt("dump", path)
        check_eq(parse_dump(d.stdout, sort=False), all_evs[:k], what + ": dump")
        check_true("file truncated at offset %d" % n in d.stderr, what + ": dump says so: " + d.stderr)
        rep = json.loads(mt("report", path, "--json").stdout)
        allocs = sum(1 for e in all_evs[:k] if e["type"] in ALLOC_TYPES)
        check_eq((rep["truncated"], rep["events"], rep["alloc_count"]), (True, k, allocs),
                 what + ": report --json truncated, events, alloc_count")
        check_true("(file truncated)" in mt("report", path).stdout, what + ": report text")
        top = json.loads(mt("report", path, "--top", 5, "--json").stdout)
        check_eq(sum(s["alloc_count"] for s in top["top"]["allocations"]) <= allocs, True,
                 what + ": --top counts")
        mt("report", path, "--top", 5)
        mt("report", path, "--html", tmp / "t.html", "--per-process")
        mt("report", path, "--svg", tmp / "t.svg")
        check_true("<svg " in open(tmp / "t.svg").read(), what + ": --svg wrote an SVG")
        diff = json.loads(mt("diff", path, full, "--json").stdout)
        check_eq(diff["metrics"]["alloc_count"]["base"], allocs, what + ": diff's base alloc_count")
        mt("export", "--format=perfetto", path, "-o", tmp / "t.json")
        json.loads(open(tmp / "t.json").read())
        mt("export", "--format=csv", path, "-o", tmp / "t.csv")
        mt("export", "--format=pprof", path, "-o", tmp / "t.pb.gz")
        check_true(len(gzip.open(tmp / "t.pb.gz").read()) > 0, what + ": pprof profile")
        mt("flamegraph", path, "-o", tmp / "f.svg")
        folded = mt("flamegraph", path, "--folded").stdout
        total = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if line)
        check_eq(total, rep["peak_heap_bytes"], what + ": flame graph sums to the peak heap")


def test_artifact_fifo_or_device_refused(tmp):
    """`report FILE` (and every reader) on a FIFO nobody writes or a device
    returns at once with one line saying what it is, and never opens it."""
    fifo = tmp / "a.mtrk"
    os.mkfifo(fifo)
    dev = tmp / "zero.mtrk"
    os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    for path, kind in ((fifo, "a FIFO"), (dev, "a character device")):
        opens = Opens(path)
        for argv in (["report", path], ["report", path, "--top", 3], ["dump", path],
                     ["diff", path, path], ["export", "--format=csv", path, "-o", tmp / "o.csv"],
                     ["export", "--format=pprof", path, "-o", tmp / "o.pb.gz"],
                     ["flamegraph", path, "--folded"]):
            p = mt(*argv, rc=1)
            check_eq(p.stderr, "memtrack: cannot read '%s': it is %s, not a regular file; "
                     "memtrack reads artifacts from files (save it to one first)\n" % (path, kind),
                     "%s: the message" % argv[0])
        check_eq(opens.count(), 0, "opens of %s" % path)
        opens.close()


def recorded_prog(tmp):
    """callsites copied to tmp/bin/prog and tracked from there; returns (artifact, prog)."""
    (tmp / "bin").mkdir()
    prog = tmp / "bin" / "prog"
    shutil.copy(fixture("callsites"), prog)
    return stacks_run(tmp, str(prog)), prog


def check_unresolved(doc, prog, what):
    """Every frame in prog is shown as prog+0xADDR; libc's still have names."""
    frames = [f for m in METRICS for s in doc["top"][m] for f in s["frames"]]
    mine = [f for f in frames if f["object"] == str(prog)]
    require(mine, what + ": frames in %s" % prog)
    check_eq([f["function"] for f in mine], ["prog+0x%x" % f["addr"] for f in mine],
             what + ": prog's frames unresolved")
    check_true(any(f["function"] == "__libc_start_main" for f in frames),
               what + ": libc's frames still resolved")


def test_recorded_binary_now_fifo(tmp):
    """Item 8: the recorded binary's path is now a FIFO nobody writes:
    report --top, flamegraph and export --format=pprof finish, show its
    frames unresolved, warn once, and never open the FIFO (they hung in
    open())."""
    own_cache(tmp)
    art, prog = recorded_prog(tmp)
    os.unlink(prog)
    os.mkfifo(prog)
    opens = Opens(prog)
    warning = ("memtrack: warning: '%s' is a FIFO, not a regular file, so its frames are left "
               "unresolved (put the recorded binary back there to resolve them)\n" % prog)
    p = mt("report", art, "--top", 3, "--json")
    check_unresolved(json.loads(p.stdout), prog, "report --top")
    check_eq(p.stderr, warning, "report --top's warning")
    f = mt("flamegraph", art, "--folded")
    check_true("prog+0x" in f.stdout and "__libc_start_main" in f.stdout,
               "flamegraph --folded: " + f.stdout[:500])
    check_eq(f.stderr, warning, "flamegraph's warning")
    x = mt("export", "--format=pprof", art, "-o", tmp / "p.pb.gz")
    check_eq(x.stderr, warning + "memtrack: wrote %s\n" % (tmp / "p.pb.gz"),
             "export --format=pprof's warning")
    check_true(len(gzip.open(tmp / "p.pb.gz").read()) > 0, "pprof profile written")
    check_eq(opens.count(), 0, "opens of the FIFO")
    opens.close()


def test_recorded_binary_now_device_dir_or_huge(tmp):
    """The recorded binary's path is now a device node (never opened), a
    directory, a 5 GiB sparse copy (over the 4 GiB bound) or a 1.5 GiB one
    owned by another user (over the 1 GiB bound for files memtrack copies):
    its frames are unresolved, with the warning saying which."""
    own_cache(tmp)
    art, prog = recorded_prog(tmp)
    real = tmp / "prog.real"
    shutil.move(prog, real)

    def report(why):
        p = mt("report", art, "--top", 3, "--json")
        check_unresolved(json.loads(p.stdout), prog, why)
        check_eq(p.stderr, "memtrack: warning: '%s' %s, so its frames are left unresolved (put "
                 "the recorded binary back there to resolve them)\n" % (prog, why), why)

    os.mknod(prog, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    opens = Opens(prog)
    report("is a character device, not a regular file")
    check_eq(opens.count(), 0, "opens of the device")
    opens.close()
    os.unlink(prog)
    os.mkdir(prog)
    report("is a directory, not a regular file")
    os.rmdir(prog)
    shutil.copy(real, prog)
    os.truncate(prog, 5 << 30)
    report("is over 4 GiB")
    os.truncate(prog, 3 << 29)
    os.chown(prog, 65534, 65534)
    report("is over 1 GiB (and not root's own file)")
    os.unlink(prog)
    shutil.copy(real, prog)
    os.chown(prog, 65534, 65534)  # another user's binary, within the bound: copied, resolved
    doc = json.loads(mt("report", art, "--top", 3, "--json").stdout)
    names = [f["function"] for s in doc["top"]["allocations"] for f in s["frames"]]
    check_true("c" in names and "main" in names, "another user's binary resolves: %s" % names)


def test_debuglink_fifo_not_opened(tmp):
    """A binary whose .gnu_debuglink file is now a FIFO: the symbols of its
    .symtab still name its frames; the FIFO is never opened (it hung)."""
    own_cache(tmp)
    (tmp / "bin").mkdir()
    prog = tmp / "bin" / "prog"
    shutil.copy(fixture("callsites"), prog)
    for argv in (["objcopy", "--only-keep-debug", prog, str(prog) + ".debug"],
                 ["strip", "-g", prog],
                 ["objcopy", "--add-gnu-debuglink=%s.debug" % prog, prog]):
        p = run(argv)
        require(p.rc == 0, p.describe())
    art = stacks_run(tmp, str(prog))
    doc = json.loads(mt("report", art, "--top", 1, "--json").stdout)
    c = doc["top"]["allocations"][0]["frames"][0]
    check_eq((c["function"], c["line"]), ("c", line_of("sink = malloc(200)")),
             "c's line from the debuglink file")
    shutil.rmtree(tmp / "cache")
    os.unlink(str(prog) + ".debug")
    os.mkfifo(str(prog) + ".debug")
    opens = Opens(str(prog) + ".debug")
    doc = json.loads(mt("report", art, "--top", 1, "--json").stdout)
    c = doc["top"]["allocations"][0]["frames"][0]
    check_eq((c["function"], c["file"], c["line"]), ("c", None, 0),
             "c named by .symtab alone, no line")
    check_eq(opens.count(), 0, "opens of the debuglink FIFO")
    opens.close()



def test_text_output_escapes_control_characters(tmp):
    """A program named with terminal escape sequences (ESC, BEL, a UTF-8 C1
    CSI) and run with one in its arguments: the text of report, report --top
    and diff shows them as \\xNN and writes no control character but the
    newline to the terminal of whoever reads the report (root, maybe)."""
    own_cache(tmp)
    (tmp / "bin").mkdir()
    name = "\x1b]0;owned\x07\u009b2Jprog"
    prog = tmp / "bin" / name
    shutil.copy(fixture("callsites"), prog)
    art = track(tmp, [str(prog), "\x1b[31mred"], opts=["--stacks"]).artifact.path
    shown = "\\x1b]0;owned\\x07\\xc2\\x9b2Jprog"
    for argv in (["report", art], ["report", art, "--top", 2], ["diff", art, art]):
        out = mt(*argv).stdout
        bad = sorted({c for c in out if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f})
        check_eq(bad, [], "%s: control characters in its text" % argv[:2])
        check_true(shown in out, "%s: %r in:\n%s" % (argv[:2], shown, out[:3000]))
        check_true("\\x1b[31mred" in out, "%s: the escaped argument in its text" % argv[:2])
    doc = json.loads(mt("report", art, "--json").stdout)
    check_eq(doc["command"], "%s \x1b[31mred" % prog, "report --json keeps the bytes (JSON-escaped)")


def test_between_on_truncated_file(tmp):
    """report --between on a controlled run's artifact cut short: cut after
    both marks (inside the trailer) it gives the whole file's section; cut
    before the second mark it says that mark is missing (exit 1), as for a
    file that never had it."""
    sock = tmp / "ctl.sock"
    full = track(tmp, [fixture("ctl_phases")],
                 opts=["--control", str(sock), "--start-disabled", "--batch-size", "4K"]).artifact.path
    frames = read_frames(full)
    want = mt("report", full, "--between", "measure", "measured", "--json").stdout
    late = cut(full, frames[-1].offset + FRAME_HDR_LEN + 5, tmp / "late.mtrk")
    check_eq(mt("report", late, "--between", "measure", "measured", "--json").stdout, want,
             "the section of a file cut inside its trailer")
    evs = parse_dump(mt("dump", full).stdout, sort=False)
    marks = [i for i, e in enumerate(evs) if e["type"] == "mark" and e["name"] == "measured"]
    require(marks, "ctl_phases marks 'measured'")
    # the first whole-frame boundary at or before the 'measured' mark's frame
    before = max(f.offset for f in frames
                 if f.kind == mtlib.FRAME_EVENTS and events_before(frames, f.offset) <= marks[0])
    early = cut(full, before, tmp / "early.mtrk")
    k = events_before(frames, before)
    require(not any(e["type"] == "mark" and e["name"] == "measured" for e in evs[:k]),
            "the early cut drops 'measured'")
    has_from = any(e["type"] == "mark" and e["name"] == "measure" for e in evs[:k])
    missing = "no mark 'measured' after mark 'measure'" if has_from else "no mark 'measure';"
    p = mt("report", early, "--between", "measure", "measured", rc=1)
    check_true(missing in p.stderr, "%r in: %s" % (missing, p.stderr))


def dump_shows(path, pred):
    """Whether `memtrack dump path` shows an event for which pred holds,
    read as it streams and stopped at the first: a file that grows faster
    than dump prints (a command allocating on the in-process path) is
    never read to its end."""
    d = subprocess.Popen([MEMTRACK, "dump", str(path)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return any(pred(json.loads(line)) for line in d.stdout)
    finally:
        d.kill()
        d.communicate()


def test_top_on_sigkilled_stacks_run(tmp):
    """Item 7 as found: a `track --stacks` SIGKILLed while its command
    allocates leaves a file without trailer; report --top on it exits 0 and
    ranks the command's malloc(5001) loop, symbolized, with the truncation
    noted (it segfaulted)."""
    own_cache(tmp)
    p, art = mtlib.spawn_track(tmp, [fixture("spinner"), "forever"],
                               opts=["--stacks", "--flush-ms", "50"], name="killed.mtrk")
    try:
        mtlib.wait_until(lambda: os.path.exists(art.path) and dump_shows(
            art.path, lambda e: e["type"] == "malloc" and e["size"] == 5001),
            "spinner's malloc(5001) on disk", timeout=20)
        os.kill(p.pid, 9)
        p.wait()
    finally:
        mtlib.kill_group(p)
        p.communicate()
    r = mt("report", art.path, "--top", 3, "--json")
    doc = json.loads(r.stdout)
    check_eq(doc["truncated"], True, "report --json truncated")
    site = doc["top"]["allocations"][0]
    check_eq(site["allocated_bytes"], 5001 * site["alloc_count"], "the top site is the 5001-byte loop")
    check_true("main" in [f["function"] for f in site["frames"]],
               "spinner's main in its stack: %s" % [f["function"] for f in site["frames"]])
    text = mt("report", art.path, "--top", 3).stdout
    check_true("warning:      file truncated at offset" in text, "the truncation noted:\n" + text)


def copies_run(tmp, n):
    """callsites copied to tmp/bin/p1..pn and run in turn by one sh: n files,
    n objects in the artifact (the recorder makes one per file).  Returns
    (artifact, paths)."""
    (tmp / "bin").mkdir()
    paths = [tmp / "bin" / ("p%d" % i) for i in range(1, n + 1)]
    for p in paths:
        shutil.copy(fixture("callsites"), p)
    script = "; ".join(str(p) for p in paths)
    art = track(tmp, ["/bin/sh", "-c", script], opts=["--stacks"]).artifact.path
    return art, paths


def objects_of(art):
    return [e for e in parse_dump(mt("dump", art).stdout) if e["type"] == "object"]


def test_one_file_named_by_many_objects(tmp):
    """Two objects of the artifact, whose paths are now hard links of one
    file (as a crafted artifact may name one file a million times): both
    resolve from it; when that file is a FIFO, it is refused with one
    warning, not one per object."""
    own_cache(tmp)
    art, paths = copies_run(tmp, 2)
    named = {e["path"] for e in objects_of(art)}
    require(all(str(p) in named for p in paths), "both copies are objects: %s" % sorted(named))
    os.unlink(paths[1])
    os.link(paths[0], paths[1])
    doc = json.loads(mt("report", art, "--top", 10, "--json").stdout)
    mine = [f for s in doc["top"]["allocations"] for f in s["frames"]
            if f["object"] in (str(p) for p in paths)]
    check_eq({f["object"] for f in mine if f["function"] == "c"}, {str(p) for p in paths},
             "c resolved in both")
    for p in paths:
        os.unlink(p)
    os.mkfifo(paths[0])
    os.link(paths[0], paths[1])
    shutil.rmtree(tmp / "cache")
    p = mt("report", art, "--top", 10, "--json")
    check_eq(len(p.stderr.splitlines()), 1, "one warning for the one FIFO: %r" % p.stderr)
    check_true("is a FIFO, not a regular file" in p.stderr, p.stderr)


def test_many_refused_binaries_warn_ten_times(tmp):
    """Twelve recorded binaries, each now a FIFO of its own: ten warnings
    name them, one line says there are more."""
    own_cache(tmp)
    art, paths = copies_run(tmp, 12)
    for p in paths:
        os.unlink(p)
        os.mkfifo(p)
    lines = mt("report", art, "--top", 10).stderr.splitlines()
    check_eq(len(lines), 11, "ten warnings and one for the rest: %s" % lines)
    check_eq(sum("is a FIFO, not a regular file" in line for line in lines), 10, "named ones")
    check_eq(lines[-1], "memtrack: warning: more of the recorded binaries are refused; their "
             "frames are left unresolved too", "the last line")


def elf_sections(data):
    """[(index, name, header offset, sh_flags, sh_offset, sh_size)] of a 64-bit little-endian ELF."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    out = []
    for i in range(shnum):
        h = shoff + i * shentsize
        name_at, = struct.unpack_from("<I", data, h)
        flags, _, off, size = struct.unpack_from("<QQQQ", data, h + 8)
        name = data[str_off + name_at:data.index(b"\0", str_off + name_at)].decode()
        out.append((i, name, h, flags, off, size))
    return out


def test_recorded_binary_now_crafted_elf(tmp):
    """The recorded binary's path now holds a crafted copy of it (same
    build-id): one whose .debug_str header points past the end of the file,
    one whose .debug_str claims to inflate 2^30 times (SHF_COMPRESSED, a
    decompression bomb's header).  Neither reaches libdw: its frames are
    unresolved, the warning says why."""
    own_cache(tmp)
    art, prog = recorded_prog(tmp)
    real = open(prog, "rb").read()
    secs = {s[1]: s for s in elf_sections(real)}
    require(".debug_str" in secs, "callsites has .debug_str: %s" % sorted(secs))
    _, _, h, flags, off, size = secs[".debug_str"]
    require(size >= 24, ".debug_str holds a compression header")

    def report_with(data, why):
        with open(prog, "wb") as f:
            f.write(data)
        shutil.rmtree(tmp / "cache", ignore_errors=True)
        p = mt("report", art, "--top", 3, "--json")
        check_unresolved(json.loads(p.stdout), prog, why)
        check_eq(p.stderr, "memtrack: warning: '%s' %s, so its frames are left unresolved (put "
                 "the recorded binary back there to resolve them)\n" % (prog, why), why)

    outside = bytearray(real)
    struct.pack_into("<Q", outside, h + 0x18, len(real) - 8)  # sh_offset: 8 bytes before the end
    report_with(bytes(outside), "has a section outside the file")
    bomb = bytearray(real)
    struct.pack_into("<Q", bomb, h + 8, flags | 0x800)  # SHF_COMPRESSED
    struct.pack_into("<IIQQ", bomb, off, 1, 0, size << 30, 1)  # Elf64_Chdr: zlib, 2^30 x its size
    report_with(bytes(bomb), "has a compressed section that would inflate too far")
