# SPDX-License-Identifier: MIT
"""test_arch.py - the architecture a run was recorded on (issue 40).

The artifact's header says it (key arch, report --json's "arch", the text
report's "recorded on:" line), and report reads an artifact of either
architecture on either: arch/ holds heap_pairs recorded with --no-stacks on
x86-64 and on arm64 (under qemu-system-aarch64, make ARCH=arm64
test-kernels' guest), with the addresses the fixture printed.  Where the
unwinders are not ported (neither x86-64 nor arm64), track records no
stacks by default and refuses --stacks.
"""
import os
from pathlib import Path

import pytest

from mtlib import (MEMTRACK, Artifact, check_eq, check_true, fixture, heap, proj, require_eq,
                   root_pid, run, track, window)

ARCH_DIR = Path(__file__).resolve().parent / "arch"
MACHINE = os.uname().machine


def test_artifact_names_the_arch(tmp):
    t = track(tmp, [fixture("heap_pairs")], opts=["--no-stacks"])
    check_eq(t.report["arch"], MACHINE, "report --json's arch")
    r = run([MEMTRACK, "report", t.artifact.path])
    check_eq([l for l in r.stdout.splitlines() if l.startswith("recorded on:")],
             ["recorded on:  %s, Linux %s" % (MACHINE, os.uname().release)], "the text report's line")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_report_reads_either_arch(machine):
    a = Artifact(ARCH_DIR / ("heap_pairs-%s.mtrk" % machine))
    addrs = [int(x) for x in (ARCH_DIR / ("heap_pairs-%s.out" % machine)).read_text().split()]
    require_eq(len(addrs), 3, "addresses the fixture printed")
    check_eq(a.report["arch"], machine, "report --json's arch")
    expected = ([{"type": "malloc", "addr": x, "size": 4099} for x in addrs]
                + [{"type": "free", "addr": x} for x in addrs])
    check_eq([proj(e) for e in heap(window(a.events, root_pid(a.events)))], expected,
             "heap records between the markers")


@pytest.mark.skipif(MACHINE in ("x86_64", "aarch64"), reason="x86-64 and arm64 unwind call stacks")
def test_no_stacks_where_not_ported(tmp):
    out = Path(tmp) / "s.mtrk"
    p = run([MEMTRACK, "track", "-q", "--stacks", "-o", str(out), "--", fixture("heap_pairs")])
    check_eq((p.rc, p.stderr), (2, "memtrack: --stacks: call stacks are unwound on x86-64 and "
                                   "arm64 only; drop --stacks\n"),
             "track --stacks (rc, stderr)")
    check_true(not out.exists(), "no artifact from a refused run")
    t = track(tmp, [fixture("heap_pairs")])
    check_eq([e["type"] for e in t.events if e["type"] in ("stack", "object", "mapping")], [],
             "stack, object and mapping records of a default run")
    check_eq(sorted({e.get("stack", 0) for e in heap(t.events)}), [0], "heap records' stack ids")
