# SPDX-License-Identifier: MIT
"""Joining shards' results (--merge) into the result a whole run writes."""
import os
import shlex


class MergeError(Exception):
    pass


# what must be equal in every part of a merge, and how a refusal names it
SAME_IN_EVERY_SHARD = [
    (lambda r: r["memtrack"].get("git"), "commit"),
    (lambda r: r["memtrack"].get("version"), "memtrack version"),
    (lambda r: r.get("config_sha256"), "configuration (bench/benchmarks.toml)"),
    (lambda r: r.get("selection"), "selection (--only, --variant, --no-peers, --runs, --smoke)"),
]


def merge_results(parts):
    """Joins the results of shards (@parts: [(file name, result)]) into
    the result a whole run writes: the same rows in the same order, each
    shard's machine, load and time kept in shards[].  Raises MergeError
    when the parts are not shards of one run of one configuration."""
    if not parts:
        raise MergeError("nothing to merge")
    name0, first = parts[0]
    for name, r in parts:
        if not isinstance(r, dict) or r.get("schema") != 1 or "walltime" not in r or "memory" not in r:
            raise MergeError(f"{name} is not a bench/run.sh results file")
        for get, what in SAME_IN_EVERY_SHARD:
            if get(r) != get(first):
                raise MergeError(f"{name} and {name0} are of different {what}s ({get(r)!r} vs {get(first)!r}); "
                                 "rerun the shards from one checkout with the same options")
    groups = {}
    for name, r in parts:
        sh = r.get("shard") or {"k": 1, "n": 1, "mode": r.get("mode", "all")}
        groups.setdefault(sh["mode"], []).append((name, sh))
    for mode, shards in groups.items():
        n = shards[0][1]["n"]
        seen = {}
        for name, sh in shards:
            if sh["n"] != n:
                raise MergeError(f"{name} is shard {sh['k']}/{sh['n']} but {shards[0][0]} is of {n} shards")
            if sh.get("costs", {}).get("sha256") != shards[0][1].get("costs", {}).get("sha256"):
                raise MergeError(f"{name} and {shards[0][0]} were split by different costs "
                                 f"({sh.get('costs', {}).get('file')} vs {shards[0][1].get('costs', {}).get('file')}): "
                                 "their rows need not add up; rerun every shard with the same --costs FILE")
            if sh["k"] in seen:
                raise MergeError(f"{name} and {seen[sh['k']]} are both --mode {mode} shard {sh['k']}/{n}")
            seen[sh["k"]] = name
        missing = [k for k in range(1, n + 1) if k not in seen]
        if missing:
            raise MergeError(f"--mode {mode} shard(s) {','.join(f'{k}/{n}' for k in missing)} missing; "
                             "pass every shard's results")
    rows, owner = {"walltime": [], "memory": []}, {}
    for name, r in parts:
        for mode in ("walltime", "memory"):
            for row in r[mode]:
                key = (mode, row["benchmark"], row["variant"])
                if key in owner:
                    raise MergeError(f"{name} and {owner[key]} both have the {mode} row "
                                     f"{row['benchmark']}/{row['variant']}")
                owner[key] = name
                rows[mode].append(row)
    order = first.get("order", {})
    bpos = {b: i for i, b in enumerate(order.get("benchmarks", []))}
    vpos = {v: i for i, v in enumerate(order.get("variants", []))}
    for mode in rows:
        rows[mode].sort(key=lambda row: (bpos.get(row["benchmark"], len(bpos)), vpos.get(row["variant"], len(vpos))))
    loads = [r["load"] for _, r in parts]
    merged = dict(first)
    merged.pop("shard", None)
    merged.update(
        walltime=rows["walltime"], memory=rows["memory"], mode="all" if len(groups) > 1 else next(iter(groups)),
        invocation="bench/run.sh --merge " + " ".join(shlex.quote(os.path.basename(n)) for n, _ in parts),
        date=max(r["date"] for _, r in parts),
        suite_seconds=max(r["suite_seconds"] for _, r in parts),
        load={"loadavg_1min_min": min((l["loadavg_1min_min"] for l in loads if l["loadavg_1min_min"] is not None),
                                      default=None),
              "loadavg_1min_max": max((l["loadavg_1min_max"] for l in loads if l["loadavg_1min_max"] is not None),
                                      default=None),
              "rows_with_foreign_tracers": sum(l["rows_with_foreign_tracers"] for l in loads),
              "foreign_tracers": sorted({t for l in loads for t in l["foreign_tracers"]})},
        shards=[{"file": os.path.basename(name), **(r.get("shard") or {"k": 1, "n": 1, "mode": r.get("mode", "all")}),
                 "date": r["date"], "machine": r["machine"], "load": r["load"], "tools": r["tools"],
                 "invocation": r["invocation"], "suite_seconds": r["suite_seconds"], "scratch_fs": r["scratch_fs"]}
                for name, r in parts])
    return merged
