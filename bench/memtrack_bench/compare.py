# SPDX-License-Identifier: MIT
"""--compare: the change of every row against an earlier results file."""
import json
import sys

from .render import fmt_bytes, fmt_count, fmt_time


def pct(a, b):
    if a is None or b is None:
        return None
    return (b - a) / a * 100 if a else (0.0 if a == b else float("inf"))


def fmt_pct(x):
    return "" if x is None else f"{x:+.1f}%"


def compare(base, cur, wt_pct, mem_pct):
    """Returns (markdown text, number of rows flagged).  A walltime row is
    flagged when its median moved by more than wt_pct AND left the
    baseline's min–max range (so one noisy round does not flag it); a
    memory row when any of its figures moved by more than mem_pct."""
    out, flagged, worse = [], 0, 0
    old = {(m, r["benchmark"], r["variant"]): r for m in ("walltime", "memory") for r in base.get(m, [])}

    def status_change(mode, r, o):
        if not o:
            return "new row"
        if r["status"] != "ok" or o["status"] != "ok":
            return f"{o['status']} → {r['status']}" if r["status"] != o["status"] else r["status"]
        return None

    if cur.get("walltime"):
        out += ["| Benchmark | Variant | Median then → now | Change | Overhead then → now | |",
                "|---|---|---:|---:|---:|---|"]
        for r in cur["walltime"]:
            o = old.get(("walltime", r["benchmark"], r["variant"]))
            sc = status_change("walltime", r, o)
            if sc:
                bad = r["status"] == "failed" and (not o or o["status"] != "failed")
                flagged += bad
                worse += bad
                out.append(f"| {r['benchmark']} | {r['label']} | {sc} | | | {'⚠ now failing' if bad else ''} |")
                continue
            ch = pct(o["median_s"], r["median_s"])
            flag = ""
            if abs(ch) > wt_pct and r["median_s"] > o.get("max_s", o["median_s"]):
                flag = f"⚠ slower (beyond +{wt_pct:g}% and above the baseline's max)"
                worse += 1
            elif abs(ch) > wt_pct and r["median_s"] < o.get("min_s", o["median_s"]):
                flag = f"faster (beyond -{wt_pct:g}% and below the baseline's min)"
            flagged += bool(flag)
            ov = ""
            if o.get("overhead") and r.get("overhead"):
                ov = f"{o['overhead']:.2f}× → {r['overhead']:.2f}× ({fmt_pct(pct(o['overhead'], r['overhead']))})"
            out.append(f"| {r['benchmark']} | {r['label']} | {fmt_time(o['median_s'])} → {fmt_time(r['median_s'])} "
                       f"| {fmt_pct(ch)} | {ov} | {flag} |")
    if cur.get("memory"):
        if out:
            out.append("")
        out += ["| Benchmark | Variant | Peak RSS | Heap allocs | Heap bytes | Heap peak | |",
                "|---|---|---:|---:|---:|---:|---|"]
        fields = [("peak_rss_bytes", fmt_bytes), ("heap_alloc_count", fmt_count),
                  ("heap_total_bytes", fmt_bytes), ("heap_peak_bytes", fmt_bytes)]
        for r in cur["memory"]:
            o = old.get(("memory", r["benchmark"], r["variant"]))
            sc = status_change("memory", r, o)
            if sc:
                bad = r["status"] == "failed" and (not o or o["status"] != "failed")
                flagged += bad
                worse += bad
                out.append(f"| {r['benchmark']} | {r['label']} | {sc} | | | | {'⚠ now failing' if bad else ''} |")
                continue
            cells, worst = [], 0.0
            for field, fmt in fields:
                ch = pct(o.get(field), r.get(field))
                if ch is None:
                    cells.append("")
                    continue
                worst = ch if abs(ch) > abs(worst) else worst
                cells.append(f"{fmt(o[field])} → {fmt(r[field])} ({fmt_pct(ch)})" if abs(ch) >= 0.05
                             else f"{fmt(r[field])} (=)")
            flag = ""
            if abs(worst) > mem_pct:
                flag = f"⚠ more (beyond +{mem_pct:g}%)" if worst > 0 else f"less (beyond -{mem_pct:g}%)"
                worse += worst > 0
            flagged += bool(flag)
            out.append(f"| {r['benchmark']} | {r['label']} | " + " | ".join(cells) + f" | {flag} |")
    return "\n".join(out) + "\n", flagged, worse


def print_compare(path, suite, cur, threshold=None, fail_on_change=False):
    """Prints the change of @cur against the results file @path; returns
    the exit status: 3 when a row got worse and @fail_on_change, else 0."""
    try:
        with open(path) as f:
            base = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench: --compare {path}: not a readable results file ({e}); pass a results.json")
    wt = threshold if threshold is not None else suite.walltime_threshold_pct
    mem = threshold if threshold is not None else suite.memory_threshold_pct
    text, flagged, worse = compare(base, cur, wt, mem)
    print(f"\n## Change against {path}\n\n"
          f"- then: {base.get('date', '?')}, {base.get('memtrack', {}).get('version', '?')} "
          f"(git {base.get('memtrack', {}).get('git') or '?'}), {base.get('machine', {}).get('cpu', '?')}\n"
          f"- now:  {cur.get('date', '?')}, {cur.get('memtrack', {}).get('version', '?')} "
          f"(git {cur.get('memtrack', {}).get('git') or '?'}), {cur.get('machine', {}).get('cpu', '?')}\n")
    print(text)
    print(f"{flagged} row(s) beyond the threshold (walltime ±{wt:g}%, memory ±{mem:g}%), {worse} of them worse"
          + ("" if fail_on_change else "; informational only"))
    return 3 if worse and fail_on_change else 0
