# SPDX-License-Identifier: MIT
"""Wall-time rows: hyperfine rounds until the median is stable, and the
overhead against the untracked rows of the same run."""
import json
import os
import shlex
import statistics
import subprocess
import time

from .config import mode_variants
from .machine import last_line, wait_reapers_argv
from .render import fmt_time
from .run import build_command, describe_rc, failure_note, row_base, run_once, unavailable, why_line
from .shards import DEFAULT_ROW_COST_S, cost_key


def records_cell(bench, variant):
    """What @variant records in @bench (the wall-time table's Records column)."""
    rec = bench.records or variant.records
    if bench.children and variant.follows_children is False:
        rec += "; **the first process only** (does not follow its children)"
    return rec


def round_plan(suite, costs, runs_override, bench, variant):
    """(warm-up rounds, minimum, maximum measured rounds) of one walltime
    row.  The config's runs / peer_runs are the minimum, max_runs the
    maximum; in between, rounds are added one at a time until the median
    is stable (median_stable) or the row has spent row_budget_s (after 3
    rounds at the least).  A row
    whose round took heavy_round_s or more in the last full run
    (@costs, bench/costs.json) gets no warm-up and a minimum of 2: the untracked
    row before it has warmed the workload's files, and a cold first round
    that disagrees with the second makes the stability rule add a third
    (whose median leaves it out).  A peer whose spread in the last full
    run was within peer_once_spread_pct runs once (its timing is
    deterministic enough; heaptrack and massif are the suite's slowest
    rounds).  @runs_override (--runs): exactly that many, after the
    config's warm-up."""
    peer = variant.kind == "peer"
    if runs_override:
        return suite.warmup, runs_override, runs_override

    def own(value, default):  # the benchmark's setting, else the suite's
        return default if value is None else value
    if peer:
        warmup = own(bench.peer_warmup, suite.peer_warmup)
        lo = own(bench.peer_runs, suite.peer_runs)
    else:
        warmup = own(bench.warmup, suite.warmup)
        lo = own(bench.runs, suite.runs)
    hi = max(lo, own(bench.max_runs, suite.max_runs))
    last = costs.get(cost_key("walltime", bench.name, variant.name), {})
    if peer and last.get("spread_pct") is not None and last["spread_pct"] <= suite.peer_once_spread_pct:
        return 0, 1, 1
    if last.get("round_s") is not None and last["round_s"] >= suite.heavy_round_s:
        return 0, min(lo, 2), hi
    return warmup, lo, hi


def median_stable(times, pct):
    """True when the last round moved the median by at most pct percent."""
    if len(times) < 2:
        return False
    now, before = statistics.median(times), statistics.median(times[:-1])
    return abs(now - before) <= pct / 100 * now


def hyperfine_batch(run, argv, fresh, warmup, runs, per_round):
    """One hyperfine call of @runs rounds; returns (rc, stderr, its result)."""
    export = os.path.join(run.artifacts, "hf.json")
    hf = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
          "--export-json", export]
    prepare = shlex.join(wait_reapers_argv())
    if fresh:
        prepare = f"rm -rf {shlex.quote(fresh)} && mkdir -p {shlex.quote(fresh)} && {prepare}"
    hf += ["--prepare", "sh -c " + shlex.quote(prepare)]
    hf.append(shlex.join(argv))
    try:
        r = subprocess.run(hf, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, errors="replace", timeout=per_round * (warmup + runs) + 30)
    except subprocess.TimeoutExpired:
        return None, "hyperfine did not finish", None
    if r.returncode != 0:
        return r.returncode, r.stderr, None
    with open(export) as f:
        return 0, r.stderr, json.load(f)["results"][0]


def smoke_row(run, row, argv, fresh, variant):
    """--smoke: the command once, its time as the only round."""
    peer = variant.kind == "peer"
    timeout_s = run.suite.peer_timeout_s if peer else None
    rc, secs, err = run_once(argv, fresh, run.suite.peer_timeout_s + 30 if peer else 600)
    row.update(runs=1, warmup=0, median_s=secs, mean_s=secs, stddev_s=None, min_s=secs, max_s=secs,
               times=[secs])
    if rc != 0:
        row.update(status="failed", note=failure_note(rc, err, variant.kind, timeout_s))
    return row


def paced(plan):
    """@plan (round_plan's) for a row run while the suite is behind its
    budget: no warm-up, its minimum of rounds and at most 3 (a median of 3
    still leaves out one bad round), no more."""
    _, lo, _ = plan
    lo = min(lo, 3)
    return 0, lo, lo


class Pace:
    """Whether the suite is behind its budget (Run.deadline): the rows left
    (their costs, DEFAULT_ROW_COST_S when unknown, the memory rows' share
    too) at the rate the rows so far ran at against their costs (so costs
    measured on a faster or slower day still pace right), against the time
    left."""

    # Of the budget, kept for what no row's cost counts (the reports, the
    # memory rows' tail, the last reapers): 187 s on a loaded run that
    # paced against the whole of it
    MARGIN = 0.05

    def __init__(self, run, benches):
        self.run, self.t0, self.done = run, time.monotonic(), 0.0
        self.was_behind = False
        self.left = sum(self.cost("walltime", b, v) for b in benches
                        for v in mode_variants("walltime", run.variants, b))
        self.memory = sum(self.cost("memory", b, v) for b in benches
                          for v in mode_variants("memory", run.variants, b))

    def cost(self, mode, bench, variant):
        return float(self.run.costs.get(cost_key(mode, bench.name, variant.name), {})
                     .get("seconds", DEFAULT_ROW_COST_S))

    def behind(self, now=None):
        """After rows of 5 s of costs at least (a rate to go by).  Once
        behind, behind for the rest of the suite: on a loaded machine the
        projection swings around the deadline, and each row it let run in
        full (a peer's 3 rounds of tar: 7.7 s) put the suite further over."""
        now = time.monotonic() if now is None else now
        if self.run.deadline is None or self.done < 5:
            return False
        if self.was_behind:
            return True
        rate = (now - self.t0) / self.done  # the machine's seconds per second of costs
        budget_left = self.run.deadline - now - self.MARGIN * (self.run.deadline - self.t0)
        self.was_behind = (self.left + self.memory) * rate > budget_left
        return self.was_behind

    def ran(self, bench, variant):
        c = self.cost("walltime", bench, variant)
        self.left -= c
        self.done += c


def walltime_row(run, bench, variant, behind=False):
    kind = variant.kind
    peer = kind == "peer"
    row = row_base(bench, variant, kind)
    row["records"] = records_cell(bench, variant)
    na = unavailable(run, variant)
    if na:
        row.update(status="n/a", note=na)
        return row
    argv, fresh = build_command(run, bench, variant, run.artifacts, "wt")
    row["command"] = shlex.join(argv)
    if run.smoke:
        return smoke_row(run, row, argv, fresh, variant)

    plan = round_plan(run.suite, run.costs, run.runs_override, bench, variant)
    if behind:
        plan = paced(plan)
        row["paced"] = True
    warmup, lo, hi = plan
    per_round = (run.suite.peer_timeout_s + 10) if peer else 600
    times, user, system, t0 = [], 0.0, 0.0, time.monotonic()
    batch, batch_warmup = lo, warmup
    while True:
        rc, hf_err, res = hyperfine_batch(run, argv, fresh, batch_warmup, batch, per_round)
        if rc != 0:
            # hyperfine stops at the first failing round; rerun once to say why
            rc, _, err = run_once(argv, fresh, per_round)
            why = (describe_rc(rc, run.suite.peer_timeout_s if peer else None) if rc else
                   f"{last_line(hf_err)} in a round; run again alone it exited 0 (transient: the workload "
                   "or the machine, not this row's command line)")
            detail = why_line(err, kind, rc) if rc else ""
            row.update(runs=len(times), warmup=warmup, status="failed", note=why + (f": {detail}" if detail else ""))
            return row
        times += res["times"]
        user += (res.get("user") or 0.0) * len(res["times"])
        system += (res.get("system") or 0.0) * len(res["times"])
        n = len(times)
        # the budget stops a row at 3 rounds at the earliest: a median of 3
        # leaves out one bad round, of 2 it does not
        if n >= hi or (n >= lo and median_stable(times, run.suite.stable_pct)) or (
                n >= max(lo, 3) and time.monotonic() - t0 >= run.suite.row_budget_s):
            break
        batch, batch_warmup = 1, 0
    row.update(runs=len(times), warmup=warmup,
               median_s=statistics.median(times), mean_s=statistics.fmean(times),
               stddev_s=statistics.stdev(times) if len(times) > 1 else None,
               min_s=min(times), max_s=max(times), times=times,
               user_s=user / len(times), system_s=system / len(times), rounds_min=lo, rounds_max=hi)
    return row


def run_walltime(run, benches, log):
    rows, pace = [], Pace(run, benches)
    for bench in benches:
        baseline = None
        for variant in mode_variants("walltime", run.variants, bench):
            run.machine.before_row()
            t0 = time.monotonic()
            row = walltime_row(run, bench, variant, pace.behind())
            pace.ran(bench, variant)
            row["row_seconds"] = time.monotonic() - t0
            if variant.kind == "baseline":
                baseline = row
            rows.append(row)
            if row["status"] == "ok":
                msg = f"median {fmt_time(row['median_s'])} over {row['runs']} run(s)"
            else:
                msg = f"{row['status'].upper()}: {row['note']}"
            log(f"bench: walltime {bench.name:<6} {row['label']:<26} {msg}  [{time.monotonic() - t0:.1f} s]")
        base_s = baseline.get("median_s") if baseline and baseline["status"] == "ok" else None
        for row in rows:
            if row["benchmark"] == bench.name:
                row["untracked_median_s"] = base_s
                row["overhead"] = (row["median_s"] / base_s if base_s and row["kind"] != "baseline"
                                   and row["status"] == "ok" and row.get("median_s") else None)
    return rows
