# SPDX-License-Identifier: MIT
"""Memory rows: memtrack's own peak RSS and heap while it tracks a
workload, measured by an outer memtrack tracking the inner one."""
import concurrent.futures
import os
import shlex
import time

from .config import GNU_TIME, mode_variants
from .parse import find_inner, heap_peak_from_dump, read_time_kib, report_json
from .render import fmt_bytes, fmt_count
from .run import build_command, failure_note, row_base, run_once, unavailable


class RowFailed(Exception):
    """A memory round that cannot give figures; its message is the row's note."""


def measure_once(run, bench, variant, i, row, expect_heap):
    """Round @i of a memory row: the outer memtrack tracks GNU time tracking
    the inner memtrack tracking the workload.  Returns the round's figures;
    raises RowFailed.  Sets row["command"]."""
    inner_argv, fresh = build_command(run, bench, variant, run.artifacts, f"mem{i}")
    outer = os.path.join(run.artifacts, f"{bench.name}.{variant.name}.outer{i}.mtrk")
    timef = os.path.join(run.artifacts, f"{bench.name}.{variant.name}.time{i}")
    argv = ([run.memtrack, "track"] + shlex.split(run.suite.outer_options) + ["-o", outer, "--"]
            + [GNU_TIME, "-f", "%M", "-o", timef] + inner_argv)
    row["command"] = shlex.join(argv)
    rc, secs, err = run_once(argv, fresh, 900)
    if rc != 0:
        raise RowFailed(failure_note(rc, err, "memtrack"))
    try:
        rep = report_json(run.memtrack, outer)
        inner = find_inner(rep)
        if not inner:
            raise RuntimeError("the inner memtrack is not in the outer report's processes[]")
        inner_artifact = inner_argv[inner_argv.index("-o") + 1]
        inner_rep = report_json(run.memtrack, inner_artifact)
        # The outer memtrack records the inner memtrack only and leaves
        # its workload to it (two sessions parking one process would
        # race): a workload process in the outer report means the inner
        # one's figures cannot be trusted.
        if expect_heap and inner_rep.get("processes"):
            wl = inner_rep["processes"][0]
            if any(p["pid"] == wl["pid"] for p in rep.get("processes", [])):
                raise RowFailed(f"the outer memtrack also tracked the workload (pid {wl['pid']})")
        if "peak_heap_bytes" in inner:
            heap_peak, peak_src = inner["peak_heap_bytes"], "report"
        else:
            heap_peak, peak_src = heap_peak_from_dump(run.memtrack, outer, inner["pid"]), "dump"
    except (RuntimeError, ValueError, KeyError) as e:
        raise RowFailed(str(e)) from e
    # the inner run's own figures: its unwind tables' kernel memory (null
    # without --stacks or from a build that predates it) and artifact bytes
    # per event it recorded
    events = inner_rep.get("events")
    art_bytes = os.path.getsize(inner_artifact) if os.path.exists(inner_artifact) else None
    if inner.get("peak_rss_bytes") is not None:
        rss, rss_src = inner["peak_rss_bytes"], "report"
    else:
        kib = read_time_kib(timef)
        rss, rss_src = (kib * 1024 if kib is not None else None), "time"
    return {
        "peak_rss_bytes": rss, "peak_rss_source": rss_src,
        "heap_alloc_count": inner.get("alloc_count"), "heap_total_bytes": inner.get("allocated_bytes"),
        "heap_peak_bytes": heap_peak, "heap_peak_source": peak_src,
        "inner_pid": inner["pid"], "inner_events": events,
        "table_kernel_bytes": inner_rep.get("stack_table_bytes"),
        "artifact_bytes": art_bytes,
        "artifact_bytes_per_event": (art_bytes / events) if art_bytes is not None and events else None,
        "inner_dropped": inner_rep.get("dropped_events"), "outer_dropped": rep.get("dropped_events"),
        "seconds": secs,
    }


def workload_rss(run, bench):
    """The untracked workload's max RSS (GNU time), once per benchmark."""
    wl = run.workload_rss.get(bench.name)
    if wl is None:
        wl_argv, wl_fresh = build_command(run, bench, run.baseline, run.artifacts, "rss")
        tf = os.path.join(run.artifacts, f"{bench.name}.workload.time")
        run_once([GNU_TIME, "-f", "%M", "-o", tf] + wl_argv, wl_fresh, 600)
        kib = read_time_kib(tf)
        wl = run.workload_rss[bench.name] = kib * 1024 if kib is not None else None
    return wl


def memory_row(run, bench, variant):
    row = row_base(bench, variant, "memtrack")
    na = unavailable(run, variant)
    if na:
        row.update(status="n/a", note=na)
        return row
    rounds = 1 if run.smoke else max(1, run.suite.memory_rounds)
    expect_heap = "--no-allocators" not in variant.command
    best = None
    for i in range(rounds):
        try:
            cand = measure_once(run, bench, variant, i, row, expect_heap)
        except RowFailed as e:
            row.update(status="failed", note=str(e))
            return row
        if best is None or (cand["peak_rss_bytes"] or 0) > (best["peak_rss_bytes"] or 0):
            best = cand
    row.update(best, rounds=rounds, silent_loss_retries=[])
    notes = []
    if row["outer_dropped"]:
        notes.append(f"outer memtrack lost {row['outer_dropped']} events: heap figures are low")
    if row["inner_dropped"]:
        notes.append(f"inner memtrack lost {row['inner_dropped']} events")
    if row["peak_rss_source"] == "time":
        # GNU time's %M is the largest of memtrack and its waited-for children
        wl = row["workload_max_rss_bytes"] = workload_rss(run, bench)
        if wl is not None and row["peak_rss_bytes"] is not None and wl >= row["peak_rss_bytes"]:
            notes.append("RSS may be the workload's (GNU time reports the larger of the two)")
    row["note"] = "; ".join(notes)
    return row


def run_memory(run, benches, log):
    """The memory rows, memory_jobs at a time: they time nothing (peak RSS
    and heap calls do not depend on the CPU they get), so on a machine of
    N CPUs they share it; the rows come back in run order."""
    jobs = [(bench, variant) for bench in benches for variant in mode_variants("memory", run.variants, bench)]
    if not jobs:
        return []
    run.machine.before_row()  # the wall-time rows' reapers are gone

    def one(job):
        bench, _ = job
        run.machine.sample_load()
        t0 = time.monotonic()
        row = memory_row(run, *job)
        row["row_seconds"] = time.monotonic() - t0
        if row["status"] == "ok":
            msg = (f"peak RSS {fmt_bytes(row['peak_rss_bytes'])}, heap {fmt_count(row['heap_alloc_count'])} allocs"
                   f" / {fmt_bytes(row['heap_total_bytes'])} / peak {fmt_bytes(row['heap_peak_bytes'])}")
        else:
            msg = f"{row['status'].upper()}: {row['note']}"
        log(f"bench: memory   {bench.name:<6} {row['label']:<26} {msg}  [{row['row_seconds']:.1f} s]")
        return row

    with concurrent.futures.ThreadPoolExecutor(max_workers=run.memory_jobs) as pool:
        return list(pool.map(one, jobs))
