# SPDX-License-Identifier: MIT
"""The kernel's OOM killer picks a tracked process (issue 38): the recording
says which one, what heap it held then and its RSS, and the artifact is
whole.  The fixture (fixtures/oom_grow.c) grows in 1 MiB blocks, touching
each, inside a memory cgroup of LIMIT bytes made by the test (cgroup v1's
memory hierarchy, or v2 with the memory controller: the host's and the
test-kernels guests'), until the kernel kills it."""
import json
import os
from pathlib import Path

import pytest

from mtlib import (MEMTRACK, Artifact, check_eq, check_true, fixture, require, require_eq,
                   run, track_argv)

LIMIT = 48 << 20
BLOCK = 1 << 20  # fixtures/oom_grow.c's OOM_GROW_BLOCK
KEEP = 4321      # its OOM_GROW_KEEP


def _write(path, text):
    Path(path).write_text(text)


def memory_cgroup(name):
    """A new memory cgroup limited to LIMIT bytes without swap, or None
    where this machine has no memory controller to make one in."""
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        cg = v1 / name
        cg.mkdir()
        _write(cg / "memory.limit_in_bytes", str(LIMIT))
        if (cg / "memory.memsw.limit_in_bytes").exists():
            _write(cg / "memory.memsw.limit_in_bytes", str(LIMIT))
        return cg
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        controllers = root / "cgroup.controllers"
        if not controllers.exists() or "memory" not in controllers.read_text().split():
            continue
        _write(root / "cgroup.subtree_control", "+memory")
        cg = root / name
        cg.mkdir()
        _write(cg / "memory.max", str(LIMIT))
        if (cg / "memory.swap.max").exists():
            _write(cg / "memory.swap.max", "0")
        return cg
    return None


@pytest.mark.parametrize("path", ["inprocess", "uprobes"])
def test_oom_kill_recorded(tmp, path):
    cg = memory_cgroup("mt-oom-%d-%s" % (os.getpid(), path))
    if cg is None:
        pytest.skip("no memory cgroup controller here (cgroup v1 memory or v2 +memory)")
    out = tmp / "oom.mtrk"
    opts = [] if path == "inprocess" else ["--no-fast"]
    try:
        # the shell joins the cgroup, then becomes the fixture (same pid)
        p = run(track_argv("echo $$ > %s/cgroup.procs && exec %s"
                           % (cg, fixture("oom_grow")), out, opts))
    finally:
        cg.rmdir()
    require_eq(p.rc, 137, "memtrack's exit status (the command's: SIGKILL): " + p.describe())
    whole = [int(n) for n in p.stdout.split()]
    require(whole and whole == list(range(1, len(whole) + 1)) and whole[-1] < 4096,
            "the fixture's block numbers until the kill: %s" % p.stdout[-300:])
    a = Artifact(out)
    r = a.report
    check_eq(r["truncated"], False, "the artifact is whole (trailer written)")
    require_eq(len(r["oom_kills"]), 1, "oom_kills: %s" % r["oom_kills"])
    kill = r["oom_kills"][0]
    procs = r["processes"]
    require_eq(len(procs), 1, "one process (sh became the fixture)")
    pid = procs[0]["pid"]
    check_eq((kill["pid"], kill["command"]), (pid, "oom_grow"), "the victim")
    check_eq((procs[0]["exit_code"], procs[0]["exit_signal"]), (-1, 9), "its exit")
    # the fixture's blocks as dump has them: after its exec, never freed
    evs = a.events
    exec_ts = max(e["ts"] for e in evs if e["type"] == "exec" and e["pid"] == pid)
    oom = [e for e in evs if e["type"] == "oom"]
    require_eq(len(oom), 1, "oom records")
    mine = [e for e in evs if e["pid"] == pid and exec_ts < e["ts"] < oom[0]["ts"]]
    check_eq([e["type"] for e in mine if e["type"] in ("free", "realloc", "calloc")], [],
             "the fixture frees nothing and uses malloc only")
    sizes = [e["size"] for e in mine if e["type"] == "malloc"]
    blocks = sizes.count(BLOCK)
    check_eq(sorted(set(sizes)), [KEEP, BLOCK], "the fixture's malloc sizes")
    check_true(blocks in (whole[-1], whole[-1] + 1),
               "1 MiB blocks recorded (%d): those it touched whole (%d), and the one it was "
               "touching when killed" % (blocks, whole[-1]))
    check_true(blocks * BLOCK >= LIMIT // 2, "the blocks fill the cgroup's limit: %d" % blocks)
    check_eq((kill["heap_live_bytes"], kill["heap_live_count"]),
             (blocks * BLOCK + KEEP, blocks + 1), "the heap it held when killed")
    check_eq(kill["peak_rss_bytes"], procs[0]["peak_rss_bytes"], "its RSS: its peak")
    # RSS counts the libraries' file pages too, which the cgroup was not charged for
    check_true(LIMIT // 2 <= kill["peak_rss_bytes"] <= LIMIT + (8 << 20),
               "peak RSS near the limit: %d" % kill["peak_rss_bytes"])
    check_eq(kill["oom_score_adj"], 0, "oom_score_adj")
    text = run([MEMTRACK, "report", a.path])
    require_eq(text.rc, 0, "report: " + text.describe())
    line = [ln for ln in text.stdout.splitlines() if ln.startswith("oom kill:")]
    check_eq(len(line), 1, "report's oom kill line: %s" % text.stdout[-2000:])
    check_true(line and line[0].startswith("oom kill:     %d (oom_grow) killed by the kernel's "
                                            "OOM killer" % pid), "the line: %s" % line)
    # what it held, by call site: the command the line names
    top = run([MEMTRACK, "report", a.path, "--json", "--pid", str(pid), "--top", "1"])
    require_eq(top.rc, 0, "report --pid --top: " + top.describe())
    leaked = json.loads(top.stdout)["top"]["leaked"][0]
    check_eq((leaked["frames"][0]["function"], leaked["leaked_count"], leaked["leaked_bytes"]),
             ("grow_block", blocks, blocks * BLOCK), "the site that held most when killed")
