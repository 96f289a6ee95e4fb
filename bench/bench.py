#!/usr/bin/env python3
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
"""
import argparse
import concurrent.futures
import datetime
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NA_UNSUPPORTED = "n/a (not supported by this build)"
GNU_TIME = "/usr/bin/time"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ config

def load_config(path):
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    suite = cfg.get("suite", {})
    benches = cfg.get("benchmark", [])
    variants = cfg.get("variant", [])
    errors = []
    if not benches:
        errors.append("no [[benchmark]] entries")
    if not variants:
        errors.append("no [[variant]] entries")
    for kind, items in (("benchmark", benches), ("variant", variants)):
        seen = set()
        for it in items:
            if "name" not in it or "command" not in it:
                errors.append(f"a [[{kind}]] lacks name or command: {it}")
                continue
            if it["name"] in seen:
                errors.append(f"duplicate {kind} name '{it['name']}'")
            seen.add(it["name"])
    for v in variants:
        if v.get("kind", "memtrack") not in ("baseline", "memtrack", "peer"):
            errors.append(f"variant '{v.get('name')}': kind must be baseline, memtrack or peer")
    if sum(1 for v in variants if v.get("kind") == "baseline") > 1:
        errors.append("at most one variant may have kind = \"baseline\"")
    for b in benches:
        for name in re.findall(r"\{input:([A-Za-z0-9_]+)\}", b.get("command", "")):
            if name not in cfg.get("inputs", {}):
                errors.append(f"benchmark '{b['name']}' uses {{input:{name}}} but there is no [inputs.{name}]")
    if errors:
        sys.exit("bench: " + path + ": " + "; ".join(errors))
    return cfg, suite, benches, variants


# --------------------------------------------------------------- utilities

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


def describe_rc(rc, timeout_s=None):
    if rc is None:
        return "did not finish"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"killed by {name}"
    if timeout_s and rc == 124:
        return f"timed out after {timeout_s} s"
    if rc > 128 and rc - 128 < 65:
        try:
            return f"exit {rc} ({signal.Signals(rc - 128).name})"
        except ValueError:
            pass
    return f"exit {rc}"


def last_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def why_line(text, kind, rc=None):
    """The stderr line that best says why a command failed: memtrack's own
    last message for memtrack rows; the workload's last line only when no
    signal was involved (after a crash it is the workload's chatter)."""
    if kind == "memtrack":
        mine = [l for l in (text or "").splitlines() if l.startswith("memtrack:")]
        if mine:
            return mine[-1].strip()[:200]
        if rc is None or rc < 0 or rc > 128:
            return ""
    return last_line(text)


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    distro = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    mem_kib = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kib = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "nproc": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "distro": distro,
        "mem_gib": round(mem_kib / 1048576, 1),
    }


def tool_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return last_line(out.stdout or out.stderr) if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_describe():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty-src" if dirty else "") if rev else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def foreign_trackers():
    """Tracers running outside this suite (between rows none of ours runs):
    their BPF programs fire machine-wide and inflate every timing."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm in ("memtrack", "heaptrack", "heaptrack_inter", "bpftrace") or comm.startswith("valgrind"):
            found.append(f"{comm}[{pid}]")
    return found


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


# Every command the suite runs has this in its environment: a reaper is the
# suite's own when its /proc/PID/environ (memtrack's, which it forked from)
# carries it.
RUN_TOKEN = f"MEMTRACK_BENCH_RUN={os.getpid()}.{time.time_ns()}"


def wait_for_reapers(limit_s=10.0):
    """A finished memtrack leaves a memtrack-reaper closing its links and BPF
    objects (the kernel's grace periods): the next row waits for it, so it
    does not pay for the last one's teardown.  Only the suite's own reapers
    (RUN_TOKEN): on a shared machine another user's can live for a minute,
    asleep in the kernel, and waiting for them cost up to limit_s a row."""
    token = RUN_TOKEN.encode()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    st = f.read()
                # comm in parentheses, then the state: a zombie has closed everything
                if "(memtrack-reaper)" not in st or st[st.rindex(")") + 2] == "Z":
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    busy = token in f.read().split(b"\0")
            except OSError:
                continue
            if busy:
                break
        if not busy:
            return
        time.sleep(0.05)


def note_machine(ctx):
    """Called before each row: waits for our reapers, records load and foreign tracers."""
    wait_for_reapers()
    la = loadavg()
    if la is not None:
        ctx.loads.append(la)
    ft = foreign_trackers()
    if ft:
        ctx.foreign_rows += 1
        ctx.foreign.update(ft)


# ------------------------------------------------------------------ shards
#
# A unit of work is (mode, benchmark): every variant of one workload in one
# mode, run together, so that a walltime row's overhead is always against
# the untracked rounds of the same machine and run.  Units are the
# unit of sharding; their cost is the sum of their rows' costs measured by
# the last full run (bench/costs.json).

COSTS_PATH = os.path.join(REPO, "bench", "costs.json")
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


def mode_variants(mode, variants):
    return variants if mode == "walltime" else [v for v in variants if v.get("kind") == "memtrack"]


def suite_units(modes, benches, variants):
    """The units a run of @modes does, in run order."""
    return [(m, b["name"]) for m in modes for b in benches if mode_variants(m, variants)]


def unit_cost(costs, unit, variants):
    mode, bench = unit
    return sum(float(costs.get(cost_key(mode, bench, v["name"]), {}).get("seconds", DEFAULT_ROW_COST_S))
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


# ------------------------------------------------------------------- merge

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


# ------------------------------------------------------------------ inputs

def pick_scratch(setting):
    if setting and setting != "auto":
        return os.path.abspath(setting)
    try:
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= 3 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return os.path.join(REPO, "build", "bench-work")


def make_inputs(cfg, needed, inputs_dir):
    paths = {}
    for name in sorted(needed):
        spec = cfg["inputs"][name]
        kind = spec.get("kind")
        t0 = time.monotonic()
        if kind == "file":
            path = os.path.join(inputs_dir, f"{name}.bin")
            chunk = bytes(1 << 20)
            with open(path, "wb") as f:
                for _ in range(int(spec.get("size_mib", 64))):
                    f.write(chunk)
        elif kind == "tar":
            src = os.path.abspath(spec["source"])
            path = os.path.join(inputs_dir, f"{name}.tar")
            r = subprocess.run(["tar", "-cf", path, "-C", os.path.dirname(src), os.path.basename(src)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # exit 1 = "some files changed while being archived": still usable
            if r.returncode not in (0, 1):
                sys.exit(f"bench: cannot create input '{name}' (tar of {src}): {last_line(r.stderr)}")
        else:
            sys.exit(f"bench: input '{name}': unknown kind '{kind}' (use file or tar)")
        log(f"bench: input {name}: {path} ({fmt_bytes(os.path.getsize(path))}, "
            f"{time.monotonic() - t0:.1f} s, untimed)")
        paths[name] = path
    return paths


# ---------------------------------------------------------------- commands

class Ctx:
    pass


def expand(template, values):
    def sub(m):
        key = m.group(1)
        if key not in values:
            raise KeyError(f"unknown placeholder {{{key}}} in: {template}")
        return values[key]
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*(?::[A-Za-z0-9_]+)?)\}", sub, template)


@functools.lru_cache(maxsize=1)
def cc1_path():
    """gcc's compiler proper, the program `gcc -c` runs (the cc1 benchmark)."""
    try:
        out = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return out or "cc1"


def build_command(ctx, bench, variant, artifact_dir, tag):
    """Returns (argv, fresh_dir or None) for one workload under one variant."""
    fresh = os.path.join(ctx.scratch, "fresh", f"{bench['name']}.{variant['name']}.{tag}")
    values = {"memtrack": ctx.memtrack, "fixtures": ctx.fixtures, "fresh": shlex.quote(fresh),
              "repo": shlex.quote(REPO)}
    if "{cc1}" in bench["command"]:
        values["cc1"] = shlex.quote(cc1_path())
    for name, path in ctx.inputs.items():
        values[f"input:{name}"] = shlex.quote(path)
    workload = expand(bench["command"], values)
    values["workload"] = workload
    ext = {"memtrack": "mtrk", "peer": "out"}.get(variant.get("kind"), "out")
    values["artifact"] = shlex.quote(os.path.join(artifact_dir, f"{bench['name']}.{variant['name']}.{tag}.{ext}"))
    argv = shlex.split(expand(variant["command"], values))
    if variant.get("kind") == "peer" and ctx.peer_timeout:
        argv = ["timeout", "-k", "5", str(ctx.peer_timeout)] + argv
    return argv, (fresh if "{fresh}" in bench["command"] else None)


def reset_dir(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)


def unavailable(ctx, variant):
    """Why a variant cannot run with this build/machine, or None."""
    opt = variant.get("requires_option")
    if opt and opt not in ctx.track_options:
        return NA_UNSUPPORTED
    prog = variant.get("requires_program")
    if prog and not shutil.which(prog):
        return f"n/a ({prog} not installed)"
    return None


def run_once(argv, fresh, timeout):
    """Runs argv once (output discarded); returns (rc, seconds, stderr)."""
    if fresh:
        reset_dir(fresh)
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, errors="replace", timeout=timeout)
        return r.returncode, time.monotonic() - t0, r.stderr
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, f"no result after {timeout} s"
    except OSError as e:
        return 127, time.monotonic() - t0, str(e)


# ---------------------------------------------------------------- walltime

def records_cell(bench, variant):
    """What @variant records in @bench (the wall-time table's Records column)."""
    rec = variant.get("records", "")
    if bench.get("children") and variant.get("follows_children") is False:
        rec += "; **the first process only** (does not follow its children)"
    return rec


def walltime_row(ctx, bench, variant):
    kind = variant.get("kind", "memtrack")
    peer = kind == "peer"
    row = {"benchmark": bench["name"], "variant": variant["name"], "label": variant.get("label", variant["name"]),
           "kind": kind, "optional": bool(variant.get("optional")), "status": "ok", "note": "",
           "records": records_cell(bench, variant)}
    na = unavailable(ctx, variant)
    if na:
        row.update(status="n/a", note=na)
        return row
    argv, fresh = build_command(ctx, bench, variant, ctx.artifacts, "wt")
    row["command"] = shlex.join(argv)
    if ctx.smoke:
        rc, secs, err = run_once(argv, fresh, ctx.peer_timeout + 30 if peer else 600)
        row.update(runs=1, warmup=0, median_s=secs, mean_s=secs, stddev_s=None, min_s=secs, max_s=secs,
                   times=[secs])
        if rc != 0:
            detail = why_line(err, kind, rc)
            row.update(status="failed", note=describe_rc(rc, ctx.peer_timeout if peer else None)
                       + (f": {detail}" if detail else ""))
        return row

    warmup, lo, hi = round_plan(ctx, bench, variant)
    per_round = (ctx.peer_timeout + 10) if peer else 600
    times, user, system, t0 = [], 0.0, 0.0, time.monotonic()
    batch, batch_warmup = lo, warmup
    while True:
        rc, hf_err, res = hyperfine_batch(ctx, argv, fresh, batch_warmup, batch, per_round)
        if rc != 0:
            # hyperfine stops at the first failing round; rerun once to say why
            rc, _, err = run_once(argv, fresh, per_round)
            why = describe_rc(rc, ctx.peer_timeout if peer else None) if rc else last_line(hf_err)
            detail = why_line(err, kind, rc) if rc else ""
            row.update(runs=len(times), warmup=warmup, status="failed", note=why + (f": {detail}" if detail else ""))
            return row
        times += res["times"]
        user += (res.get("user") or 0.0) * len(res["times"])
        system += (res.get("system") or 0.0) * len(res["times"])
        n = len(times)
        # the budget stops a row at 3 rounds at the earliest: a median of 3
        # leaves out one bad round, of 2 it does not
        if n >= hi or (n >= lo and median_stable(times, ctx.stable_pct)) or (
                n >= max(lo, 3) and time.monotonic() - t0 >= ctx.row_budget_s):
            break
        batch, batch_warmup = 1, 0
    row.update(runs=len(times), warmup=warmup,
               median_s=statistics.median(times), mean_s=statistics.fmean(times),
               stddev_s=statistics.stdev(times) if len(times) > 1 else None,
               min_s=min(times), max_s=max(times), times=times,
               user_s=user / len(times), system_s=system / len(times), rounds_min=lo, rounds_max=hi)
    return row


def round_plan(ctx, bench, variant):
    """(warm-up rounds, minimum, maximum measured rounds) of one walltime
    row.  The config's runs / peer_runs are the minimum, max_runs the
    maximum; in between, rounds are added one at a time until the median
    is stable (median_stable) or the row has spent row_budget_s (after 3
    rounds at the least).  A row
    whose round took heavy_round_s or more in the last full run
    (bench/costs.json) gets no warm-up and a minimum of 2: the untracked
    row before it has warmed the workload's files, and a cold first round
    that disagrees with the second makes the stability rule add a third
    (whose median leaves it out).  A peer whose spread in the last full
    run was within peer_once_spread_pct runs once (its timing is
    deterministic enough; heaptrack and massif are the suite's slowest
    rounds)."""
    peer = variant.get("kind") == "peer"
    if ctx.runs_override:
        return int(ctx.suite.get("warmup", 1)), ctx.runs_override, ctx.runs_override
    if peer:
        warmup = int(bench.get("peer_warmup", ctx.suite.get("peer_warmup", 1)))
        lo = int(bench.get("peer_runs", ctx.suite.get("peer_runs", 3)))
    else:
        warmup = int(bench.get("warmup", ctx.suite.get("warmup", 1)))
        lo = int(bench.get("runs", ctx.suite.get("runs", 5)))
    hi = max(lo, int(bench.get("max_runs", ctx.suite.get("max_runs", 10))))
    last = ctx.costs.get(cost_key("walltime", bench["name"], variant["name"]), {})
    if peer and last.get("spread_pct") is not None and last["spread_pct"] <= ctx.peer_once_spread_pct:
        return 0, 1, 1
    if last.get("round_s") is not None and last["round_s"] >= ctx.heavy_round_s:
        return 0, min(lo, 2), hi
    return warmup, lo, hi


def median_stable(times, pct):
    """True when the last round moved the median by at most pct percent."""
    if len(times) < 2:
        return False
    now, before = statistics.median(times), statistics.median(times[:-1])
    return abs(now - before) <= pct / 100 * now


def hyperfine_batch(ctx, argv, fresh, warmup, runs, per_round):
    """One hyperfine call of @runs rounds; returns (rc, stderr, its result)."""
    export = os.path.join(ctx.artifacts, "hf.json")
    hf = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
          "--export-json", export]
    if fresh:
        hf += ["--prepare", "sh -c " + shlex.quote(f"rm -rf {shlex.quote(fresh)} && mkdir -p {shlex.quote(fresh)}")]
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


def run_walltime(ctx, benches):
    rows = []
    for bench in benches:
        baseline = None
        for variant in ctx.variants:
            note_machine(ctx)
            t0 = time.monotonic()
            row = walltime_row(ctx, bench, variant)
            row["row_seconds"] = time.monotonic() - t0
            if variant.get("kind") == "baseline":
                baseline = row
            rows.append(row)
            if row["status"] == "ok":
                msg = f"median {fmt_time(row['median_s'])} over {row['runs']} run(s)"
            else:
                msg = f"{row['status'].upper()}: {row['note']}"
            log(f"bench: walltime {bench['name']:<6} {row['label']:<26} {msg}  [{time.monotonic() - t0:.1f} s]")
        base_s = baseline.get("median_s") if baseline and baseline["status"] == "ok" else None
        for row in rows:
            if row["benchmark"] == bench["name"]:
                row["untracked_median_s"] = base_s
                row["overhead"] = (row["median_s"] / base_s if base_s and row["kind"] != "baseline"
                                   and row["status"] == "ok" and row.get("median_s") else None)
    return rows


# ------------------------------------------------------------------ memory

def report_json(memtrack, path):
    r = subprocess.run([memtrack, "report", path, "--json"], capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"memtrack report {os.path.basename(path)} failed: {last_line(r.stderr)}")
    return json.loads(r.stdout)


def heap_peak_from_dump(memtrack, path, pid):
    """Peak live heap bytes of one pid, replaying `memtrack dump` the way
    analysis.c does (realloc = free old + alloc new; exec/exit drop all)."""
    live, cur, peak = {}, 0, 0
    needle = f'"pid":{pid},'
    p = subprocess.Popen([memtrack, "dump", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, errors="replace")
    for line in p.stdout:
        if needle not in line:
            continue
        ev = json.loads(line)
        if ev.get("pid") != pid:
            continue
        t = ev["type"]
        if t in ("malloc", "calloc", "aligned_alloc", "realloc"):
            if t == "realloc":
                cur -= live.pop(ev.get("old_addr"), 0)
            cur -= live.pop(ev["addr"], 0)
            if ev["addr"]:
                live[ev["addr"]] = ev["size"]
                cur += ev["size"]
            peak = max(peak, cur)
        elif t == "free":
            cur -= live.pop(ev["addr"], 0)
        elif t in ("exec", "exit"):
            live.clear()
            cur = 0
    err = p.stderr.read()
    if p.wait() != 0:
        raise RuntimeError(f"memtrack dump failed: {last_line(err)}")
    return peak


def read_time_kib(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
        return int(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def find_inner(report):
    """The inner memtrack in the outer report: the process named memtrack
    whose parent is not itself a memtrack (its parked child is)."""
    procs = report.get("processes", [])
    mt = {p["pid"] for p in procs if p.get("command") == "memtrack"}
    for p in procs:
        if p["pid"] in mt and p.get("ppid") not in mt:
            return p
    return None


def memory_row(ctx, bench, variant):
    row = {"benchmark": bench["name"], "variant": variant["name"], "label": variant.get("label", variant["name"]),
           "kind": "memtrack", "optional": bool(variant.get("optional")), "status": "ok", "note": ""}
    na = unavailable(ctx, variant)
    if na:
        row.update(status="n/a", note=na)
        return row
    rounds = 1 if ctx.smoke else max(1, int(ctx.suite.get("memory_rounds", 1)))
    expect_heap = "--no-allocators" not in variant["command"]
    best, done, attempt, mismatches = None, 0, 0, []
    while done < rounds:
        i = attempt
        attempt += 1
        inner_argv, fresh = build_command(ctx, bench, variant, ctx.artifacts, f"mem{i}")
        outer = os.path.join(ctx.artifacts, f"{bench['name']}.{variant['name']}.outer{i}.mtrk")
        timef = os.path.join(ctx.artifacts, f"{bench['name']}.{variant['name']}.time{i}")
        argv = ([ctx.memtrack, "track"] + shlex.split(ctx.suite.get("outer_options", "-q")) + ["-o", outer, "--"]
                + [GNU_TIME, "-f", "%M", "-o", timef] + inner_argv)
        row["command"] = shlex.join(argv)
        rc, secs, err = run_once(argv, fresh, 900)
        if rc != 0:
            detail = why_line(err, "memtrack", rc)
            row.update(status="failed", note=describe_rc(rc) + (f": {detail}" if detail else ""))
            return row
        try:
            rep = report_json(ctx.memtrack, outer)
            inner = find_inner(rep)
            if not inner:
                raise RuntimeError("the inner memtrack is not in the outer report's processes[]")
            inner_artifact = inner_argv[inner_argv.index("-o") + 1]
            inner_rep = report_json(ctx.memtrack, inner_artifact)
            # The outer memtrack records the inner memtrack only and leaves
            # its workload to it (two sessions parking one process would
            # race): a workload process in the outer report means the inner
            # one's figures cannot be trusted.
            if expect_heap and inner_rep.get("processes"):
                wl = inner_rep["processes"][0]
                seen = next((p for p in rep.get("processes", []) if p["pid"] == wl["pid"]), None)
                if seen is not None:
                    mismatches.append(f"the outer memtrack also tracked the workload (pid {wl['pid']})")
                    row.update(status="failed", note="; ".join(mismatches))
                    return row
            if "peak_heap_bytes" in inner:
                heap_peak, peak_src = inner["peak_heap_bytes"], "report"
            else:
                heap_peak, peak_src = heap_peak_from_dump(ctx.memtrack, outer, inner["pid"]), "dump"
        except (RuntimeError, ValueError, KeyError) as e:
            row.update(status="failed", note=str(e))
            return row
        done += 1
        if inner.get("peak_rss_bytes") is not None:
            rss, rss_src = inner["peak_rss_bytes"], "report"
        else:
            kib = read_time_kib(timef)
            rss, rss_src = (kib * 1024 if kib is not None else None), "time"
        cand = {
            "peak_rss_bytes": rss, "peak_rss_source": rss_src,
            "heap_alloc_count": inner.get("alloc_count"), "heap_total_bytes": inner.get("allocated_bytes"),
            "heap_peak_bytes": heap_peak, "heap_peak_source": peak_src,
            "inner_pid": inner["pid"], "inner_events": inner_rep.get("events"),
            "inner_dropped": inner_rep.get("dropped_events"), "outer_dropped": rep.get("dropped_events"),
            "seconds": secs,
        }
        if best is None or (cand["peak_rss_bytes"] or 0) > (best["peak_rss_bytes"] or 0):
            best = cand
    row.update(best, rounds=rounds, silent_loss_retries=mismatches)
    notes = []
    if row["outer_dropped"]:
        notes.append(f"outer memtrack lost {row['outer_dropped']} events: heap figures are low")
    if row["inner_dropped"]:
        notes.append(f"inner memtrack lost {row['inner_dropped']} events")
    if row["peak_rss_source"] == "time":
        # GNU time's %M is the largest of memtrack and its waited-for children
        wl = ctx.workload_rss.get(bench["name"])
        if wl is None:
            wl_argv, wl_fresh = build_command(ctx, bench, ctx.baseline_variant, ctx.artifacts, "rss")
            tf = os.path.join(ctx.artifacts, f"{bench['name']}.workload.time")
            run_once([GNU_TIME, "-f", "%M", "-o", tf] + wl_argv, wl_fresh, 600)
            kib = read_time_kib(tf)
            wl = ctx.workload_rss[bench["name"]] = kib * 1024 if kib is not None else None
        row["workload_max_rss_bytes"] = wl
        if wl is not None and row["peak_rss_bytes"] is not None and wl >= row["peak_rss_bytes"]:
            notes.append("RSS may be the workload's (GNU time reports the larger of the two)")
    row["note"] = "; ".join(notes)
    return row


def run_memory(ctx, benches):
    """The memory rows, memory_jobs at a time: they time nothing (peak RSS
    and heap calls do not depend on the CPU they get), so on a machine of
    N CPUs they share it; the rows come back in run order."""
    jobs = [(bench, variant) for bench in benches for variant in mode_variants("memory", ctx.variants)]
    if not jobs:
        return []
    note_machine(ctx)  # the wall-time rows' reapers are gone

    def one(job):
        bench, _ = job
        la = loadavg()
        if la is not None:
            ctx.loads.append(la)
        t0 = time.monotonic()
        row = memory_row(ctx, *job)
        row["row_seconds"] = time.monotonic() - t0
        if row["status"] == "ok":
            msg = (f"peak RSS {fmt_bytes(row['peak_rss_bytes'])}, heap {fmt_count(row['heap_alloc_count'])} allocs"
                   f" / {fmt_bytes(row['heap_total_bytes'])} / peak {fmt_bytes(row['heap_peak_bytes'])}")
        else:
            msg = f"{row['status'].upper()}: {row['note']}"
        log(f"bench: memory   {bench['name']:<6} {row['label']:<26} {msg}  [{row['row_seconds']:.1f} s]")
        return row

    with concurrent.futures.ThreadPoolExecutor(max_workers=ctx.memory_jobs) as pool:
        return list(pool.map(one, jobs))


# ----------------------------------------------------------------- output

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


def markdown(result):
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
    if result["walltime"]:
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
                       "runs out fails the row instead of being timed).")
        out.append("")
        out.append("Like for like: heaptrack and massif record a call stack for every heap call; memtrack's "
                   "default does not (heap calls without stacks), so compare them with **memtrack --stacks**, "
                   "the row beside them; the default's row just before says what skipping the stacks saves.  "
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
                out.append(f"| {r['benchmark']} | {r['label']} | {rec} | {cell} | | | |")
                continue
            spread = "—" if r.get("stddev_s") is None else (
                f"±{fmt_time(r['stddev_s'])}; {fmt_time(r['min_s'])}–{fmt_time(r['max_s'])}")
            ov = "1.00× (baseline)" if r["kind"] == "baseline" else (
                f"{r['overhead']:.2f}×" if r.get("overhead") else "")
            out.append(f"| {r['benchmark']} | {r['label']} | {rec} | {fmt_time(r['median_s'])} | {spread} | {ov} | "
                       f"{r['runs']}+{r['warmup']} |")
    if result["memory"]:
        out.append("")
        out.append("## memtrack's own memory")
        out.append("")
        out.append("Measured by memtrack tracking memtrack: `memtrack track -o outer.mtrk -- /usr/bin/time -f %M "
                   "memtrack track -o inner.mtrk -- WORKLOAD`.  Heap columns are the inner memtrack process's "
                   "malloc-family calls (count, bytes requested, peak live bytes); events is what the inner "
                   "memtrack recorded.")
        out.append("")
        out.append("| Benchmark | Variant | Peak RSS | Heap allocs | Heap bytes | Heap peak | Events | Note |")
        out.append("|---|---|---:|---:|---:|---:|---:|---|")
        marks = {"time": "†", "report": ""}
        used = set()
        for r in result["memory"]:
            cell = status_cell(r)
            if cell:
                out.append(f"| {r['benchmark']} | {r['label']} | {cell} | | | | | |")
                continue
            rm = marks.get(r["peak_rss_source"], "")
            pm = "‡" if r.get("heap_peak_source") == "dump" else ""
            used.update({rm, pm} - {""})
            out.append(f"| {r['benchmark']} | {r['label']} | {fmt_bytes(r['peak_rss_bytes'])}{rm} | "
                       f"{fmt_count(r['heap_alloc_count'])} | {fmt_bytes(r['heap_total_bytes'])} | "
                       f"{fmt_bytes(r['heap_peak_bytes'])}{pm} | {fmt_count(r['inner_events'])} | {r['note']} |")
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
    failed = [r for r in result["walltime"] + result["memory"] if r["status"] == "failed" and not r.get("optional")]
    if failed:
        out.append("")
        out.append(f"**{len(failed)} benchmark(s) failed**; the suite exits non-zero.")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- compare

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


# -------------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser(prog="bench/run.sh", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=os.path.join(REPO, "bench", "benchmarks.toml"))
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
    return ap.parse_args()


def do_compare(args, suite, cur):
    with open(args.compare) as f:
        base = json.load(f)
    wt = args.threshold if args.threshold is not None else float(suite.get("walltime_threshold_pct", 15))
    mem = args.threshold if args.threshold is not None else float(suite.get("memory_threshold_pct", 5))
    text, flagged, worse = compare(base, cur, wt, mem)
    print(f"\n## Change against {args.compare}\n\n"
          f"- then: {base.get('date', '?')}, {base.get('memtrack', {}).get('version', '?')} "
          f"(git {base.get('memtrack', {}).get('git') or '?'}), {base.get('machine', {}).get('cpu', '?')}\n"
          f"- now:  {cur.get('date', '?')}, {cur.get('memtrack', {}).get('version', '?')} "
          f"(git {cur.get('memtrack', {}).get('git') or '?'}), {cur.get('machine', {}).get('cpu', '?')}\n")
    print(text)
    print(f"{flagged} row(s) beyond the threshold (walltime ±{wt:g}%, memory ±{mem:g}%), {worse} of them worse"
          + ("" if args.fail_on_change else "; informational only"))
    return 3 if worse and args.fail_on_change else 0


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
    failed = [r for r in result["walltime"] + result["memory"] if r["status"] == "failed" and not r.get("optional")]
    status = 1 if failed else 0
    if args.compare:
        status = do_compare(args, suite, result) or status
    return status


def main():
    args = parse_args()
    cfg, suite, benches, variants = load_config(args.config)
    with open(args.config, "rb") as f:
        config_sha256 = hashlib.sha256(f.read()).hexdigest()

    if args.merge:
        return do_merge(args, suite)
    if args.compare and args.results:
        with open(args.results) as f:
            return do_compare(args, suite, json.load(f))

    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in {b["name"] for b in benches}]
        if unknown:
            sys.exit(f"bench: unknown benchmark(s) {','.join(unknown)}; have {','.join(b['name'] for b in benches)}")
        benches = [b for b in benches if b["name"] in want]
    baseline_variant = next((v for v in variants if v.get("kind") == "baseline"), None)
    if args.variant:
        want = args.variant.split(",")
        unknown = [w for w in want if w not in {v["name"] for v in variants}]
        if unknown:
            sys.exit(f"bench: unknown variant(s) {','.join(unknown)}; have {','.join(v['name'] for v in variants)}")
        variants = [v for v in variants if v["name"] in want or v.get("kind") == "baseline"]
    if args.no_peers:
        variants = [v for v in variants if v.get("kind") != "peer"]
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
                print(f"{mode} {bench} {v['name']}")
        return 0
    if not os.access(args.memtrack, os.X_OK):
        sys.exit(f"bench: {args.memtrack} not found; run make first")
    if args.mode != "memory" and not shutil.which("hyperfine") and not args.smoke:
        sys.exit("bench: hyperfine not found; run scripts/bootstrap.sh (Debian package hyperfine)")
    if args.mode != "walltime" and not os.access(GNU_TIME, os.X_OK):
        sys.exit("bench: /usr/bin/time not found; run scripts/bootstrap.sh (Debian package time)")

    t_start = time.monotonic()
    ctx = Ctx()
    ctx.suite, ctx.variants, ctx.smoke = suite, variants, args.smoke
    ctx.costs = costs
    ctx.stable_pct = float(suite.get("stable_pct", 3))
    ctx.row_budget_s = float(suite.get("row_budget_s", 3))
    ctx.heavy_round_s = float(suite.get("heavy_round_s", 1))
    ctx.peer_once_spread_pct = float(suite.get("peer_once_spread_pct", 5))
    ctx.memory_jobs = max(1, min(int(suite.get("memory_jobs", 2)), os.cpu_count() or 1))
    name, _, value = RUN_TOKEN.partition("=")
    os.environ[name] = value  # marks the suite's reapers (wait_for_reapers)
    ctx.baseline_variant = baseline_variant or {"name": "untracked", "kind": "baseline", "command": "{workload}"}
    ctx.memtrack = os.path.abspath(args.memtrack)
    ctx.fixtures = os.path.join(os.path.dirname(ctx.memtrack), "fixtures")
    ctx.runs_override = args.runs
    ctx.peer_timeout = int(suite.get("peer_timeout_s", 60))
    ctx.workload_rss = {}
    ctx.loads, ctx.foreign, ctx.foreign_rows = [], set(), 0
    scratch_root = pick_scratch(suite.get("scratch", "auto"))
    os.makedirs(scratch_root, exist_ok=True)
    ctx.scratch = tempfile.mkdtemp(prefix="memtrack-bench.", dir=scratch_root)
    ctx.artifacts = os.path.join(ctx.scratch, "artifacts")
    os.makedirs(ctx.artifacts)
    status = 0
    try:
        # Snapshot the binaries: a rebuild during the run must not change
        # (or break) what is measured.
        bindir = os.path.join(ctx.scratch, "bin")
        os.makedirs(bindir)
        for attempt in range(5):  # a concurrent `make` may be relinking it
            shutil.copy2(ctx.memtrack, os.path.join(bindir, "memtrack"))
            if tool_version([os.path.join(bindir, "memtrack"), "--version"]):
                break
            time.sleep(2)
        else:
            sys.exit(f"bench: {ctx.memtrack} --version fails; rebuild with make")
        # the in-process heap path's library (--fast) lives beside the binary
        fastlib = os.path.join(os.path.dirname(os.path.abspath(args.memtrack)), "libmemtrack-fast.so")
        if os.path.exists(fastlib):
            shutil.copy2(fastlib, os.path.join(bindir, "libmemtrack-fast.so"))
        if os.path.isdir(ctx.fixtures):
            shutil.copytree(ctx.fixtures, os.path.join(bindir, "fixtures"))
        ctx.memtrack, ctx.fixtures = os.path.join(bindir, "memtrack"), os.path.join(bindir, "fixtures")
        helptext = subprocess.run([ctx.memtrack, "track", "--help"], capture_output=True, text=True)
        ctx.track_options = set(re.findall(r"--[a-z][a-z0-9-]*", helptext.stdout + helptext.stderr))
        version = tool_version([ctx.memtrack, "--version"])
        inputs_dir = os.path.join(ctx.scratch, "inputs")
        os.makedirs(inputs_dir)
        by_mode = {m: [b for b in benches if (m, b["name"]) in units] for m in ("walltime", "memory")}
        needed = {n for m in by_mode for b in by_mode[m]
                  for n in re.findall(r"\{input:([A-Za-z0-9_]+)\}", b["command"])}
        ctx.inputs = make_inputs(cfg, needed, inputs_dir)  # before any measured round

        walltime = run_walltime(ctx, by_mode["walltime"])
        memory = run_memory(ctx, by_mode["memory"])
    finally:
        if args.keep:
            log(f"bench: scratch kept in {ctx.scratch}")
        else:
            shutil.rmtree(ctx.scratch, ignore_errors=True)

    result = {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "memtrack": {"path": os.path.abspath(args.memtrack), "version": version,
                     "git": git_describe(), "physical_supported": "--physical" in ctx.track_options},
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
        "order": {"benchmarks": [b["name"] for b in benches], "variants": [v["name"] for v in variants]},
        "scratch_fs": "tmpfs (/dev/shm)" if scratch_root == "/dev/shm" else scratch_root,
        "budget_s": suite.get("budget_s", 180),
        "peer_timeout_s": ctx.peer_timeout,
        "memory_jobs": ctx.memory_jobs,
        "suite_seconds": time.monotonic() - t_start,
        "load": {"loadavg_1min_min": min(ctx.loads, default=None), "loadavg_1min_max": max(ctx.loads, default=None),
                 "rows_with_foreign_tracers": ctx.foreign_rows, "foreign_tracers": sorted(ctx.foreign)},
        "walltime": walltime,
        "memory": memory,
    }
    if shard:
        result["shard"] = shard
    stem = "smoke" if args.smoke else "results"
    jpath = os.path.join(args.out, stem + ".json")
    mpath = write_result(result, jpath)
    log(f"bench: wrote {os.path.relpath(mpath)} and {os.path.relpath(jpath)}; "
        f"suite took {result['suite_seconds']:.0f} s")
    full = not (args.smoke or shard or args.only or args.variant or args.no_peers or args.runs) and args.mode == "all"
    if full and os.path.abspath(args.config) == os.path.join(REPO, "bench", "benchmarks.toml"):
        write_costs(COSTS_PATH, result, costs)
        log(f"bench: refreshed {os.path.relpath(COSTS_PATH)} (the shards' balance; commit it with the results)")
    if not args.smoke and result["suite_seconds"] > result["budget_s"]:
        log(f"bench: warning: over the {result['budget_s']} s budget")

    failed = [r for r in walltime + memory if r["status"] == "failed" and not r.get("optional")]
    if failed:
        log(f"bench: {len(failed)} benchmark(s) failed: "
            + ", ".join(f"{r['benchmark']}/{r['variant']}" for r in failed))
        status = 1
    if args.compare:
        status = do_compare(args, suite, result) or status
    return status


if __name__ == "__main__":
    sys.exit(main())
