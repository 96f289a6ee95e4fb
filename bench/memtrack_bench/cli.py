# SPDX-License-Identifier: MIT
"""bench/run.sh's options, and the run from the configuration to
results.{json,md}: select rows, shard, snapshot the binaries, run the
walltime then the memory rows, write, compare."""
import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import __doc__ as ABOUT
from .compare import print_compare
from .config import COSTS_PATH, CONFIG_PATH, GNU_TIME, REPO, UNTRACKED, load_config, mode_variants
from .machine import git_describe, machine_info, mark_children, tool_version
from .memory import run_memory
from .merge import MergeError, merge_results
from .render import write_result
from .run import Run, make_inputs, pick_scratch, start_daemon, stop_daemon
from .shards import (costs_id, measured_costs_path, parse_shard, pick_costs, shard_units, suite_units,
                     whole_suite, write_costs)
from .walltime import run_walltime


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="bench/run.sh", description=ABOUT.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=CONFIG_PATH)
    ap.add_argument("--mode", choices=["all", "walltime", "memory"], default="all")
    ap.add_argument("--only", help="comma-separated benchmark names (e.g. ls,dd)")
    ap.add_argument("--variant", help="comma-separated variant names (the untracked baseline is always "
                                      "timed in walltime mode)")
    ap.add_argument("--no-peers", action="store_true", help="skip heaptrack and massif")
    ap.add_argument("--runs", type=int, help="measured rounds for every walltime row (overrides the config)")
    ap.add_argument("--smoke", action="store_true", help="each command once, no statistics; exit 1 on failure")
    ap.add_argument("--compare", metavar="BASELINE.json", help="print the change against an earlier results file")
    ap.add_argument("--results", metavar="RESULTS.json",
                    help="write the results here (its .md and the measured costs.json beside it) instead of "
                         "--out's results.json or smoke.json, in every mode (a run, a shard, --smoke, --merge); "
                         "with --compare and no run: compare this existing file instead of running the suite")
    ap.add_argument("--shard", metavar="K/N", help="run the K-th of N disjoint parts of the suite (of --mode's "
                                                   "rows), balanced by the row costs (--costs)")
    ap.add_argument("--costs", metavar="COSTS.json",
                    help="the row costs that balance --shard and plan rounds (default: the costs.json a whole "
                         "run measured beside the results, else the committed bench/costs.json); every shard "
                         "of one run must use the same")
    ap.add_argument("--update-costs", action="store_true",
                    help="after a whole run (or a --merge of one): also rewrite the committed bench/costs.json "
                         "with the costs measured (commit it; without this the tree is never written)")
    ap.add_argument("--merge", nargs="+", metavar="SHARD.json",
                    help="join shards' results.json into the results a whole run writes (runs nothing)")
    ap.add_argument("--list", action="store_true", help="print the rows this run would measure and exit")
    ap.add_argument("--threshold", type=float, help="flag changes beyond this percent (both modes)")
    ap.add_argument("--fail-on-change", action="store_true",
                    help="with --compare: exit 3 when a row got worse beyond the threshold "
                         "(off by default: timings are noisy)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench-results"),
                    help="directory for results.json/results.md (smoke.json/smoke.md with --smoke) and the "
                         "measured costs.json, unless --results names the file")
    ap.add_argument("--memtrack", default=os.environ.get("MEMTRACK", os.path.join(REPO, "build", "memtrack")))
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (inputs, artifacts)")
    return ap.parse_args(argv)


def failed_rows(result):
    return [r for r in result["walltime"] + result["memory"] if r["status"] == "failed" and not r.get("optional")]


def compare_status(args, suite, result, status):
    if args.compare:
        status = print_compare(args.compare, suite, result, args.threshold, args.fail_on_change) or status
    return status


def do_merge(args, suite):
    parts = []
    for path in args.merge:
        try:
            with open(path) as f:
                parts.append((path, json.load(f)))
        except (OSError, ValueError) as e:
            sys.exit(f"bench: cannot merge: {path}: {e}")
    try:
        result = merge_results(parts)
    except MergeError as e:
        sys.exit(f"bench: cannot merge: {e}")
    jpath = results_path(args, result["smoke"])
    mpath = write_result(result, jpath)
    log(f"bench: merged {len(parts)} shard(s) into {os.path.relpath(mpath)} and {os.path.relpath(jpath)}")
    keep_costs(args, result, jpath, {})
    return compare_status(args, suite, result, 1 if failed_rows(result) else 0)


def results_path(args, smoke):
    """The results file: --results, else --out's results.json (smoke.json)."""
    return args.results or os.path.join(args.out, ("smoke" if smoke else "results") + ".json")


def keep_costs(args, result, jpath, old):
    """After a whole run or merge: its costs beside its results (the next
    run's plan on this machine), and with --update-costs in the committed
    bench/costs.json too; the tree is written only then."""
    if not whole_suite(result):
        if args.update_costs:
            log("bench: --update-costs: not a whole run (--smoke, --only, --variant, --no-peers, --runs, "
                "--mode or a shard): bench/costs.json left as it is")
        return
    local = measured_costs_path(jpath)
    write_costs(local, result, old)
    log(f"bench: wrote {os.path.relpath(local)} (the rows' costs on this machine; the next run's plan)")
    config = os.path.normpath(os.path.join(REPO, result.get("config", "")))
    if args.update_costs and config != CONFIG_PATH:
        log(f"bench: --update-costs: the results are of {result.get('config')}, not {os.path.relpath(CONFIG_PATH)}: "
            f"{os.path.relpath(COSTS_PATH)} left as it is")
    elif args.update_costs:
        write_costs(COSTS_PATH, result, old)
        log(f"bench: rewrote {os.path.relpath(COSTS_PATH)} (--update-costs; commit it with the results)")


def compare_only(args):
    """--compare of an existing --results file: no option that selects rows
    (bench/run.sh's runs_nothing says the same)."""
    return bool(args.compare and args.results and not (
        args.smoke or args.shard or args.only or args.variant or args.runs or args.no_peers
        or args.mode != "all"))


def select(config, args):
    """The benchmarks and variants --only, --variant and --no-peers leave."""
    benches, variants = config.benchmarks, config.variants
    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in {b.name for b in benches}]
        if unknown:
            sys.exit(f"bench: unknown benchmark(s) {','.join(unknown)}; have {','.join(b.name for b in benches)}")
        benches = [b for b in benches if b.name in want]
    if args.variant:
        want = args.variant.split(",")
        unknown = [w for w in want if w not in {v.name for v in variants}]
        if unknown:
            sys.exit(f"bench: unknown variant(s) {','.join(unknown)}; have {','.join(v.name for v in variants)}")
        variants = [v for v in variants if v.name in want or v.kind == "baseline"]
    if args.no_peers:
        variants = [v for v in variants if v.kind != "peer"]
    return benches, variants


def check_tools(args):
    if not os.access(args.memtrack, os.X_OK):
        sys.exit(f"bench: {args.memtrack} not found; run make first")
    if args.mode != "memory" and not shutil.which("hyperfine") and not args.smoke:
        sys.exit("bench: hyperfine not found; run scripts/bootstrap.sh (Debian package hyperfine)")
    if args.mode != "walltime" and not os.access(GNU_TIME, os.X_OK):
        sys.exit("bench: /usr/bin/time not found; run scripts/bootstrap.sh (Debian package time)")


def snapshot_binaries(memtrack, scratch):
    """Copies memtrack, its in-process library and the fixtures into
    @scratch, so that a rebuild during the run does not change (or break)
    what is measured; returns the copies' (memtrack, fixtures)."""
    fixtures = os.path.join(os.path.dirname(memtrack), "fixtures")
    bindir = os.path.join(scratch, "bin")
    os.makedirs(bindir)
    for _ in range(5):  # a concurrent `make` may be relinking it
        shutil.copy2(memtrack, os.path.join(bindir, "memtrack"))
        if tool_version([os.path.join(bindir, "memtrack"), "--version"]):
            break
        time.sleep(2)
    else:
        sys.exit(f"bench: {memtrack} --version fails; rebuild with make")
    # the in-process heap path's library (--fast) lives beside the binary
    fastlib = os.path.join(os.path.dirname(memtrack), "libmemtrack-fast.so")
    if os.path.exists(fastlib):
        shutil.copy2(fastlib, os.path.join(bindir, "libmemtrack-fast.so"))
    if os.path.isdir(fixtures):
        shutil.copytree(fixtures, os.path.join(bindir, "fixtures"))
    return os.path.join(bindir, "memtrack"), os.path.join(bindir, "fixtures")


def new_run(config, args, variants, costs, scratch):
    """The run's settings, its scratch directory made, before the snapshot."""
    suite = config.suite
    run = Run(suite=suite, variants=variants, baseline=config.baseline or UNTRACKED, costs=costs,
              smoke=args.smoke, runs_override=args.runs,
              memory_jobs=max(1, min(suite.memory_jobs, os.cpu_count() or 1)),
              memtrack=os.path.abspath(args.memtrack), fixtures="", scratch=scratch,
              artifacts=os.path.join(scratch, "artifacts"))
    os.makedirs(run.artifacts)
    return run


def measure(run, config, benches, units, keep):
    """Runs the rows of @units; returns (walltime rows, memory rows, memtrack's version)."""
    daemon = None
    try:
        run.memtrack, run.fixtures = snapshot_binaries(run.memtrack, run.scratch)
        helptext = subprocess.run([run.memtrack, "track", "--help"], capture_output=True, text=True)
        run.track_options = set(re.findall(r"--[a-z][a-z0-9-]*", helptext.stdout + helptext.stderr))
        version = tool_version([run.memtrack, "--version"])
        inputs_dir = os.path.join(run.scratch, "inputs")
        os.makedirs(inputs_dir)
        by_mode = {m: [b for b in benches if (m, b.name) in units] for m in ("walltime", "memory")}
        needed = {n for m in by_mode for b in by_mode[m] for n in b.inputs}
        run.inputs = make_inputs(config.inputs, needed, inputs_dir, log)  # before any measured round

        if any(v.daemon and b.runs_under(v) for b in by_mode["walltime"] for v in run.variants):
            daemon = start_daemon(run, log)
        walltime = run_walltime(run, by_mode["walltime"], log)
        stop_daemon(daemon)
        memory = run_memory(run, by_mode["memory"], log)
    finally:
        stop_daemon(daemon)
        if keep:
            log(f"bench: scratch kept in {run.scratch}")
        else:
            shutil.rmtree(run.scratch, ignore_errors=True)
    return walltime, memory, version


def exit_on_signals():
    """SIGTERM and SIGHUP (a CI job's timeout, a closed terminal) end the run
    through the finally clauses: its daemon stopped, the tool it waits for
    killed (subprocess.run does on an exception), its scratch removed.  By
    default they killed Python outright, and killed runs left up to 8 GiB
    each in /dev/shm, until a shared machine ran out of memory."""
    def end(signum, _frame):
        sys.exit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, end)


def results(args, config, config_sha256, run, benches, scratch_root, t_start, measured):
    """results.json's content."""
    walltime, memory, version = measured
    suite = config.suite
    return {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "memtrack": {"path": os.path.abspath(args.memtrack), "version": version,
                     "git": git_describe(), "physical_supported": "--physical" in run.track_options},
        "tools": {"hyperfine": tool_version(["hyperfine", "--version"]),
                  "heaptrack": tool_version(["heaptrack", "--version"]),
                  "valgrind": tool_version(["valgrind", "--version"])},
        "config": os.path.relpath(args.config, REPO),
        "invocation": "bench/run.sh" + ("".join(" " + shlex.quote(a) for a in sys.argv[1:])),
        "smoke": args.smoke,
        "mode": args.mode,
        "config_sha256": config_sha256,
        "selection": {"only": args.only, "variant": args.variant, "no_peers": args.no_peers,
                      "runs": args.runs, "smoke": args.smoke},
        "order": {"benchmarks": [b.name for b in benches], "variants": [v.name for v in run.variants]},
        "scratch_fs": "tmpfs (/dev/shm)" if scratch_root == "/dev/shm" else scratch_root,
        "budget_s": suite.budget_s,
        "peer_timeout_s": suite.peer_timeout_s,
        "outer_options": suite.outer_options,
        "memory_jobs": run.memory_jobs,
        "suite_seconds": time.monotonic() - t_start,
        "paced_rows": sum(1 for r in walltime if r.get("paced")),
        "load": run.machine.summary(),
        "walltime": walltime,
        "memory": memory,
    }


def main(argv=None):
    args = parse_args(argv)
    config = load_config(args.config)
    suite = config.suite
    with open(args.config, "rb") as f:
        config_sha256 = hashlib.sha256(f.read()).hexdigest()

    if args.merge:
        return do_merge(args, suite)
    if compare_only(args):
        try:
            with open(args.results) as f:
                existing = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"bench: --results {args.results}: {e}; with --compare and no run option it names "
                     "an existing results file")
        return print_compare(args.compare, suite, existing, args.threshold, args.fail_on_change)

    benches, variants = select(config, args)
    modes = ["walltime", "memory"] if args.mode == "all" else [args.mode]
    units = suite_units(modes, benches, variants)
    jpath = results_path(args, args.smoke)
    costs_path, costs = pick_costs(args.costs, jpath)
    shard = None
    if args.shard:
        k, n = parse_shard(args.shard)
        parts, load = shard_units(units, costs, variants, n, benches)
        units = parts[k - 1]
        shard = {"k": k, "n": n, "mode": args.mode, "units": [list(u) for u in units],
                 "estimated_s": round(load[k - 1], 1), "costs": costs_id(costs_path)}
    if args.list:
        by_name = {b.name: b for b in benches}
        for mode, bench in units:
            for v in mode_variants(mode, variants, by_name[bench]):
                print(f"{mode} {bench} {v.name}")
        return 0
    check_tools(args)

    t_start = time.monotonic()
    mark_children()  # marks the suite's reapers (wait_for_reapers)
    exit_on_signals()
    scratch_root = pick_scratch(suite.scratch)
    os.makedirs(scratch_root, exist_ok=True)
    run = new_run(config, args, variants, costs, tempfile.mkdtemp(prefix="memtrack-bench.", dir=scratch_root))
    if not (args.smoke or args.runs):
        run.deadline = t_start + suite.budget_s
    measured = measure(run, config, benches, units, args.keep)
    result = results(args, config, config_sha256, run, benches, scratch_root, t_start, measured)
    result["costs"] = costs_id(costs_path)
    if shard:
        result["shard"] = shard
    mpath = write_result(result, jpath)
    log(f"bench: wrote {os.path.relpath(mpath)} and {os.path.relpath(jpath)}; "
        f"suite took {result['suite_seconds']:.0f} s")
    keep_costs(args, result, jpath, costs)
    if not args.smoke and result["suite_seconds"] > result["budget_s"]:
        log(f"bench: warning: over the {result['budget_s']} s budget")

    failed = failed_rows(result)
    status = 0
    if failed:
        log(f"bench: {len(failed)} benchmark(s) failed: "
            + ", ".join(f"{r['benchmark']}/{r['variant']}" for r in failed))
        status = 1
    return compare_status(args, suite, result, status)
