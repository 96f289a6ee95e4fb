# SPDX-License-Identifier: MIT
"""Splitting the suite into shards, and the row costs that balance them.

A unit of work is (mode, benchmark): every variant of one workload in one
mode, run together, so that a walltime row's overhead is always against
the untracked rounds of the same machine and run.  Units are the unit of
sharding; their cost is the sum of their rows' costs measured by the last
full run (bench/costs.json)."""
import json
import os
import re
import sys

from .config import REPO, mode_variants

DEFAULT_ROW_COST_S = 2.0  # a row the costs file does not know yet


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
    return [(m, b.name) for m in modes for b in benches if mode_variants(m, variants)]


def unit_cost(costs, unit, variants):
    mode, bench = unit
    return sum(float(costs.get(cost_key(mode, bench, v.name), {}).get("seconds", DEFAULT_ROW_COST_S))
               for v in mode_variants(mode, variants))


def shard_units(units, costs, variants, n):
    """Splits @units into @n disjoint parts of about equal cost: longest
    first, each to the cheapest part so far (ties: the lower part, then
    run order), so every shard of one configuration computes the same
    split.  Each part keeps run order."""
    order = {u: i for i, u in enumerate(units)}
    parts, load = [[] for _ in range(n)], [0.0] * n
    for u in sorted(units, key=lambda u: (-unit_cost(costs, u, variants), order[u])):
        k = min(range(n), key=lambda i: (load[i], i))
        parts[k].append(u)
        load[k] += unit_cost(costs, u, variants)
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
