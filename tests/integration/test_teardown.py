# SPDX-License-Identifier: MIT
"""memtrack's exit does not wait for the kernel's teardown: a process it
forks when it starts (the reaper, record/reaper.c) closes the uprobe links
and the BPF objects once memtrack has exited, and bears the grace periods.  That process
must not hold memtrack's stdout or stderr (a caller reading them would wait
for it), must live in a session of its own (a terminal's ^C is not meant for
it), and must go away by itself."""
import os
import subprocess

from mtlib import check_eq, check_true, proc_stats, require_eq, track_argv, wait_until


def holders(marker):
    """pids of the processes whose command line contains marker."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def reapers_of(marker):
    """{pid: ppid} of the reaper (comm memtrack-reaper) whose command line,
    which is memtrack's (a fork of it), contains marker, and of the tasks
    it clones to close fds in parallel (its children, same comm)."""
    mine = holders(marker)
    return {pid: int(f[1]) for pid, name, f in proc_stats()
            if name == "memtrack-reaper" and f[0] != "Z" and pid in mine}


def test_teardown_closer_leaves_and_exits(tmp):
    """The reaper is forked when memtrack starts (reaper__new), so it is
    looked at while the command runs: it is always there to be checked (after
    memtrack's exit it may be gone before the test looks).  memtrack shares
    the test's session, as it would a terminal's."""
    out = str(tmp / "closer-test.mtrk")
    go = tmp / "go"
    cmd = "ls -la /usr/bin > /dev/null; while [ ! -e %s ]; do sleep 0.02; done" % go
    p = subprocess.Popen(track_argv(cmd, out), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        found = wait_until(lambda: reapers_of(out), "memtrack's reaper", timeout=30)
        reaper = [pid for pid, ppid in found.items() if ppid not in found]
        require_eq(len(reaper), 1, "reapers of one memtrack while its command runs (%s)" % found)
        reaper = reaper[0]
        check_eq(os.getsid(reaper), reaper, "the reaper leads a session of its own")
        check_true(os.getsid(reaper) != os.getsid(0), "the reaper's session is not the caller's")
        check_eq([os.readlink("/proc/%d/fd/%d" % (reaper, i)) for i in range(3)], ["/dev/null"] * 3,
                 "the reaper's stdin, stdout, stderr")
        for pid in set(found) - {reaper}:
            try:  # a close task may end at any time
                sid = os.getsid(pid)
            except OSError:
                continue
            check_eq(sid, reaper, "a close task's session: the reaper's")
        go.touch()
        # communicate() reads stdout and stderr to EOF: it returns only once
        # no process holds them, so a reaper (or one of the tasks it clones
        # to close fds in parallel) holding them would hang it here
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    require_eq(p.returncode, 0, "memtrack's status (stderr: %r)" % err)
    wait_until(lambda: not holders(out), "the teardown process to exit", timeout=30)
    check_true(os.path.getsize(out) > 0, "the artifact was written")
