# SPDX-License-Identifier: MIT
"""bench.py - memtrack's overhead benchmarks (driven by bench/run.sh).

Reads bench/benchmarks.toml and, for every workload x variant:

  walltime  hyperfine rounds after a warm-up; median, spread, and the ratio
            to the untracked workload timed in the same run
  memory    memtrack's own peak RSS and heap (allocation count, bytes, peak)
            while it tracks the workload, measured by an outer memtrack
            tracking the inner one

and writes a markdown table and a JSON file.  --compare BASELINE.json prints
the change per row and flags those beyond the config's thresholds.
--smoke runs every command once without statistics and fails on any
broken benchmark (for CI).  Python 3.11 standard library only.

The modules, in the order a run goes through them:

  config    bench/benchmarks.toml as typed, checked dataclasses (Suite,
            Input, Benchmark, Variant, Config)
  shards    the units of work, bench/costs.json, --shard's balanced split
  run       one run's settings (Run), its inputs, a row's command run once
  machine   machine, tools and load for the results
  reapers   waiting for the suite's reapers (also hyperfine's --prepare script)
  walltime  walltime rows (hyperfine rounds, round_plan, median_stable)
  memory    memory rows (an outer memtrack tracking the inner one)
  parse     reading report --json, dump and GNU time's output
  render    number formats, results.md, writing results.{json,md}
  compare   --compare: the change per row against an earlier results file
  merge     --merge: shards' results joined into a whole run's
  cli       bench/run.sh's options and the run from start to results
"""
