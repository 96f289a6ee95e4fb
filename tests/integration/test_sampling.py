# SPDX-License-Identifier: MIT
"""--sample-bytes N (issue 38): Poisson sampling by bytes, exact totals.

fixtures/heap_kept keeps K blocks of 1000 bytes (at keep_block), makes P
malloc/free pairs of 16 + (i & 255) bytes, then frees the kept blocks.  A
sampled run is held to the exact run of the same command:

* exactly: the COUNTS record's allocations, bytes and frees are the exact
  run's totals (report's alloc_count, total_allocated_bytes, free_count);
  every recorded free is of a recorded block of that process, and every
  recorded block of the window is freed (frees of sampled blocks matched);
  its `sampled` is the number of heap records;
* statistically: each kept block is recorded with probability
  p = 1 - exp(-1000/N) and stands for 1000/p bytes, so the keep_block
  site's estimate has standard deviation sigma = 1000 * sqrt(K (1-p) / p)
  around K * 1000.  The test allows 5 sigma (a false failure once in ~1.7
  million runs), not a guessed percentage; likewise its block count.
"""
import json
import math
import os

import pytest

from mtlib import (MEMTRACK, check_eq, check_true, fixture, heap, of_type, require,
                   root_pid, run, track, window)

KEEP = 1000  # bytes of a kept block


def sigma(n, size, period):
    p = -math.expm1(-size / period)
    return math.sqrt(n * (1 - p) / p), p


def top_of(art):
    p = run([MEMTRACK, "report", "--json", "--top", "3", art.path])
    require(p.rc == 0, "report --top: " + p.describe())
    return json.loads(p.stdout)["top"]["peak"]


def keep_site(top):
    for s in top:
        if s["frames"] and s["frames"][0]["function"] == "keep_block":
            return s
    return None


def check_exact_parts(t, exact):
    """What a sampled run must give exactly (see the module's comment)."""
    evs = t.events
    rep = t.report
    counts = of_type(evs, "counts")
    sampling = of_type(evs, "sampling")
    check_eq(len(sampling), 1, "one sampling record")
    check_true(all(e["ts"] <= h["ts"] for e in sampling for h in heap(evs)),
               "the sampling record precedes every heap record")
    check_eq(rep["sampling"]["exact_counts"], True, "totals exact")
    check_eq(rep["sampling"]["estimated"], True, "marked as estimates")
    for key in ("alloc_count", "total_allocated_bytes", "free_count"):
        check_eq(rep[key], exact.report[key], key + " equals the exact run's")
    allocs = [e for e in heap(evs) if e["type"] != "free"]
    check_eq(sum(c["sampled"] for c in counts), len(allocs), "COUNTS.sampled = heap records")
    check_eq(sum(c["unmatched"] for c in counts), 0, "no sampled block left unfollowed")
    live = {}
    for e in heap(evs):
        key = (e["pid"], e["addr"])
        if e["type"] == "free":
            check_true(key in live, "free of a recorded block: %r" % (e,))
            live.pop(key, None)
            continue
        if e["type"] == "realloc":
            live.pop((e["pid"], e["old_addr"]), None)
        live[key] = e
    win = window(evs, root_pid(evs))
    win_allocs = {(e["pid"], e["addr"]) for e in win if e["type"] in ("malloc", "calloc")}
    check_eq(sorted(k for k in win_allocs if k in live), [],
             "every block sampled in the window is freed there")
    return rep


def check_estimate(t, exact, kept, period):
    sd, p = sigma(kept, KEEP, period)
    top, exact_top = top_of(t.artifact), top_of(exact.artifact)
    site = keep_site(top)
    require(site is not None, "keep_block is a top site of the sampled run")
    check_eq(top[0]["frames"][0]["function"], exact_top[0]["frames"][0]["function"],
             "same top site as the exact run")
    err = abs(site["peak_bytes"] - kept * KEEP)
    check_true(err <= 5 * sd * KEEP + 1,
               "keep_block's estimated bytes %d within 5 sigma (%.0f) of %d"
               % (site["peak_bytes"], 5 * sd * KEEP, kept * KEEP))
    # counts: the same draw, plus at most 1/4 per block of rounding variance
    sd_n = math.sqrt(sd * sd + kept * p / 4)
    check_true(abs(site["alloc_count"] - kept) <= 5 * sd_n + 1,
               "keep_block's estimated blocks %d within 5 sigma (%.0f) of %d"
               % (site["alloc_count"], 5 * sd_n, kept))


@pytest.mark.parametrize("path,kept,pairs,period", [
    ("fast", 100000, 1000000, 65536),
    ("uprobes", 20000, 100000, 16384),
])
def test_sampled_against_exact(tmp_path, path, kept, pairs, period):
    cmd = [fixture("heap_kept"), str(kept), str(pairs)]
    opts = ["--no-fast"] if path == "uprobes" else []
    exact = track(tmp_path, cmd, opts, name="exact.mtrk", timeout=600)
    t = track(tmp_path, cmd, opts + ["--sample-bytes", str(period)], name="s.mtrk", timeout=600)
    rep = check_exact_parts(t, exact)
    check_estimate(t, exact, kept, period)
    check_true(rep["events"] * 5 < exact.report["events"],
               "a fifth of the exact run's records at most (%d vs %d)"
               % (rep["events"], exact.report["events"]))
    small, big = os.path.getsize(t.artifact.path), os.path.getsize(exact.artifact.path)
    check_true(small * 5 <= big, "artifact %d bytes, a fifth of the exact %d at most" % (small, big))


def test_sampled_outputs_say_estimates(tmp_path):
    t = track(tmp_path, [fixture("heap_kept"), "2000", "1000"], ["--sample-bytes", "4096"])
    text = run([MEMTRACK, "report", t.artifact.path])
    check_true("\nsampling:     sampled (--sample-bytes 4096" in text.stdout, "report says so")
    svg = tmp_path / "f.svg"
    fg = run([MEMTRACK, "flamegraph", t.artifact.path, "-o", str(svg)])
    check_eq(fg.rc, 0, "flamegraph")
    check_true("Estimated (sampled): " in svg.read_text(), "flamegraph title says so")
    d = run([MEMTRACK, "diff", t.artifact.path, t.artifact.path])
    check_true("\nnew is sampled (--sample-bytes 4096" in d.stdout, "diff says so")
    x = run([MEMTRACK, "export", "--format=perfetto", t.artifact.path, "-o", "-"])
    check_true('"name":"heap (estimated)"' in x.stdout and '"otherData":{"sampling":' in x.stdout,
               "perfetto export says so")
    check_true("memtrack: note: sampled (--sample-bytes 4096" in x.stderr, "export's note")


@pytest.mark.parametrize("arg", ["0", "2048G", "x"])
def test_sample_bytes_refused(tmp_path, arg):
    p = run([MEMTRACK, "track", "--sample-bytes", arg, "-o", str(tmp_path / "a"), "--", "true"])
    check_eq(p.rc, 2, "usage error")
    check_eq(p.stderr, "memtrack: invalid --sample-bytes '%s'; give the mean bytes between "
             "recorded allocations, 1 to 1024G, e.g. 512K\n" % arg, "message")
    p = run([MEMTRACK, "track", "--sample-bytes", "1K", "--no-allocators", "-o",
             str(tmp_path / "a"), "--", "true"])
    check_eq((p.rc, p.stderr), (2, "memtrack: --sample-bytes samples the heap calls and "
                                   "--no-allocators records none; drop one of them\n"), "combination")


@pytest.mark.parametrize("cmd", ["track", "attach"])
def test_sample_bytes_not_through_daemon(tmp_path, cmd):
    """The daemon's loaded BPF side records every call: --daemon with --sample-bytes is refused."""
    sock = tmp_path / "daemon.sock"
    target = ["--", "true"] if cmd == "track" else ["1"]
    p = run([MEMTRACK, cmd, "--daemon=%s" % sock, "--sample-bytes", "64K",
             "-o", str(tmp_path / "a")] + target)
    check_eq((p.rc, p.stderr), (1, "memtrack: --sample-bytes (the daemon's loaded BPF side records "
                                   "every call) is not available through the memtrack daemon; drop "
                                   "it, or record in-process as root with --no-daemon\n"), "refused")
    check_true(not (tmp_path / "a").exists(), "no artifact made")
