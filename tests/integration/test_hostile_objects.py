# SPDX-License-Identifier: MIT
"""The files a tracked program maps, as root memtrack reads them.

At every executable mapping memtrack reads the process's files (allocator
symbols, and unwind tables under --stacks) by the paths /proc/PID/maps
shows, through /proc/PID/root.  The program decides what those paths lead
to: here it bind-mounts a FIFO over a file it mapped, in a mount namespace
of its own (any user may make one where user namespaces are allowed).  A
plain open() of that path blocked memtrack's poller for good (SIGTERM did
not end the run); memtrack must refuse it (src/inspect/mapped_file.c) and go on
recording.
"""
import subprocess
import tempfile

from mtlib import BUILD, check_eq, count, fixture, require_eq, track

MARK_SIZE = 4242421


def run_swap(tmp, opts):
    d = tempfile.mkdtemp(prefix="mt-swap-", dir=str(tmp))
    try:
        t = track(tmp, [fixture("map_swap"), d, str(BUILD / "libmemtrack-fast.so")], opts,
                  timeout=30)
    finally:
        # the bind mount lives in the fixture's namespace, gone with it
        subprocess.run(["rm", "-rf", d], check=False)
    return t


def test_fifo_over_a_mapped_file(tmp):
    for opts, name in (((), "default"), (("--no-fast",), "uprobes"), (("--stacks",), "stacks")):
        t = run_swap(tmp, opts)
        require_eq(t.rc, 0, "memtrack's exit status (%s): %s" % (name, t.describe()))
        check_eq(count(t.events, type="malloc", size=MARK_SIZE), 1,
                 "the malloc after the swap (%s)" % name)
