# SPDX-License-Identifier: MIT
"""`memtrack diff`: two real runs of heap_grow (SIZE, LEAK) compared metric
by metric, processes paired by command, and the exit status CI gates on."""
import json

from mtlib import MEMTRACK, check_eq, fixture, run, shared_track

# heap_grow SIZE LEAK: peak heap SIZE (one block), leaked LEAK + stdout's
# 4096-byte buffer; its child's only block is SIZE/2.
STDIO_BUF = 4096


def runs():
    base = shared_track("grow_2M", [fixture("heap_grow"), "2000000", "1000"])
    new = shared_track("grow_3M", [fixture("heap_grow"), "3000000", "5000"])
    return base.artifact.path, new.artifact.path


def diff(*args):
    return run([MEMTRACK, "diff"] + list(args))


def test_diff_json_metrics(tmp):
    base, new = runs()
    p = diff(base, new, "--json")
    check_eq((p.rc, p.stderr), (0, ""), "diff --json (rc, stderr) without --fail-above")
    d = json.loads(p.stdout)
    m = d["metrics"]
    check_eq(m["peak_heap_bytes"], {"base": 2000000, "new": 3000000, "change": 1000000,
                                    "change_pct": 50.0}, "peak_heap_bytes")
    check_eq((m["leaked_bytes"]["base"], m["leaked_bytes"]["new"]),
             (1000 + STDIO_BUF, 5000 + STDIO_BUF), "leaked_bytes (base, new)")
    check_eq(m["alloc_count"]["change"], 0, "alloc_count change")
    check_eq(m["peak_physical_bytes"], None, "peak_physical_bytes (not recorded)")
    check_eq(d["regression"], False, "regression without --fail-above")
    # the numbers are report's
    for side, path in (("base", base), ("new", new)):
        r = json.loads(run([MEMTRACK, "report", path, "--json"]).stdout)
        for key in ("peak_heap_bytes", "total_allocated_bytes", "alloc_count",
                    "leaked_bytes", "peak_rss_bytes"):
            check_eq(m[key][side], r[key], "%s %s == report's" % (side, key))
    # processes paired by command: parent with parent, child with child
    procs = [(q["command"], q["metrics"]["peak_heap_bytes"]["base"],
              q["metrics"]["peak_heap_bytes"]["new"]) for q in d["processes"]]
    check_eq(procs, [("heap_grow", 2000000, 3000000), ("heap_grow", 1000000, 1500000)],
             "processes (command, peak heap base, new)")
    check_eq([q["base_pid"] is not None and q["new_pid"] is not None for q in d["processes"]],
             [True, True], "both processes matched")


def test_diff_exit_status(tmp):
    base, new = runs()
    cases = [
        (["--fail-above", "49"], 1),            # peak heap +50%, leaks +78.5%
        (["--fail-above", "80"], 0),            # nothing grew by more than 80%
        (["--fail-above", "50", "--metric", "peak_heap_bytes"], 0),   # exactly 50%: not beyond
        (["--fail-above", "49.9", "--metric", "peak_heap_bytes"], 1),
        (["--fail-above", "0", "--metric", "alloc_count"], 0),        # same count
        ([], 0),                                # no threshold: never fails
    ]
    for opts, rc in cases:
        p = diff(base, new, *opts)
        check_eq(p.rc, rc, "diff %s exit status (stderr %r)" % (" ".join(opts), p.stderr))
    # the other way round everything shrank
    check_eq(diff(new, base, "--fail-above", "0").rc, 0, "diff NEW BASE --fail-above 0")
    p = diff(base, new, "--fail-above", "49")
    check_eq("REGRESSION" in p.stdout, True, "text output names the regression: %r" % p.stdout)


def test_diff_usage_errors(tmp):
    base, new = runs()
    cases = [
        ([base], "diff needs two artifacts"),
        ([base, new, "--fail-above"], "--fail-above needs a value"),
        ([base, new, "--fail-above", "ten"], "--fail-above takes a percentage"),
        ([base, new, "--fail-above", "-1"], "--fail-above takes a percentage"),
        ([base, new, "--metric", "peak_heap"], "unknown metric 'peak_heap'"),
        ([base, new, "--bogus"], "unknown option '--bogus'"),
        ([base, new, base], "too many files"),
        ([base, new, "--metric", "peak_physical_bytes"],
         "metric peak_physical_bytes is not recorded in %s" % base),
    ]
    for args, msg in cases:
        p = diff(*args)
        check_eq((p.rc, p.stdout), (2, ""), "diff %s (rc, stdout)" % " ".join(args))
        check_eq(p.stderr.count("\n"), 1, "one line of error for %s: %r" % (args, p.stderr))
        check_eq(p.stderr.startswith("memtrack: " + msg), True,
                 "diff %s message: %r" % (" ".join(args), p.stderr))
    p = diff(base, str(tmp / "missing.mtrk"))
    check_eq(p.rc, 1, "diff with a missing file exits 1 (stderr %r)" % p.stderr)
