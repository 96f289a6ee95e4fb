# SPDX-License-Identifier: MIT
"""`memtrack diff` in human units and `diff --top N`: two real runs of
tests/fixtures/sitediff.c (GROW x 3072 bytes held at the peak, 10 x 520
bytes freed at once, LEAK x 111 bytes leaked) whose sites' growth is known
from the arguments, compared by function and by whole stack, and gated on a
site's growth (--metric function:M / stack:M with --fail-above)."""
import json

from mtlib import MEMTRACK, check_eq, fixture, run, shared_track
from callsites import START, own_cache

START_SHOWN = START[0] + " < ..."  # a stack's name shows 3 frames, then "..."


def runs():
    base = shared_track("sitediff-2-1", [fixture("sitediff"), "2", "1"], ["--stacks"])
    new = shared_track("sitediff-5-3", [fixture("sitediff"), "5", "3"], ["--stacks"])
    return base.artifact.path, new.artifact.path


def diff(*args):
    return run([MEMTRACK, "diff"] + [str(a) for a in args])


def value(base, new):
    return {"base": base, "new": new, "change": new - base,
            "change_pct": 100.0 * (new - base) / base if base else (0.0 if not new else None)}


def test_diff_human_units(tmp):
    """The text rows print bytes in KiB like report; --json keeps the bytes."""
    base, new = runs()
    p = diff(base, new)
    check_eq((p.rc, p.stderr), (0, ""), "diff (rc, stderr)")
    rows = {l.split()[0]: l.split()[1:] for l in p.stdout.splitlines()[3:13]}
    check_eq(rows["peak_heap_bytes"], ["6.0", "KiB", "15.0", "KiB", "+9.0", "KiB", "+150.0%"],
             "peak_heap_bytes row")
    check_eq(rows["leaked_bytes"], ["111", "B", "333", "B", "+222", "B", "+200.0%"], "leaked_bytes row")
    check_eq(rows["alloc_count"], ["13", "18", "+5", "+38.5%"], "alloc_count row (a count)")
    d = json.loads(diff(base, new, "--json").stdout)
    check_eq(d["metrics"]["peak_heap_bytes"], value(6144, 15360), "JSON peak_heap_bytes in bytes")
    check_eq((d["top"], d["site_regressions"]), (None, []), "no --top: top null")


def test_diff_top_functions(tmp):
    own_cache(tmp)
    base, new = runs()
    p = diff(base, new, "--top", 2)
    check_eq((p.rc, p.stderr), (0, ""), "diff --top 2 (rc, stderr)")
    out = p.stdout[p.stdout.index("\ntop "):]
    expect = [
        "top 1 function by change in peak heap (bytes live at the tree's heap peak):",
        "  #1  +9.0 KiB  +150.0%  (6.0 KiB -> 15.0 KiB)  grow  [sitediff]",
        "top 2 functions by change in allocations:",
        "  #1  +3  +150.0%  (2 -> 5)  grow  [sitediff]",
        "  #2  +2  +200.0%  (1 -> 3)  leak  [sitediff]",
        "top 2 functions by change in allocated bytes:",
        "  #1  +9.0 KiB  +150.0%  (6.0 KiB -> 15.0 KiB)  grow  [sitediff]",
        "  #2  +222 B  +200.0%  (111 B -> 333 B)  leak  [sitediff]",
        "top 1 function by change in leaked bytes:",
        "  #1  +222 B  +200.0%  (111 B -> 333 B)  leak  [sitediff]",
        "top 1 function by change in memory (heap + mapped bytes at the tree's memory peak):",
        "  #1  +9.0 KiB  +150.0%  (6.0 KiB -> 15.0 KiB)  grow  [sitediff]",
        "top 0 functions by change in temporary allocations (freed before their thread allocated again):",
        "  (no change)",
    ]
    check_eq([l for l in out.splitlines() if l], expect, "diff --top 2 tables")
    d = json.loads(diff(base, new, "--top", 5, "--json").stdout)
    top = d["top"]
    check_eq((top["by"], top["n"]), ("function", 5), "JSON top by, n")
    check_eq([r["name"] for r in top["allocations"]], ["grow", "leak"], "JSON allocations ranking")
    grow = top["peak"][0]
    check_eq((grow["name"], grow["object"]), ("grow", "sitediff"), "JSON peak #1")
    check_eq(grow["metrics"]["peak"], value(6144, 15360), "grow's peak")
    check_eq(grow["metrics"]["allocated"], value(6144, 15360), "grow's allocated")
    check_eq(top["leaked"][0]["metrics"]["leaked"], value(111, 333), "leak's leaked")
    check_eq(top["temporary"], [], "steady's 10 temporary allocations did not change")
    check_eq(top["live_at_end"], [], "no attach: nothing live at end")


def test_diff_top_stacks(tmp):
    own_cache(tmp)
    base, new = runs()
    d = json.loads(diff(base, new, "--top", 3, "--by", "stack", "--json").stdout)
    check_eq(d["top"]["by"], "stack", "JSON top by")
    check_eq([(r["name"], r["metrics"]["allocations"]["change"]) for r in d["top"]["allocations"]],
             [("grow < main < " + START_SHOWN, 3), ("leak < main < " + START_SHOWN, 2)],
             "stacks by change in allocations")
    r = d["top"]["allocations"][0]
    check_eq(r["base_stack_id"], r["new_stack_id"], "the same binary: the same stack id in both")
    out = diff(base, new, "--top", 1, "--by", "stack").stdout
    check_eq("  #1  +222 B  +200.0%%  (111 B -> 333 B)  leak < main < %s  [sitediff]  stack %s"
             % (START_SHOWN, d["top"]["leaked"][0]["new_stack_id"]) in out.splitlines(), True,
             "text row of the leaking stack in:\n" + out)


def test_diff_site_gates(tmp):
    """--metric function:M / stack:M gate each site's growth as --fail-above
    gates the tree's: grow's peak +150%, leak's leaked +200%, steady +0%."""
    own_cache(tmp)
    base, new = runs()
    cases = [
        (["--metric", "function:peak", "--fail-above", "149"], 1),
        (["--metric", "function:peak", "--fail-above", "150"], 0),   # exactly 150%: not beyond
        (["--metric", "function:leaked", "--fail-above", "199.9"], 1),
        (["--metric", "function:temporary", "--fail-above", "0"], 0),  # steady's: unchanged
        (["--metric", "stack:allocations", "--fail-above", "150"], 1),   # leak's +200%
        (["--metric", "stack:allocations", "--fail-above", "200"], 0),
        (["--metric", "function:peak"], 0),                           # no threshold: never fails
    ]
    for opts, rc in cases:
        p = diff(base, new, *opts)
        check_eq(p.rc, rc, "diff %s exit status (stderr %r)" % (" ".join(opts), p.stderr))
    check_eq(diff(new, base, "--metric", "function:peak", "--fail-above", "0").rc, 0,
             "NEW BASE: every site shrank")
    p = diff(base, new, "--metric", "function:peak", "--metric", "stack:leaked", "--fail-above", "100")
    lines = [l for l in p.stdout.splitlines() if l.startswith("REGRESSION")]
    check_eq(lines, ["REGRESSION: function:peak grow [sitediff] +9.0 KiB +150.0% (6.0 KiB -> 15.0 KiB)",
                     "REGRESSION: stack:leaked leak < main < %s [sitediff] +222 B +200.0%% (111 B -> 333 B)"
                     % START_SHOWN,
                     "REGRESSION: a metric grew beyond the threshold"], "the regressed sites")
    d = json.loads(diff(base, new, "--json", "--metric", "function:allocations", "--fail-above", "150").stdout)
    check_eq(d["site_regressions"], [{"by": "function", "metric": "allocations", "name": "leak",
                                      "object": "sitediff", "value": value(1, 3)}], "JSON site_regressions")
    check_eq((d["regression"], d["metrics"]["alloc_count"]["change"]), (True, 5),
             "JSON regression; tree metrics still there")


def test_diff_top_usage_errors(tmp):
    base, new = runs()
    cases = [
        ([base, new, "--top", "0"], "--top takes a number of call sites"),
        ([base, new, "--top"], "--top needs a number"),
        ([base, new, "--by", "line"], "--by takes function or stack, not 'line'"),
        ([base, new, "--metric", "function:bogus"], "unknown metric 'function:bogus'"),
        ([base, new, "--metric", "site:peak"], "unknown metric 'site:peak'"),
    ]
    for args, msg in cases:
        p = diff(*args)
        check_eq((p.rc, p.stdout), (2, ""), "diff %s (rc, stdout)" % " ".join(map(str, args)))
        check_eq(p.stderr.startswith("memtrack: " + msg) and p.stderr.count("\n") == 1, True,
                 "diff %s message: %r" % (" ".join(map(str, args)), p.stderr))
    nostacks = shared_track("sitediff-nostacks", [fixture("sitediff"), "2", "1"], ["--no-stacks"])
    p = diff(base, nostacks.artifact.path, "--top", 3)
    check_eq((p.rc, p.stdout), (1, ""), "diff --top with a run without stacks (rc, stdout)")
    check_eq("has no call stacks" in p.stderr and p.stderr.count("\n") == 1, True,
             "names the run without stacks: %r" % p.stderr)
