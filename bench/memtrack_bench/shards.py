# SPDX-License-Identifier: MIT
"""Splitting the suite into shards, and the row costs that balance them.

A unit of work is (mode, benchmark): every variant of one workload in one
mode, run together, so that a walltime row's overhead is always against
the untracked rounds of the same machine and run.  Units are the unit of
sharding; their cost is the sum of their rows' costs measured by a whole
run: the costs.json it writes beside its results (on this machine), else
the committed bench/costs.json (a run writes that only with
--update-costs, so a benchmark run leaves the checkout clean)."""
import hashlib
import json
import os
import re
import sys

from .config import COSTS_PATH, REPO, mode_variants

DEFAULT_ROW_COST_S = 2.0  # a row the costs file does not know yet


def measured_costs_path(results_path):
    """Where a whole run whose results go to @results_path writes the costs it measured."""
    return os.path.join(os.path.dirname(os.path.abspath(results_path)), "costs.json")


def pick_costs(given, results_path):
    """(path, rows) of the costs a run plans with: @given (--costs), else
    the costs measured beside @results_path by an earlier whole run, else
    the committed bench/costs.json."""
    if given:
        if not os.path.exists(given):
            sys.exit(f"bench: --costs {given}: no such file; give a costs.json a whole run wrote, "
                     f"or leave --costs out for {os.path.relpath(COSTS_PATH, REPO)}")
        path = os.path.abspath(given)
    else:
        local = measured_costs_path(results_path)
        path = local if os.path.exists(local) else COSTS_PATH
    return path, load_costs(path)


def costs_id(path):
    """{file, sha256} of the costs a plan used (merge refuses shards of different ones)."""
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        digest = None
    shown = os.path.relpath(path, REPO) if os.path.abspath(path).startswith(REPO + os.sep) else path
    return {"file": shown, "sha256": digest}


def whole_suite(result):
    """Whether @result (a run's or a merge's) measured every row of its
    configuration with its own rounds: only then are its costs the
    suite's."""
    sel = result.get("selection", {})
    return (not result.get("smoke") and not result.get("shard") and result.get("mode") == "all"
            and not any(sel.get(k) for k in ("only", "variant", "no_peers", "runs", "smoke")))


def cost_key(mode, bench, variant):
    return f"{mode}/{bench}/{variant}"


def load_costs(path):
    """Row costs of the last full run ({} when there is none yet: every
    row then costs DEFAULT_ROW_COST_S)."""
    try:
        with open(path) as f:
            rows = json.load(f).get("rows", {})
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError) as e:
        sys.exit(f"bench: {path}: unreadable ({e}); restore it with git checkout {os.path.relpath(path, REPO)}")
    return rows if isinstance(rows, dict) else {}


def suite_units(modes, benches, variants):
    """The units a run of @modes does, in run order."""
    return [(m, b.name) for m in modes for b in benches if mode_variants(m, variants, b)]


def unit_cost(costs, unit, variants, benches):
    mode, bench = unit
    return sum(float(costs.get(cost_key(mode, bench, v.name), {}).get("seconds", DEFAULT_ROW_COST_S))
               for v in mode_variants(mode, variants, benches.get(bench)))


def shard_units(units, costs, variants, n, benches=()):
    """Splits @units into @n disjoint parts of about equal cost: longest
    first, each to the cheapest part so far (ties: the lower part, then
    run order), so every shard of one configuration computes the same
    split.  Each part keeps run order.  @benches: the [Benchmark]s (a
    benchmark may run under some variants only)."""
    by_name = {b.name: b for b in benches}
    order = {u: i for i, u in enumerate(units)}
    parts, load = [[] for _ in range(n)], [0.0] * n
    for u in sorted(units, key=lambda u: (-unit_cost(costs, u, variants, by_name), order[u])):
        k = min(range(n), key=lambda i: (load[i], i))
        parts[k].append(u)
        load[k] += unit_cost(costs, u, variants, by_name)
    return [sorted(p, key=order.get) for p in parts], load


def parse_shard(text):
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        sys.exit(f"bench: --shard {text}: want K/N with 1 <= K <= N (e.g. --shard 2/3)")
    return int(m[1]), int(m[2])


def write_costs(path, result, old):
    """After a full run: every row's share of the suite's wall time (a
    memory row's time over memory_jobs: they run that many at a time), and
    a walltime row's round and spread, which round_plan reads; for the next
    run's shards."""
    rows = {}
    for mode in ("walltime", "memory"):
        share = 1 if mode == "walltime" else result.get("memory_jobs", 1)
        for r in result[mode]:
            key = cost_key(mode, r["benchmark"], r["variant"])
            c = {"seconds": round(r.get("row_seconds", 0.0) / share, 3)}
            if mode == "walltime" and r["status"] == "ok":
                c["round_s"] = round(r["median_s"], 4)
                # a row run once has no spread: keep the one it was chosen by
                c["spread_pct"] = (round((r["max_s"] - r["min_s"]) / r["median_s"] * 100, 1)
                                   if r["runs"] > 1 else old.get(key, {}).get("spread_pct"))
            rows[key] = c
    with open(path, "w") as f:
        json.dump({"schema": 1, "from": f"bench/run.sh of {result['date']}, git {result['memtrack']['git']}",
                   "rows": rows}, f, indent=1, sort_keys=True)
        f.write("\n")
