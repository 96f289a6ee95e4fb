# SPDX-License-Identifier: MIT
"""The in-process heap path as untrusted input (issue 27, items 3-6 and 11).

The attacker is the tracked program itself (fixtures/hostile_ring.c): it
writes into the ring libmemtrack-fast.so handed memtrack, with the ring's
real layout, or talks to $MEMTRACK_FAST_SOCKET itself; or another user
connects to that socket.  memtrack (root) must never act on what the ring
says (no SIGCONT, no uprobes for another process, no fake rss, exit or
disable), never hang or crash on it, count what it refused (`bad_records`
in the summary line and in `report --json`, a `refused` record in the
artifact), and leave no socket behind when it is SIGKILLed.
"""
import os
import pwd
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from mtlib import (MEMTRACK, Artifact, check_eq, check_true, fixture, finish, heap, kill_group,
                   of_type, parse_dump, proj, require, require_eq, run, spawn_track, track, wait_until,
                   window)

FAST = ["--fast"]


def kv_text(text):
    """'key value' lines -> {key: str}."""
    return dict(line.split(None, 1) for line in text.splitlines() if len(line.split(None, 1)) == 2)


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


# The socket's path, in a shell of the tree: the library takes the variable
# out of the shell's environment; /proc/$$/environ (what it was exec'd with) has it.
SOCKET_OF_SH = "$(tr '\\0' '\\n' < /proc/$$/environ | sed -n 's/^MEMTRACK_FAST_SOCKET=//p')"


def track_verbose(tmp, cmd, name="out.mtrk", timeout=60, env=None, opts=()):
    """memtrack track without -q (its summary line), under --fast."""
    out = Path(tmp) / name
    argv = [MEMTRACK, "track", "-o", str(out)] + FAST + list(opts) + ["--"] + cmd
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return p, Artifact(out)


def pids_of(evs, exe):
    return [e["pid"] for e in of_type(evs, "exec") if e["path"].endswith("/" + exe)]


def refused(evs, pid):
    return [proj(e) for e in of_type(evs, "refused") if e["pid"] == pid]


def check_fork_many_in_process(evs):
    """fork_many's 20 children all went in-process: the attack cost the
    tracked workload nothing."""
    parent = pids_of(evs, "fork_many")
    require_eq(len(parent), 1, "fork_many's process")
    children = [e["child"] for e in of_type(evs, "fork")
                if e["pid"] == parent[0] and not e["flags"] & 1]
    check_eq(len(children), 20, "fork_many's children")
    check_eq(sorted(set(children) - fast_pids(evs)), [],
             "fork_many's children that did not go in-process")


def test_forged_records_refused(tmp):
    """Records no process may report about itself (a parked fork of another
    process and of pid 0xffffffff, rss, disable, exit, heap records with a
    bad fn, field count, stack or address) are refused and counted: the
    stopped victim stays stopped and gets no uprobe, the report shows none
    of them.  A 1 TiB malloc with a real fn inside the address space is a
    heap call the process may make, and stays."""
    victim = subprocess.Popen([fixture("spinner"), "forever"], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        require_eq(victim.stdout.readline(), "ready\n", "the victim started")
        os.kill(victim.pid, signal.SIGSTOP)
        wait_until(lambda: proc_state(victim.pid) == "T", "the victim stopped")
        # without stacks: a heap record naming a stack is then one to refuse
        # (test_forged_stacks_refused below has the stacks)
        p, art = track_verbose(tmp, [fixture("hostile_ring"), "forge", str(victim.pid)],
                               opts=["--no-stacks"])
        require_eq(p.returncode, 0, "memtrack's exit status (stderr %r)" % p.stderr)
        out = kv_text(p.stdout)
        check_eq(out.get("read"), "1", "memtrack read the forged records")
        check_eq(out.get("victim_state"), "T", "the victim, while memtrack ran")
        check_eq(out.get("victim_code_anon_kb"), "0",
                 "anonymous KiB in the victim's code (a uprobe breakpoint makes one page)")
        check_eq(proc_state(victim.pid), "T", "the victim after the run")
    finally:
        victim.kill()
        victim.wait()
    forged = int(out.get("forged", "0"))
    require_eq(forged, 12, "records the fixture forged")
    pid = pids_of(art.events, "hostile_ring")
    require_eq(len(pid), 1, "hostile_ring's process")
    pid = pid[0]
    check_true("%d forged records refused from 1 processes" % forged in p.stderr,
               "the summary line says so: %r" % p.stderr)
    rep = art.report
    check_eq(rep["bad_records"], forged, "report --json bad_records")
    check_eq({q["pid"]: q["bad_records"] for q in rep["processes"]}, {pid: forged},
             "bad_records per process")
    check_eq(refused(art.events, pid), [{"type": "refused", "records": forged, "cut": 0}],
             "the artifact's refused record")
    for t in ("fork", "disable", "enable"):
        check_eq(rep["events_by_type"][t], 0, "%s records" % t)
    check_eq([(e["code"], e["signal"]) for e in of_type(art.events, "exit")], [(0, 0)],
             "the one exit: the real one")
    check_true(rep["peak_rss_bytes"] is None or rep["peak_rss_bytes"] < 1 << 40,
               "peak RSS %r is not the forged 1 PiB" % rep["peak_rss_bytes"])
    # the one huge block left is the valid 1 TiB malloc (and its free)
    big = [proj(e) for e in heap(art.events) if e.get("size", 0) >= 1 << 40 or
           e["addr"] == 0x100000000000]
    check_eq(big, [{"type": "malloc", "addr": 0x100000000000, "size": 1 << 40},
                   {"type": "free", "addr": 0x100000000000}],
             "heap records of 1 TiB or more")
    win = [proj(e) for e in heap(window(art.events, pid))]
    check_eq([(e["type"], e.get("size")) for e in win],
             [("malloc", 4099)] * 3 + [("free", None)] * 3, "the window's heap records")


def test_forged_stacks_refused(tmp):
    """--stacks: STACK records in the ring whose id is not the hash of
    their frames, that name an object memtrack never announced, that claim
    200 frames or set a pad, and a malloc naming an even id, are refused
    and counted; a stack that is the process's own claim about itself
    (frames in announced objects, its frames' id) is kept, under the
    process's pid, and the malloc naming it too."""
    p, art = track_verbose(tmp, [fixture("hostile_ring"), "stacks"], opts=["--stacks"])
    require_eq(p.returncode, 0, "memtrack's exit status (stderr %r)" % p.stderr)
    out = kv_text(p.stdout)
    check_eq(out.get("read"), "1", "memtrack read the forged records")
    pid = pids_of(art.events, "hostile_ring")
    require_eq(len(pid), 1, "hostile_ring's process")
    pid = pid[0]
    check_eq(refused(art.events, pid), [{"type": "refused", "records": 5, "cut": 0}],
             "the artifact's refused record")
    valid = int(out["valid_id"])
    mine = [e for e in of_type(art.events, "stack") if e["pid"] == pid and
            e["frames"] and e["frames"][0][1] in (0x1000, 0x2000) and e["frames"][0][0] in (1, 99999)]
    check_eq([(e["id"], e["frames"], e["truncated"]) for e in mine],
             [(valid, [[1, 0x1000], [1, 0x2000]], 0)], "the stack records of the forged frames")
    check_eq([e["stack"] for e in heap(art.events) if e.get("size") in (100, 4097) and
              e["pid"] == pid], [valid], "the heap records of the forged ones")


def test_huge_head_does_not_hang(tmp):
    """head = 1 << 62, then exit: memtrack does not spin on it; it cuts the
    ring off, counts the lie, and records the next program of the tree.
    The promise timed: the whole run ends within 20 s (a spin never ends)."""
    t0 = time.monotonic()
    cmd = "%s head; %s" % (fixture("hostile_ring"), fixture("heap_pairs"))
    t = track(tmp, cmd, opts=FAST, timeout=30, expect_rc=1)  # its later calls are lost
    check_true(time.monotonic() - t0 < 20, "the run ended promptly")
    hostile = pids_of(t.events, "hostile_ring")
    require_eq(len(hostile), 1, "hostile_ring's process")
    check_eq(refused(t.events, hostile[0]), [{"type": "refused", "records": 1, "cut": 1}],
             "hostile_ring's refused record")
    check_eq(t.report["bad_records"], 1, "report --json bad_records")
    pairs = pids_of(t.events, "heap_pairs")
    require_eq(len(pairs), 1, "heap_pairs' process")
    check_eq([(e["type"], e.get("size")) for e in heap(window(t.events, pairs[0]))],
             [("malloc", 4099)] * 3 + [("free", None)] * 3, "heap_pairs' window")


def live_refusals(path):
    """The refused records on disk in the artifact memtrack is writing."""
    return of_type(parse_dump(run([MEMTRACK, "dump", path]).stdout), "refused")


def test_sigterm_works_with_a_lying_ring(tmp):
    """SIGTERM ends memtrack promptly after a program lied about its head:
    within 10 s of the signal (the promise timed here), once memtrack has
    refused the lie (its refused record on disk: --flush-ms 50 writes it
    while the run goes on)."""
    cmd = "%s head; exec sleep 60" % fixture("hostile_ring")
    p, art = spawn_track(tmp, cmd, opts=FAST + ["--flush-ms", "50"])
    try:
        wait_until(lambda: any(q.name == "sleep" for q in _children_named(p.pid)),
                   "the sleep after hostile_ring", timeout=30)
        wait_until(lambda: live_refusals(art.path), "hostile_ring's refused record on disk", timeout=30)
        p.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        r = finish(p, timeout=15)
    finally:
        kill_group(p)
    check_true(time.monotonic() - t0 < 10, "memtrack ended within 10 s of SIGTERM")
    check_true(r.rc is not None, "memtrack's exit status: %s" % r.describe())
    check_eq(art.report["bad_records"], 1, "report --json bad_records")


class _Proc:
    def __init__(self, pid, name):
        self.pid, self.name = pid, name


def _children_named(root):
    """Every process below root, with its comm."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            kids = Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            try:
                out.append(_Proc(k, Path("/proc/%d/comm" % k).read_text().strip()))
            except OSError:
                pass
            todo.append(k)
    return out


def test_scribbled_ring(tmp):
    """A program that overwrites its whole ring (header too) with random
    bytes: memtrack cuts it off and records the next program."""
    cmd = "%s scribble 7; %s" % (fixture("hostile_ring"), fixture("heap_pairs"))
    t = track(tmp, cmd, opts=FAST, timeout=30, expect_rc=1)  # its later calls are lost
    hostile = pids_of(t.events, "hostile_ring")
    require_eq(len(hostile), 1, "hostile_ring's process")
    rec = refused(t.events, hostile[0])
    check_eq([r["cut"] for r in rec], [1], "hostile_ring's ring cut off")
    check_true(rec and rec[0]["records"] >= 1, "its lie counted: %r" % rec)
    pairs = pids_of(t.events, "heap_pairs")
    require_eq(len(pairs), 1, "heap_pairs' process")
    check_eq(len(heap(window(t.events, pairs[0]))), 6, "heap_pairs' window: 3 mallocs, 3 frees")


def test_wrecked_ring_counted_lost(tmp):
    """A program that fills its whole ring with 0xff, then makes 5,000
    malloc/free pairs: none is recorded (its ring is cut off), and that is a
    loss by cause, named truthfully: ring_cut_off in the summary line, in
    report and report --json, exit status 1 (0 with --allow-drops); no
    'exec'd a program on the uprobes' read from the wrecked header."""
    cmd = [fixture("hostile_ring"), "wreck", "5000"]
    out = tmp / "wreck.mtrk"
    p = run([MEMTRACK, "track", "-o", out] + FAST + ["--"] + cmd, timeout=30)
    check_eq(p.rc, 1, "memtrack's exit status (%s)" % p.describe())
    t = Artifact(out)
    hostile = pids_of(t.events, "hostile_ring")
    require_eq(len(hostile), 1, "hostile_ring's process")
    check_eq([r["cut"] for r in refused(t.events, hostile[0])], [1], "its ring cut off")
    check_eq(sum(1 for e in t.events if e.get("size") == 7013), 0, "its mallocs recorded")
    err = p.stderr
    check_true("0 lost, the heap calls of 1 processes lost after their in-process ring was "
               "cut off (ring_cut_off)" in err, "the summary line names the loss: %r" % err)
    check_true("exec'd" not in err, "no exec on the uprobes claimed: %r" % err)
    check_true("1 processes wrote their in-process ring against its protocol and were cut "
               "off" in err, "the loss's line: %r" % err)
    check_eq((t.report["ring_cut_off"], t.report["lost_by_cause"], t.report["env_overflow"]),
             (1, {"ring_buffer_full": 0, "unprobed": 0, "ring_cut_off": 1}, 0),
             "report --json")
    t2 = track(tmp, cmd, opts=FAST + ["--allow-drops"], name="allow.mtrk", timeout=30)
    check_eq(t2.report["ring_cut_off"], 1, "with --allow-drops: still counted")


def test_unsealed_memfd_refused(tmp):
    """A memfd that is not sealed is refused at the hello, so shrinking it
    afterwards cannot make memtrack fault (SIGBUS)."""
    t = track(tmp, [fixture("hostile_ring"), "unsealed"], opts=FAST)
    out = kv_text(t.stdout)
    check_eq(out.get("answer"), "n", "memtrack's answer to an unsealed memfd")
    check_eq(out.get("shrink"), "done", "the attacker shrank it")
    check_eq(t.report["exit_code"], 0, "the artifact is complete")


def test_sealed_memfd(tmp):
    """The library's memfd is sealed: it cannot shrink; a sealed memfd of
    another size is refused."""
    ring = 4096 + 8192 * 64
    t = track(tmp, [fixture("hostile_ring"), "sealed", str(ring)], opts=FAST)
    out = kv_text(t.stdout)
    check_eq(out.get("answer"), "y", "a sealed memfd of the ring's size")
    check_eq(out.get("shrink"), "EPERM", "shrinking a sealed memfd")
    pid = pids_of(t.events, "hostile_ring")
    require_eq(len(pid), 1, "hostile_ring's process")
    check_eq([(e["type"], e.get("size")) for e in heap(window(t.events, pid[0]))],
             [("malloc", 4099), ("free", None)] * 3, "the window's heap records")
    t = track(tmp, [fixture("hostile_ring"), "sealed", "4096"], opts=FAST, name="small.mtrk")
    check_eq(kv_text(t.stdout).get("answer"), "n", "a sealed memfd of 4096 bytes")


def test_switch_is_read_only(tmp):
    """The heap switch a library gets with memtrack's answer is read-only:
    a tracked program that says hello itself and tries to clear it (a
    writable mapping, mprotect, write) switches nothing off; its heap calls
    are still recorded.  Before, the answer carried the BPF side's .data
    map, writable by whoever held it: heap recording went off for the whole
    tree without a record."""
    t = track(tmp, [fixture("hostile_ring"), "switch"], opts=FAST)
    out = kv_text(t.stdout)
    check_eq(out.get("answer"), "y", "memtrack's answer to the second hello")
    for how in ("map_write", "mprotect", "write"):
        check_eq(out.get(how), "refused", "clearing the switch by " + how)
    pid = pids_of(t.events, "hostile_ring")
    require_eq(len(pid), 1, "hostile_ring's process")
    check_eq([(e["type"], e.get("size")) for e in heap(window(t.events, pid[0]))],
             [("malloc", 4099), ("free", None)] * 3, "the window's heap records")


def test_silent_connection_closed(tmp):
    """A connection that never says hello is closed after the deadline (2 s),
    with the process's own ring open or with no ring open at all (the
    library not loaded).  The deadline is the promise, so it is timed (by
    the fixture): not before 1.5 s, and by 4 s (2 s of slack for a loaded
    machine)."""
    for name, cmd in (("ring", [fixture("hostile_ring"), "silent"]),
                      ("no ring", "exec env -u LD_PRELOAD MEMTRACK_FAST_SOCKET=\"%s\" %s silent"
                       % (SOCKET_OF_SH, fixture("hostile_ring")))):
        t = track(tmp, cmd, opts=FAST, timeout=30, name=name.replace(" ", "_") + ".mtrk")
        ms = kv_text(t.stdout).get("closed_after_ms")
        require(ms is not None, "%s: the fixture's output: %r" % (name, t.stdout))
        check_true(ms != "never" and 1500 <= int(ms) <= 4000,
                   "%s: closed after %s ms, expected 2000 to 4000" % (name, ms))


def fast_pids(evs):
    return {e["pid"] for e in of_type(evs, "fast")}


def flood_size():
    """Connections one process can open here (19,000 where the fd limit allows)."""
    return min(19000, resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 100)


def test_flood_from_the_tree_is_bounded(tmp):
    """19,000 connections without hello from a process of the tree: memtrack
    holds at most one (the rest are closed at once, that one at the
    deadline), and a workload running meanwhile keeps every probe and ring.
    The promise is timed (by the fixture): at most one held after 1 s, none
    after 4 s (the 2 s deadline and 2 s of slack)."""
    n = flood_size()
    cmd = ("%s flood %d & sleep 0.5; %s 20; wait"
           % (fixture("hostile_ring"), n, fixture("fork_many")))
    t = track(tmp, cmd, opts=FAST, timeout=60)
    out = kv_text(t.stdout)
    check_eq(out.get("connected"), str(n), "connections made")
    check_true(int(out.get("held_after_1s", "-1")) in (0, 1),
               "connections memtrack held after 1 s: %s" % out.get("held_after_1s"))
    check_eq(out.get("held_after_4s"), "0", "connections memtrack held after 4 s")
    forks = [e["child"] for e in of_type(t.events, "fork") if not e["flags"] & 1]
    check_fork_many_in_process(t.events)
    check_true(forks, "forks recorded")


def test_other_user_cannot_connect(tmp):
    """The socket is the command's user's, 0600, in a directory of root's:
    19,000 connections attempted by nobody all fail (EACCES), and the
    workload keeps every ring and probe."""
    nobody = pwd.getpwnam("nobody")
    pub = Path(tempfile.mkdtemp(prefix="mt-ring-"))
    path_file = Path(tmp) / "sock_path"
    try:
        os.chmod(pub, 0o755)
        exe = pub / "hostile_ring"
        shutil.copy(fixture("hostile_ring"), exe)
        os.chmod(exe, 0o755)
        cmd = ("echo %s > %s; sleep 2; %s 20"
               % (SOCKET_OF_SH, path_file, fixture("fork_many")))
        p, art = spawn_track(tmp, cmd, opts=FAST)
        try:
            sock = wait_until(lambda: path_file.exists() and path_file.read_text().strip(),
                              "the socket's path")
            st = os.stat(sock)
            check_eq((st.st_uid, oct(st.st_mode & 0o7777)), (0, "0o600"),
                     "the socket's owner and mode")
            dst = os.stat(os.path.dirname(sock))
            check_eq((dst.st_uid, oct(dst.st_mode & 0o7777)), (0, "0o711"),
                     "its directory's owner and mode")
            env = {"PATH": os.environ["PATH"], "MEMTRACK_FAST_SOCKET": sock}
            f = subprocess.run(["setpriv", "--reuid=%d" % nobody.pw_uid,
                                "--regid=%d" % nobody.pw_gid, "--clear-groups",
                                str(exe), "flood", str(flood_size())],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60)
            r = finish(p, timeout=60)
        finally:
            kill_group(p)
    finally:
        shutil.rmtree(pub, ignore_errors=True)
    out = kv_text(f.stdout)
    check_eq((out.get("connected"), out.get("connect_error")), ("0", "EACCES"),
             "nobody's connections (stderr %r)" % f.stderr)
    require_eq(r.rc, 0, "memtrack's exit status: %s" % r.describe())
    check_fork_many_in_process(art.events)


def test_socket_is_the_sudo_users(tmp):
    """Under sudo (SUDO_UID), the socket is the invoking user's, so the
    command, which runs as that user, still goes in-process."""
    nobody = pwd.getpwnam("nobody")
    pub = Path(tempfile.mkdtemp(prefix="mt-ring-"))
    try:
        os.chown(pub, nobody.pw_uid, nobody.pw_gid)
        os.chmod(pub, 0o755)
        exe = pub / "heap_pairs"
        shutil.copy(fixture("heap_pairs"), exe)
        os.chmod(exe, 0o755)
        env = dict(os.environ, SUDO_UID=str(nobody.pw_uid), SUDO_GID=str(nobody.pw_gid),
                   SUDO_USER="nobody")
        out = pub / "run.mtrk"
        cmd = "stat -c '%%u %%a' %s; exec %s" % (SOCKET_OF_SH, exe)
        p = subprocess.run([MEMTRACK, "track", "-q", "-o", str(out)] + FAST + [cmd], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        require_eq(p.returncode, 0, "memtrack's exit status (stderr %r)" % p.stderr)
        check_eq(p.stdout.splitlines()[0], "%d 600" % nobody.pw_uid,
                 "the socket's owner and mode, as the command sees them")
        art = Artifact(out)
        pairs = pids_of(art.events, "heap_pairs")
        require_eq(len(pairs), 1, "heap_pairs' process")
        check_true(pairs[0] in fast_pids(art.events), "heap_pairs went in-process")
    finally:
        shutil.rmtree(pub, ignore_errors=True)


def test_sigkilled_run_leaves_no_socket(tmp):
    """A SIGKILLed memtrack's socket and its directory are removed by the
    reaper, which outlives it."""
    tmpdir = Path(tempfile.mkdtemp(prefix="mt-kill-", dir="/tmp"))  # short: memtrack takes it
    env = dict(os.environ, TMPDIR=str(tmpdir))
    out = Path(tmp) / "killed.mtrk"
    p = subprocess.Popen([MEMTRACK, "track", "-q", "-o", str(out)] + FAST +
                         ["--", "sleep", "30"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        wait_until(lambda: list(tmpdir.glob("memtrack-fast.*/sock")), "the socket")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        wait_until(lambda: not list(tmpdir.iterdir()), "the socket directory removed",
                   timeout=15)
        check_eq(list(tmpdir.iterdir()), [], "what is left in TMPDIR")
    finally:
        kill_group(p)
        shutil.rmtree(tmpdir, ignore_errors=True)
