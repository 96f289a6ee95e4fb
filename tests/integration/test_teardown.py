# SPDX-License-Identifier: MIT
"""memtrack's exit does not wait for the kernel's teardown: a process it
forks (fork_closer() in cmd_track.c) closes the uprobe links and the BPF
objects once memtrack has exited, and bears the grace periods.  That process
must not hold memtrack's stdout or stderr (a caller reading them would wait
for it), must live in a session of its own (a terminal's ^C is not meant for
it), and must go away by itself."""
import os

from mtlib import check_eq, check_true, require_eq, run, track_argv, wait_until


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


def test_teardown_closer_leaves_and_exits(tmp):
    out = str(tmp / "closer-test.mtrk")
    # run() reads stdout and stderr to EOF: it returns only once no process
    # holds them, so a closer holding them would show as a slow return here
    p = run(track_argv(["ls", "-la", "/usr/bin"], out))
    require_eq(p.rc, 0, "memtrack's status")
    found = holders(out)
    for pid in found:
        # the closer is a fork of memtrack (same command line), and so are
        # the tasks it clones to close fds in parallel: all in its session
        try:
            sid = os.getsid(pid)
            fds = [os.readlink("/proc/%d/fd/%d" % (pid, i)) for i in range(3)]
        except OSError:
            continue        # it has just finished
        check_true(sid in found and sid != os.getsid(0),
                   "the closer's session (%d) is its own, not the caller's" % sid)
        check_eq(fds, ["/dev/null"] * 3, "the closer's stdin, stdout, stderr")
    wait_until(lambda: not holders(out), "the teardown process to exit", timeout=30)
    check_true(os.path.getsize(out) > 0, "the artifact was written")
