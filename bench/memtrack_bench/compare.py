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


def status_change(r, o, blank_cells):
    """When row @r (now) or @o (then) is not a measurement to compare: its
    table line (with @blank_cells empty cells), flagged and worse (1 each
    when it is now failing); else None."""
    if o and r["status"] == "ok" and o["status"] == "ok":
        return None
    if not o:
        sc = "new row"
    else:
        sc = f"{o['status']} → {r['status']}" if r["status"] != o["status"] else r["status"]
    bad = int(r["status"] == "failed" and (not o or o["status"] != "failed"))
    return (f"| {r['benchmark']} | {r['label']} | {sc} |" + " |" * blank_cells
            + f" {'⚠ now failing' if bad else ''} |"), bad, bad


def walltime_change(r, o, wt_pct):
    """(table line, flagged, worse) of a walltime row measured then and now."""
    ch = pct(o["median_s"], r["median_s"])
    flag, worse = "", 0
    if abs(ch) > wt_pct and r["median_s"] > o.get("max_s", o["median_s"]):
        flag, worse = f"⚠ slower (beyond +{wt_pct:g}% and above the baseline's max)", 1
    elif abs(ch) > wt_pct and r["median_s"] < o.get("min_s", o["median_s"]):
        flag = f"faster (beyond -{wt_pct:g}% and below the baseline's min)"
    ov = ""
    if o.get("overhead") and r.get("overhead"):
        ov = f"{o['overhead']:.2f}× → {r['overhead']:.2f}× ({fmt_pct(pct(o['overhead'], r['overhead']))})"
    return (f"| {r['benchmark']} | {r['label']} | {fmt_time(o['median_s'])} → {fmt_time(r['median_s'])} "
            f"| {fmt_pct(ch)} | {ov} | {flag} |"), int(bool(flag)), worse


MEMORY_FIELDS = [("peak_rss_bytes", fmt_bytes), ("heap_alloc_count", fmt_count),
                 ("heap_total_bytes", fmt_bytes), ("heap_peak_bytes", fmt_bytes)]


def memory_change(r, o, mem_pct):
    """(table line, flagged, worse) of a memory row measured then and now."""
    cells, worst = [], 0.0
    for field, fmt in MEMORY_FIELDS:
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
    return (f"| {r['benchmark']} | {r['label']} | " + " | ".join(cells) + f" | {flag} |"), \
        int(bool(flag)), int(bool(flag) and worst > 0)


TABLES = {  # mode: (header, empty cells of a status line, the change of a measured row)
    "walltime": (["| Benchmark | Variant | Median then → now | Change | Overhead then → now | |",
                  "|---|---|---:|---:|---:|---|"], 2, walltime_change),
    "memory": (["| Benchmark | Variant | Peak RSS | Heap allocs | Heap bytes | Heap peak | |",
                "|---|---|---:|---:|---:|---:|---|"], 3, memory_change),
}


def changes(old, mode, rows, threshold):
    """(table lines, rows flagged, rows worse) of @mode's @rows against @old."""
    header, blanks, change = TABLES[mode]
    out, flagged, worse = list(header), 0, 0
    for r in rows:
        o = old.get((mode, r["benchmark"], r["variant"]))
        line, f, w = status_change(r, o, blanks) or change(r, o, threshold)
        out.append(line)
        flagged, worse = flagged + f, worse + w
    return out, flagged, worse


def compare(base, cur, wt_pct, mem_pct):
    """Returns (markdown text, rows flagged, rows worse).  A walltime row is
    flagged when its median moved by more than wt_pct AND left the
    baseline's min–max range (so one noisy round does not flag it); a
    memory row when any of its figures moved by more than mem_pct."""
    out, flagged, worse = [], 0, 0
    old = {(m, r["benchmark"], r["variant"]): r for m in ("walltime", "memory") for r in base.get(m, [])}
    for mode, threshold in (("walltime", wt_pct), ("memory", mem_pct)):
        if cur.get(mode):
            lines, f, w = changes(old, mode, cur[mode], threshold)
            out += ([""] if out else []) + lines
            flagged, worse = flagged + f, worse + w
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
