# SPDX-License-Identifier: MIT
"""Faults: memtrack killed or signalled during fork storms, the fd limit,
a full disk, -o naming what memtrack did not create, write errors of dump
and report, a PID namespace.  memtrack must never leave a process stopped,
delete or truncate what it did not create, or report success after losing
data."""
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from mtlib import (MEMTRACK, Artifact, Failure, check_eq, check_true, fixture,
                   kill_group, read_trailer, report_json, require, require_eq, run,
                   live_reapers, proc_stats, track_argv, wait_for_reapers, wait_until)

STORM = "while :; do /bin/true; done"


def procs_where(field, value, name=None):
    """Pids whose numeric /proc/PID/stat field after the command (1 ppid,
    2 pgrp, 3 session) is value (and whose command is name, if given)."""
    return [pid for pid, comm, f in proc_stats()
            if int(f[field]) == value and name in (None, comm)]


def children(pid, name=None):
    """Pids whose parent is pid (and whose command is name, if given)."""
    return procs_where(1, pid, name)


def state(pid):
    """The one-letter state of pid, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return st[st.rindex(")") + 2]


def subtree(pids):
    """pids and every descendant alive now."""
    seen, todo = [], list(pids)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        todo.extend(children(p))
    return seen


def stopped(pids):
    return [(p, state(p)) for p in subtree(pids) if state(p) in ("T", "t")]


def start_storm(tmp, cmd, name):
    """memtrack track -- sh -c CMD in its own session; returns (Popen, the
    shell's pid) once the storm has made a few hundred processes."""
    out = tmp / name
    # not a pipe: the storm inherits it and would hold it open
    with open(str(out) + ".stderr", "w") as err:
        p = subprocess.Popen(track_argv(["sh", "-c", cmd], out), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    # the shell by its name: memtrack's first child may be the short-lived
    # middle process of the reaper's double fork (a loaded CI run took it
    # for the shell, which then "stopped forking" once it had exited)
    sh = wait_until(lambda: children(p.pid, "sh"), "memtrack's child shell", timeout=10)[0]
    # a storm of processes parked and resumed: wait until it is going
    wait_until(lambda: os.path.exists(out) and os.path.getsize(out) > 4096 or
               p.poll() is not None, "the storm's first frame", timeout=10)
    time.sleep(0.5)
    return p, sh, out


def session_members(sid):
    """Pids whose session is sid."""
    return procs_where(3, sid)


def stop_storm(pids, sid=None):
    """Kills pids' subtrees and, given memtrack's session sid, every process
    left in it: a storm's background loop that was forked after the subtree
    was listed, and reparented when its shell died, is found only there."""
    # until none is left: on a loaded machine 3 rounds once left a storm
    # loop running (reparented to init) for half an hour after the suite
    deadline = time.monotonic() + 20
    while True:
        victims = set(subtree(pids)) | set(session_members(sid) if sid else [])
        victims = {pid for pid in victims if state(pid) not in (None, "Z")}
        if not victims:
            return
        if time.monotonic() > deadline:
            raise Failure("the storm's processes %s still run 20 s after SIGKILL" % sorted(victims))
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def check_nothing_stopped(pids, what, within=2.0):
    """Every process of pids' subtrees runs (none stopped) within `within` s."""
    t0 = time.monotonic()
    left = stopped(pids)
    while left and time.monotonic() - t0 < within:
        time.sleep(0.05)
        left = stopped(pids)
    check_eq(left, [], "%s: processes (pid, state) still stopped %.1f s later" % (what, within))
    return time.monotonic() - t0


def where_is(pid):
    """pid's state, wait channel and kernel stack, for a failure message."""
    def read(name):
        try:
            return Path("/proc/%d/%s" % (pid, name)).read_text().strip()
        except OSError as e:
            return "(%s)" % e.strerror
    return "state %s, wchan %s, stack %r" % (state(pid), read("wchan"), read("stack")[:600])


def storm_progresses(sh, memtrack, others, what):
    """The storm goes on: its shell runs more than one child within 60 s of
    the end of the dead memtrack's teardown.  Nothing is stopped (that is
    check_nothing_stopped, within 2 s), but a fork waits in the kernel while
    uprobes are detached anywhere on the machine (each detach takes the
    uprobe locks every fork takes): under 0.2 s on this machine alone, over
    10 s in CI runs while another memtrack attached and detached its own.
    So the test waits for the reapers that close the dead memtrack's links
    (not those of other memtracks alive before it started, `others`), and
    for memtrack's own exit, which closes the rest (at most 120 s: a
    teardown that never ends is a failure), and then requires the storm to
    run within 60 s: a hang guard, not a speed promise; a fork blocked for
    good fails here.  Returns the seconds from SIGKILL to 3 children."""
    t0 = time.monotonic()
    wait_until(lambda: state(memtrack) in ("Z", None), "%s: the SIGKILLed memtrack's exit" % what,
               timeout=120)
    left = wait_for_reapers(timeout=max(1.0, 120 - (time.monotonic() - t0)), besides=others)
    check_eq(left, [], "%s: memtrack-reaper processes still running 120 s after SIGKILL" % what)
    seen = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(seen) < 3:
        seen.update(children(sh))
        time.sleep(0.01)
    check_true(len(seen) >= 3, "%s: the storm goes on (children seen in the 60 s after the "
               "teardown: %s; the shell %s)" % (what, sorted(seen), where_is(sh)))
    return time.monotonic() - t0


def test_sigkill_during_fork_storm_leaves_nothing_stopped(tmp):
    """Issue 13 (1): SIGKILL to memtrack while a shell forks /bin/true in a
    loop left one child stopped (state T) forever, in 6 of 6 tries.  Now the
    BPF side sees memtrack's exit and resumes every parked process: three
    tries, nothing stopped within 2 s, the storm goes on once the dead
    memtrack's links are detached (storm_progresses)."""
    for i in range(3):
        wait_for_reapers()
        others = live_reapers()
        p, sh, _ = start_storm(tmp, STORM, "kill%d.mtrk" % i)
        try:
            os.kill(p.pid, signal.SIGKILL)
            check_nothing_stopped([sh], "try %d after SIGKILL" % i)
            print("    try %d: the storm had run 3 more children %.2f s after SIGKILL"
                  % (i, storm_progresses(sh, p.pid, others, "try %d after SIGKILL" % i)))
        finally:
            stop_storm([sh], sid=p.pid)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill_group(p)
                raise Failure("try %d: the SIGKILLed memtrack was not reaped in 60 s" % i)


def test_sigterm_during_background_storm(tmp):
    """Issue 13 (1): SIGTERM while a background job keeps forking left a
    process stopped in 5 of 5 tries, and memtrack took 2.5-11.7 s to exit.
    Now: memtrack exits 143 within 2 s, nothing of the tree is stopped, the
    artifact is complete."""
    for i in range(3):
        p, sh, out = start_storm(tmp, "(%s) & sleep 30" % STORM, "term%d.mtrk" % i)
        tree = subtree([sh])
        try:
            t0 = time.monotonic()
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                raise Failure("try %d: memtrack still runs 2 s after SIGTERM" % i)
            took = time.monotonic() - t0
            check_eq(p.returncode, 128 + signal.SIGTERM, "try %d: memtrack's exit status "
                     "(%.2f s after SIGTERM; stderr %r)" % (i, took, open(str(out) + ".stderr").read()))
            check_nothing_stopped(tree, "try %d after SIGTERM" % i)
            rep = report_json(out)
            check_eq(rep["truncated"], False, "try %d: report --json truncated" % i)
        finally:
            stop_storm(tree, sid=p.pid)
            if p.poll() is None:
                kill_group(p)
            p.wait()


def limit_fds(soft, hard=None):
    def set_limit():
        h = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard is None else hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, h))
    return set_limit


def run_limited(argv, preexec, timeout=120):
    p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=preexec)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.communicate()
        raise Failure("timed out after %ss: %s" % (timeout, argv))
    return p.returncode, out, err


def child_mallocs(art, lo, n):
    """Sizes lo..lo+n-1 malloc'd (each by a child of the tree): size -> count."""
    got = {}
    for e in art.events:
        if e["type"] == "malloc" and lo <= e["size"] < lo + n:
            got[e["size"]] = got.get(e["size"], 0) + 1
    return got


def test_fd_limit_1000_short_lived_children(tmp):
    """Issue 13 (2): with `ulimit -n 1024` and 1,000 short-lived children,
    510 children were recorded with 0 allocations and the summary said 0
    lost (links of exited processes stayed open).  Now each child's malloc
    is recorded, exactly once."""
    out = tmp / "fds.mtrk"
    t0 = time.monotonic()
    rc, _, err = run_limited(track_argv([fixture("fork_seq"), 1000], out), limit_fds(1024))
    took = time.monotonic() - t0
    check_eq(rc, 0, "memtrack's exit status (stderr %r)" % err)
    got = child_mallocs(Artifact(out), 20000, 1000)
    check_eq(sorted(s - 20000 for s, c in got.items() if c == 1), list(range(1000)),
             "children whose malloc(20000 + i) was recorded once (%.1f s)" % took)
    check_eq(read_trailer(out).get("unprobed"), 0, "trailer unprobed")
    print("    fd limit 1024, 1000 children: %.2f s" % took)


@pytest.mark.parametrize("path", [[], ["--no-fast"]], ids=["in-process", "uprobes"])
def test_attach_failure_is_lost_data(tmp, path):
    """Issue 13 (2): a process memtrack could not attach probes to (no fd
    left: hard limit 80, of which memtrack itself holds up to 76 on the
    in-process path, and 40 children alive at once) is lost data: counted
    in the trailer (unprobed), report --json and the summary, and exit
    status 1 unless --allow-drops.
    - On the uprobes, a child is recorded or unprobed: the two add up to 40.
    - On the in-process path a child's calls before its library announced
      go to the uprobes: a child whose probes failed is unprobed (those
      calls may be missing) and may still be recorded from its
      announcement on (one CI run: 1 recorded of 40 unprobed).  So every
      child not recorded is unprobed: 40 - recorded <= unprobed <= 40."""
    n = 40
    for opts, want_rc in (((), 1), (("--allow-drops",), 0)):
        out = tmp / ("hold%d.mtrk" % want_rc)
        argv = track_argv([fixture("fork_hold"), n], out, list(opts) + path)
        argv.remove("-q")
        rc, _, err = run_limited(argv, limit_fds(80, 80))
        check_eq(rc, want_rc, "exit status with %s (stderr %r)" % (list(opts) + path, err))
        unprobed = read_trailer(out).get("unprobed")
        got = child_mallocs(Artifact(out), 30000, n)
        check_true(unprobed and unprobed > 0, "some children unprobed at 80 fds: %s" % unprobed)
        what = "children recorded (%d), unprobed (%s)" % (len(got), unprobed)
        if path:
            check_eq(len(got) + unprobed, n, what + ": their sum")
        else:
            check_true(n - len(got) <= unprobed <= n, what + ": every child not recorded "
                       "is unprobed")
        check_eq(report_json(out)["unprobed_processes"], unprobed, "report --json unprobed")
        check_true(", %d processes unprobed," % unprobed in err, "summary counts them: %r" % err)
        if want_rc:
            check_true("Too many open files" in err, "the reason is given: %r" % err)


def bad_script(tmp):
    s = tmp / "bad-interpreter-script"
    s.write_text("#!/nonexistent/interpreter\n")
    s.chmod(0o755)
    return str(s)


def test_output_device_node_untouched(tmp):
    """Issue 13 (3): `memtrack track -o mynull -- ./bad-interpreter-script`
    removed the device node mynull.  memtrack replaces only regular files:
    a device node, /dev/null itself, is refused (usage error) and stays."""
    node = tmp / "mynull"
    os.mknod(str(node), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    for target in (str(node), "/dev/null"):
        for cmd in ([bad_script(tmp)], [fixture("heap_pairs")]):
            p = run(track_argv(cmd, target))
            check_eq(p.rc, 2, "exit status with -o %s -- %s (stderr %r)" % (target, cmd[0], p.stderr))
            check_true("not a regular file" in p.stderr, "the reason: %r" % p.stderr)
            st = os.lstat(target)
            check_eq((stat.S_ISCHR(st.st_mode), st.st_rdev), (True, os.makedev(1, 3)),
                     "%s is still the null device" % target)
    check_eq(sorted(os.listdir(tmp)), ["bad-interpreter-script", "mynull"], "files in the directory")


def test_output_symlink_untouched(tmp):
    """Issue 13 (3): with a symlink as -o, its target was truncated and the
    link removed.  Both stay as they were."""
    target = tmp / "precious"
    target.write_text("precious data\n")
    link = tmp / "link.mtrk"
    link.symlink_to(target)
    for cmd in ([bad_script(tmp)], [fixture("heap_pairs")]):
        p = run(track_argv(cmd, link))
        check_eq(p.rc, 2, "exit status with -o a symlink -- %s (stderr %r)" % (cmd[0], p.stderr))
        check_eq((os.path.islink(link), os.readlink(link), target.read_text()),
                 (True, str(target), "precious data\n"), "the link and its target")


def test_output_regular_file_replaced_only_when_the_command_runs(tmp):
    """An existing regular -o is replaced when the command runs, left as it
    was when the command cannot run; no temporary file is left either way."""
    out = tmp / "x.mtrk"
    out.write_text("old\n")
    p = run(track_argv([bad_script(tmp)], out))
    check_eq(p.rc, 127, "exit status of a command whose interpreter is missing")
    check_eq(out.read_text(), "old\n", "-o after a failed exec")
    p = run(track_argv([fixture("heap_pairs")], out))
    check_eq(p.rc, 0, "exit status (stderr %r)" % p.stderr)
    check_eq(report_json(out)["truncated"], False, "the new artifact is complete")
    check_eq(sorted(os.listdir(tmp)), ["bad-interpreter-script", "x.mtrk"], "files in the directory")


def test_disk_full(tmp):
    """A full disk: memtrack says so in one line and exits 1; what reached
    the disk is readable."""
    mnt = tmp / "small"
    mnt.mkdir()
    m = run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)])
    require(m.rc == 0, "mount a 64 KiB tmpfs: " + m.describe())
    try:
        out = mnt / "x.mtrk"
        p = run(track_argv([fixture("heap_many"), 100000], out))
        check_eq(p.rc, 1, "exit status on a full disk (stderr %r)" % p.stderr)
        check_true("No space left on device" in p.stderr and
                   len(p.stderr.strip().splitlines()) == 1,
                   "one line naming the problem: %r" % p.stderr)
        d = run([MEMTRACK, "dump", str(out)])
        check_eq(d.rc, 0, "dump of what reached the disk (stderr %r)" % d.stderr)
    finally:
        # lazily: the reaper may still hold the artifact's fd for a moment
        run(["umount", "-l", str(mnt)])


def test_dump_and_report_write_errors(tmp):
    """Issue 13 (4): `memtrack dump a.mtrk > /dev/full` exited 0 silently.
    Every write is checked: exit 1 and one line naming the problem."""
    out = tmp / "a.mtrk"
    p = run(track_argv([fixture("heap_pairs")], out))
    require(p.rc == 0, "track: " + p.describe())
    for argv in (["dump", out], ["report", out], ["report", out, "--json"]):
        with open("/dev/full", "w") as full:
            q = subprocess.run([MEMTRACK] + [str(a) for a in argv], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60)
        check_eq(q.returncode, 1, "exit status of memtrack %s > /dev/full" % argv[0])
        check_true(q.stderr.startswith("memtrack: ") and "No space left on device" in q.stderr
                   and len(q.stderr.splitlines()) == 1, "one line: %r" % q.stderr)


def test_pid_namespace(tmp):
    """Inside a PID namespace of its own memtrack cannot match pids with its
    BPF side: it used to wait forever and record nothing.  It refuses in one
    line naming the fix, leaving nothing behind; the fix (the namespace
    inside the command) records the command exactly."""
    out = tmp / "ns.mtrk"
    p = run(["unshare", "-fp", "--mount-proc"] + track_argv([fixture("fork_seq"), 3], out),
            timeout=20)
    check_eq(p.rc, 1, "exit status inside a PID namespace (stderr %r)" % p.stderr)
    check_true("PID namespace" in p.stderr and len(p.stderr.splitlines()) == 1,
               "one line: %r" % p.stderr)
    check_eq(os.listdir(tmp), [], "files left")
    p = run(track_argv(["unshare", "-fp", "--mount-proc", fixture("fork_seq"), 3], out))
    check_eq(p.rc, 0, "memtrack track -- unshare ... (stderr %r)" % p.stderr)
    check_eq(child_mallocs(Artifact(out), 20000, 3), {20000: 1, 20001: 1, 20002: 1},
             "the children's mallocs inside the namespace")


def test_json_escapes_bytes_that_are_not_utf8(tmp):
    """Issue 13 (6): an exec path with bytes that are not UTF-8 was written
    raw by dump and report --json.  Each such byte is written as \\udcXX
    (docs/FORMAT.md), so every line parses and the bytes come back."""
    name = b"prog\xff\xfe\"\\\x01"
    prog = os.path.join(os.fsencode(str(tmp)), name)
    shutil.copy(fixture("fork_seq"), prog)
    os.chmod(prog, 0o755)
    out = tmp / "j.mtrk"
    q = subprocess.run([MEMTRACK, "track", "-q", "-o", str(out), "--", prog, "1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    require(q.returncode == 0, "track: %r" % q.stderr)
    d = subprocess.run([MEMTRACK, "dump", str(out)], stdout=subprocess.PIPE, timeout=60)
    lines = d.stdout.decode("ascii", "replace").splitlines()
    check_true(all(b"\xff" not in l for l in d.stdout.splitlines()), "no raw 0xff byte in dump")
    paths = [json.loads(l)["path"] for l in lines if '"exec"' in l]
    check_eq([p.encode("utf-8", "surrogateescape") for p in paths], [prog],
             "exec paths, bytes recovered")
    r = subprocess.run([MEMTRACK, "report", str(out), "--json"], stdout=subprocess.PIPE,
                       timeout=60)
    rep = json.loads(r.stdout.decode("utf-8"))
    check_eq({p["command"].encode("utf-8", "surrogateescape") for p in rep["processes"]},
             {name}, "report --json process commands")


@pytest.mark.parametrize("opts", [[], ["--no-fast"]], ids=["in-process", "uprobes"])
def test_load_100_threads_default_ring(tmp, opts):
    """Issue 13 (load): 100 threads x 10,000 malloc/free pairs in one burst
    lost 1.3 million records at the default ring (2 MiB).  The poller and
    writer now run at nice -20, and memtrack's memory stays bounded (the
    ring and the batch pool).  Both heap paths:
    - the library's rings wait for a free slot, so every record arrives and
      memtrack exits 0;
    - the uprobes' records cross the BPF ring, which cannot wait: on this
      machine alone every record arrives too (0 drops in 8 of 8 runs), but
      whether the poller keeps up with 100 busy threads on 2 CPUs is a
      throughput figure of the machine (one loaded CI run lost 45,567 of
      2,000,000), not a property a test can hold.  What memtrack promises
      is that no loss is silent: each malloc is in the file or counted in
      dropped.malloc, and any drop makes the exit status 1."""
    out = tmp / "load.mtrk"
    wait_for_reapers()
    p = subprocess.Popen(track_argv([fixture("thread_pairs"), 100, 10000], out, opts),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    hwm = 0
    while p.poll() is None:
        try:
            with open("/proc/%d/status" % p.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
    err = p.stderr.read()
    trailer = read_trailer(out)
    dropped = {k: v for k, v in trailer.items() if k.startswith("dropped.") and v}
    uprobes = "--no-fast" in opts
    if not uprobes:
        check_eq(dropped, {}, "records dropped by the in-process path")
    check_eq(p.returncode, 1 if dropped else 0, "memtrack's exit status with %s dropped "
             "(stderr %r)" % (dropped, err))
    d = subprocess.run([MEMTRACK, "dump", str(out)], stdout=subprocess.PIPE, text=True,
                       timeout=120)
    sizes, mallocs = {}, 0
    for line in d.stdout.splitlines():
        if line.startswith('{"type":"malloc"'):
            mallocs += 1
            s = json.loads(line)["size"]
            if 64 <= s < 164:
                sizes[s] = sizes.get(s, 0) + 1
    # the burst's 1,000,000, the two marker blocks and stdout's buffer
    check_eq(mallocs + dropped.get("dropped.malloc", 0), 100 * 10000 + 3,
             "mallocs in the file + dropped.malloc (%s)" % dropped)
    check_eq({s for s, n in sizes.items() if n > 10000}, set(), "sizes with more than 10,000")
    if not dropped:
        check_eq(sizes, {64 + t: 10000 for t in range(100)}, "mallocs per thread size")
    check_true(0 < hwm < 64 * 1024, "memtrack's peak RSS %d kB under 64 MiB" % hwm)
    print("    100 threads x 10,000 pairs: memtrack peak RSS %d kB, dropped %s" % (hwm, dropped))
