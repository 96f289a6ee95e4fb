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
from .run import Run, make_inputs, pick_scratch
from .shards import load_costs, parse_shard, shard_units, suite_units, write_costs
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
                    help="with --compare: compare this existing file instead of running the suite; "
                         "with --merge: write the merged results here (and its .md beside it)")
    ap.add_argument("--shard", metavar="K/N", help="run the K-th of N disjoint parts of the suite (of --mode's "
                                                   "rows), balanced by bench/costs.json")
    ap.add_argument("--merge", nargs="+", metavar="SHARD.json",
                    help="join shards' results.json into the results a whole run writes (runs nothing)")
    ap.add_argument("--list", action="store_true", help="print the rows this run would measure and exit")
    ap.add_argument("--threshold", type=float, help="flag changes beyond this percent (both modes)")
    ap.add_argument("--fail-on-change", action="store_true",
                    help="with --compare: exit 3 when a row got worse beyond the threshold "
                         "(off by default: timings are noisy)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench-results"),
                    help="directory for results.json/results.md (smoke.json/smoke.md with --smoke)")
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
    jpath = args.results or os.path.join(args.out, ("smoke" if result["smoke"] else "results") + ".json")
    mpath = write_result(result, jpath)
    log(f"bench: merged {len(parts)} shard(s) into {os.path.relpath(mpath)} and {os.path.relpath(jpath)}")
    return compare_status(args, suite, result, 1 if failed_rows(result) else 0)


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

        walltime = run_walltime(run, by_mode["walltime"], log)
        memory = run_memory(run, by_mode["memory"], log)
    finally:
        if keep:
            log(f"bench: scratch kept in {run.scratch}")
        else:
            shutil.rmtree(run.scratch, ignore_errors=True)
    return walltime, memory, version


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
    if args.compare and args.results:
        with open(args.results) as f:
            return print_compare(args.compare, suite, json.load(f), args.threshold, args.fail_on_change)

    benches, variants = select(config, args)
    modes = ["walltime", "memory"] if args.mode == "all" else [args.mode]
    units = suite_units(modes, benches, variants)
    costs = load_costs(COSTS_PATH)
    shard = None
    if args.shard:
        k, n = parse_shard(args.shard)
        parts, load = shard_units(units, costs, variants, n)
        units = parts[k - 1]
        shard = {"k": k, "n": n, "mode": args.mode, "units": [list(u) for u in units],
                 "estimated_s": round(load[k - 1], 1)}
    if args.list:
        for mode, bench in units:
            for v in mode_variants(mode, variants):
                print(f"{mode} {bench} {v.name}")
        return 0
    check_tools(args)

    t_start = time.monotonic()
    mark_children()  # marks the suite's reapers (wait_for_reapers)
    scratch_root = pick_scratch(suite.scratch)
    os.makedirs(scratch_root, exist_ok=True)
    run = new_run(config, args, variants, costs, tempfile.mkdtemp(prefix="memtrack-bench.", dir=scratch_root))
    measured = measure(run, config, benches, units, args.keep)
    result = results(args, config, config_sha256, run, benches, scratch_root, t_start, measured)
    if shard:
        result["shard"] = shard
    stem = "smoke" if args.smoke else "results"
    jpath = os.path.join(args.out, stem + ".json")
    mpath = write_result(result, jpath)
    log(f"bench: wrote {os.path.relpath(mpath)} and {os.path.relpath(jpath)}; "
        f"suite took {result['suite_seconds']:.0f} s")
    full = not (args.smoke or shard or args.only or args.variant or args.no_peers or args.runs) and args.mode == "all"
    if full and os.path.abspath(args.config) == CONFIG_PATH:
        write_costs(COSTS_PATH, result, costs)
        log(f"bench: refreshed {os.path.relpath(COSTS_PATH)} (the shards' balance; commit it with the results)")
    if not args.smoke and result["suite_seconds"] > result["budget_s"]:
        log(f"bench: warning: over the {result['budget_s']} s budget")

    failed = failed_rows(result)
    status = 0
    if failed:
        log(f"bench: {len(failed)} benchmark(s) failed: "
            + ", ".join(f"{r['benchmark']}/{r['variant']}" for r in failed))
        status = 1
    return compare_status(args, suite, result, status)
