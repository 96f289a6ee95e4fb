# SPDX-License-Identifier: MIT
"""The results as a reader sees them: numbers formatted, results.md's
header and tables, and results.{json,md} written."""
import json
import os


def fmt_time(s):
    if s is None:
        return ""
    if s < 1:
        return f"{s * 1000:.1f} ms" if s < 0.1 else f"{s * 1000:.0f} ms"
    return f"{s:.2f} s"


def fmt_bytes(n):
    if n is None:
        return ""
    v, units = float(n), ["B", "KiB", "MiB", "GiB"]
    i = 0
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return f"{v:.0f} {units[i]}" if i == 0 else f"{v:.1f} {units[i]}"


def fmt_count(n):
    return "" if n is None else f"{n:,}"


def fmt_per_event(v):
    return "" if v is None else f"{v:.2f}"


def status_cell(row):
    if row["status"] == "n/a":
        return row["note"]
    if row["status"] == "failed":
        return f"**FAILED** ({row['note']})" if not row.get("optional") else f"did not run ({row['note']})"
    return None


def machine_line(m):
    return f"Machine: {m['cpu']}, {m['nproc']} CPUs, {m['mem_gib']} GiB RAM; kernel {m['kernel']}; {m['distro']}"


def load_line(ld, m):
    if ld["loadavg_1min_max"] is None:
        return ""
    line = (f"Load: 1-minute load average {ld['loadavg_1min_min']:.2f}–{ld['loadavg_1min_max']:.2f} "
            f"over the run ({m['nproc']} CPUs)")
    if ld["rows_with_foreign_tracers"]:
        line += (f"; **other tracers were running** before {ld['rows_with_foreign_tracers']} row(s) "
                 f"({', '.join(ld['foreign_tracers'][:6])}): their probes fire machine-wide, so timings "
                 "are inflated")
    return line


def header(result):
    """results.md's title and its lines on the run, machine, shards and load."""
    m, out = result["machine"], []
    smoke = result["smoke"]
    out.append(f"# memtrack overhead benchmarks{' (smoke: one run each, no statistics)' if smoke else ''}")
    out.append("")
    out.append(f"- Date: {result['date']}")
    out.append(f"- {result['memtrack']['version'] or 'memtrack ?'} (git {result['memtrack']['git'] or '?'}); "
               f"`--physical` {'supported' if result['memtrack']['physical_supported'] else 'not supported by this build'}")
    tools = result["tools"]
    out.append(f"- Peers: {tools.get('heaptrack') or 'heaptrack ?'}; {tools.get('valgrind') or 'valgrind ?'}; "
               f"timing: {tools.get('hyperfine') or 'hyperfine ?'}")
    if result.get("shards"):
        out.append(f"- Merged from {len(result['shards'])} shard(s): `{result['invocation']}`; the slowest took "
                   f"{result['suite_seconds']:.0f} s (budget {result['budget_s']} s)")
        for sh in result["shards"]:
            out.append(f"- Shard {sh['k']}/{sh['n']} (--mode {sh['mode']}, {sh['file']}): `{sh['invocation']}`, "
                       f"{sh['suite_seconds']:.0f} s, {sh['date']}; inputs on {sh['scratch_fs']}")
            out.append(f"  - {machine_line(sh['machine'])}")
            ll = load_line(sh["load"], sh["machine"])
            if ll:
                out.append(f"  - {ll}")
    else:
        out.append(f"- {machine_line(m)}")
        shard = result.get("shard")
        part = f"shard {shard['k']}/{shard['n']} of --mode {shard['mode']}, " if shard else ""
        out.append(f"- Suite: `{result['invocation']}`, {part}{result['suite_seconds']:.0f} s in all "
                   f"(budget {result['budget_s']} s); inputs on {result['scratch_fs']}")
        ll = load_line(result["load"], m)
        if ll:
            out.append(f"- {ll}")
    if result.get("paced_rows"):
        out.append(f"- Paced: {result['paced_rows']} wall-time row(s) took their minimum of rounds without "
                   "warm-up (at most 3), the machine running slower than the costs said, to keep the "
                   f"{result['budget_s']} s budget")
    return out


def walltime_section(result):
    smoke, out = result["smoke"], []
    out.append("")
    out.append("## Wall time")
    out.append("")
    if smoke:
        out.append("One run of each command, no warm-up and no statistics: this checks that every benchmark "
                   "runs; its times are not measurements.")
    else:
        out.append("Median of the measured rounds; spread is the standard deviation and min–max; overhead is "
                   "the row's median divided by the untracked workload's median from the same run (and "
                   "shard).  Rounds: measured+warm-up; a row takes rounds until its median is stable (the "
                   "last round moved it by at most a few percent), between a minimum and a maximum; a row "
                   "whose rounds take half a second or more has no warm-up (the untracked row warmed the "
                   "workload's files); a peer (heaptrack, massif) whose spread was small in the last full "
                   f"run runs once.  Each peer round is limited to {result['peer_timeout_s']} s (a round that "
                   "runs out fails the row instead of being timed).  Every round starts once the memtrack-reaper "
                   "of the round before has closed what that memtrack left it (the kernel's grace periods, "
                   "after memtrack has exited), so that no round pays for another's teardown.")
    out.append("")
    out.append("Like for like: heaptrack and massif record a call stack for every heap call; memtrack's "
               "default does too (`--stacks` is the default), so compare them with **memtrack (default: stacks)**, "
               "the row beside them; the --no-stacks row just before says what skipping the stacks saves.  "
               "Records says what each variant records."
               + ("  In gcc, heaptrack and massif record the gcc driver only (they do not follow its children "
                  "cc1 and as), memtrack the whole tree: **cc1** is the row where every tool records the "
                  "same process." if any("first process only" in r.get("records", "")
                                         for r in result["walltime"]) else ""))
    out.append("")
    out.append("| Benchmark | Variant | Records | Median | Spread (σ; min–max) | Overhead | Rounds |")
    out.append("|---|---|---|---:|---:|---:|---:|")
    for r in result["walltime"]:
        cell = status_cell(r)
        rec = r.get("records", "")
        if cell:
            out.append(f"| {r.get('benchmark_label') or r['benchmark']} | {r['label']} | {rec} | {cell} | | | |")
            continue
        spread = "—" if r.get("stddev_s") is None else (
            f"±{fmt_time(r['stddev_s'])}; {fmt_time(r['min_s'])}–{fmt_time(r['max_s'])}")
        ov = "1.00× (baseline)" if r["kind"] == "baseline" else (
            f"{r['overhead']:.2f}×" if r.get("overhead") else "")
        out.append(f"| {r.get('benchmark_label') or r['benchmark']} | {r['label']} | {rec} | {fmt_time(r['median_s'])} | {spread} | {ov} | "
                   f"{r['runs']}+{r['warmup']} |")
    return out


def memory_section(result):
    out = []
    out.append("")
    out.append("## memtrack's own memory")
    out.append("")
    outer = result.get("outer_options", "-q")  # results of runs before it was written: "-q"
    out.append(f"Measured by memtrack tracking memtrack: `memtrack track {outer} -o outer.mtrk -- "
               "/usr/bin/time -f %M memtrack track -o inner.mtrk -- WORKLOAD`.  Heap columns are the inner memtrack process's "
               "malloc-family calls (count, bytes requested, peak live bytes); events is what the inner "
               "memtrack recorded; tables is the kernel memory of --stacks' unwind tables (report --json's "
               "stack_table_bytes), B/event the inner artifact's bytes per event.")
    out.append("")
    out.append("| Benchmark | Variant | Peak RSS | Heap allocs | Heap bytes | Heap peak | Events | Tables (kernel) "
               "| B/event | Note |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    marks = {"time": "†", "report": ""}
    used = set()
    for r in result["memory"]:
        cell = status_cell(r)
        if cell:
            out.append(f"| {r.get('benchmark_label') or r['benchmark']} | {r['label']} | {cell} | | | | | | | |")
            continue
        rm = marks.get(r["peak_rss_source"], "")
        pm = "‡" if r.get("heap_peak_source") == "dump" else ""
        used.update({rm, pm} - {""})
        out.append(f"| {r.get('benchmark_label') or r['benchmark']} | {r['label']} | {fmt_bytes(r['peak_rss_bytes'])}{rm} | "
                   f"{fmt_count(r['heap_alloc_count'])} | {fmt_bytes(r['heap_total_bytes'])} | "
                   f"{fmt_bytes(r['heap_peak_bytes'])}{pm} | {fmt_count(r['inner_events'])} | "
                   f"{fmt_bytes(r.get('table_kernel_bytes')) if r.get('table_kernel_bytes') is not None else '–'} | "
                   f"{fmt_per_event(r.get('artifact_bytes_per_event'))} | {r['note']} |")
    if "†" in used:
        out.append("")
        out.append("† `memtrack report` has no RSS for the process yet, so this is GNU time's `%M` (max RSS of "
                   "memtrack and its waited-for children, whichever is larger; the untracked workloads' own "
                   "max RSS is in the JSON as workload_max_rss_bytes and a row is flagged when it is not "
                   "smaller).")
    if "‡" in used:
        out.append("")
        out.append("‡ computed by replaying `memtrack dump outer.mtrk` for the inner memtrack's pid "
                   "(`report --json` has no per-process heap peak yet).")
    return out


def markdown(result):
    """results.md: the header, then a table per mode that has rows."""
    out = header(result)
    if result["walltime"]:
        out += walltime_section(result)
    if result["memory"]:
        out += memory_section(result)
    failed = [r for r in result["walltime"] + result["memory"] if r["status"] == "failed" and not r.get("optional")]
    if failed:
        out.append("")
        out.append(f"**{len(failed)} benchmark(s) failed**; the suite exits non-zero.")
    return "\n".join(out) + "\n"


def write_result(result, jpath):
    """results.json and results.md (the markdown also on stdout)."""
    os.makedirs(os.path.dirname(os.path.abspath(jpath)), exist_ok=True)
    mpath = os.path.splitext(jpath)[0] + ".md"
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    md = markdown(result)
    with open(mpath, "w") as f:
        f.write(md)
    print(md)
    return mpath
