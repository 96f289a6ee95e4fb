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
import datetime
import functools
import json
import os
import platform
import re
import shlex
import shutil
import signal
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


def wait_for_reapers(limit_s=10.0):
    """A finished memtrack leaves a memtrack-reaper closing its links and BPF
    objects (the kernel's grace periods): the next row waits for it, so it
    does not pay for the last one's teardown."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            # comm in parentheses, then the state: a zombie has closed everything
            busy = "(memtrack-reaper)" in st and st[st.rindex(")") + 2] != "Z"
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

def walltime_row(ctx, bench, variant):
    kind = variant.get("kind", "memtrack")
    peer = kind == "peer"
    row = {"benchmark": bench["name"], "variant": variant["name"], "label": variant.get("label", variant["name"]),
           "kind": kind, "optional": bool(variant.get("optional")), "status": "ok", "note": ""}
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

    if peer:
        warmup = int(bench.get("peer_warmup", ctx.suite.get("peer_warmup", 1)))
        runs = int(bench.get("peer_runs", ctx.suite.get("peer_runs", 3)))
    else:
        warmup = int(bench.get("warmup", ctx.suite.get("warmup", 1)))
        runs = int(bench.get("runs", ctx.suite.get("runs", 5)))
    if ctx.runs_override:
        runs = ctx.runs_override
    runs = max(runs, 2)  # hyperfine needs two runs for a spread
    export = os.path.join(ctx.artifacts, f"hf.{bench['name']}.{variant['name']}.json")
    hf = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
          "--export-json", export]
    if fresh:
        hf += ["--prepare", "sh -c " + shlex.quote(f"rm -rf {shlex.quote(fresh)} && mkdir -p {shlex.quote(fresh)}")]
    hf.append(shlex.join(argv))
    per_round = (ctx.peer_timeout + 10) if peer else 600
    try:
        r = subprocess.run(hf, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, errors="replace", timeout=per_round * (warmup + runs) + 30)
        hf_rc, hf_err = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        hf_rc, hf_err = None, "hyperfine did not finish"
    row.update(runs=runs, warmup=warmup)
    if hf_rc != 0:
        # hyperfine stops at the first failing round; rerun once to say why
        rc, _, err = run_once(argv, fresh, per_round)
        why = describe_rc(rc, ctx.peer_timeout if peer else None) if rc else last_line(hf_err)
        detail = why_line(err, kind, rc) if rc else ""
        row.update(status="failed", note=why + (f": {detail}" if detail else ""))
        return row
    with open(export) as f:
        res = json.load(f)["results"][0]
    row.update(median_s=res["median"], mean_s=res["mean"], stddev_s=res.get("stddev"),
               min_s=res["min"], max_s=res["max"], times=res.get("times", []),
               user_s=res.get("user"), system_s=res.get("system"))
    return row


def run_walltime(ctx):
    rows = []
    for bench in ctx.benches:
        baseline = None
        for variant in ctx.variants:
            note_machine(ctx)
            t0 = time.monotonic()
            row = walltime_row(ctx, bench, variant)
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


def run_memory(ctx):
    rows = []
    for bench in ctx.benches:
        for variant in ctx.variants:
            if variant.get("kind") != "memtrack":
                continue
            note_machine(ctx)
            t0 = time.monotonic()
            row = memory_row(ctx, bench, variant)
            rows.append(row)
            if row["status"] == "ok":
                msg = (f"peak RSS {fmt_bytes(row['peak_rss_bytes'])}, heap {fmt_count(row['heap_alloc_count'])} allocs"
                       f" / {fmt_bytes(row['heap_total_bytes'])} / peak {fmt_bytes(row['heap_peak_bytes'])}")
            else:
                msg = f"{row['status'].upper()}: {row['note']}"
            log(f"bench: memory   {bench['name']:<6} {row['label']:<26} {msg}  [{time.monotonic() - t0:.1f} s]")
    return rows


# ----------------------------------------------------------------- output

def status_cell(row):
    if row["status"] == "n/a":
        return row["note"]
    if row["status"] == "failed":
        return f"**FAILED** ({row['note']})" if not row.get("optional") else f"did not run ({row['note']})"
    return None


def markdown(result):
    m, out = result["machine"], []
    smoke = result["smoke"]
    out.append(f"# memtrack overhead benchmarks{' (smoke: one run each, no statistics)' if smoke else ''}")
    out.append("")
    out.append(f"- Date: {result['date']}")
    out.append(f"- Machine: {m['cpu']}, {m['nproc']} CPUs, {m['mem_gib']} GiB RAM; kernel {m['kernel']}; {m['distro']}")
    out.append(f"- {result['memtrack']['version'] or 'memtrack ?'} (git {result['memtrack']['git'] or '?'}); "
               f"`--physical` {'supported' if result['memtrack']['physical_supported'] else 'not supported by this build'}")
    tools = result["tools"]
    out.append(f"- Peers: {tools.get('heaptrack') or 'heaptrack ?'}; {tools.get('valgrind') or 'valgrind ?'}; "
               f"timing: {tools.get('hyperfine') or 'hyperfine ?'}")
    out.append(f"- Suite: `{result['invocation']}`, {result['suite_seconds']:.0f} s in all "
               f"(budget {result['budget_s']} s); inputs on {result['scratch_fs']}")
    ld = result["load"]
    if ld["loadavg_1min_max"] is not None:
        line = (f"- Load: 1-minute load average {ld['loadavg_1min_min']:.2f}–{ld['loadavg_1min_max']:.2f} "
                f"over the run ({m['nproc']} CPUs)")
        if ld["rows_with_foreign_tracers"]:
            line += (f"; **other tracers were running** before {ld['rows_with_foreign_tracers']} row(s) "
                     f"({', '.join(ld['foreign_tracers'][:6])}): their probes fire machine-wide, so timings "
                     "are inflated")
        out.append(line)
    if result["walltime"]:
        out.append("")
        out.append("## Wall time")
        out.append("")
        if smoke:
            out.append("One run of each command, no warm-up and no statistics: this checks that every benchmark "
                       "runs; its times are not measurements.")
        else:
            out.append("Median of the measured rounds (after a warm-up round); spread is the standard deviation "
                       "and min–max; overhead is the row's median divided by the untracked workload's median from "
                       "the same run.  Rounds: measured+warm-up.  Peers (heaptrack, massif) run fewer rounds, each "
                       f"limited to {result['peer_timeout_s']} s (a round that runs out fails the row instead of "
                       "being timed).")
        out.append("")
        out.append("| Benchmark | Variant | Median | Spread (σ; min–max) | Overhead | Rounds |")
        out.append("|---|---|---:|---:|---:|---:|")
        for r in result["walltime"]:
            cell = status_cell(r)
            if cell:
                out.append(f"| {r['benchmark']} | {r['label']} | {cell} | | | |")
                continue
            spread = "—" if r.get("stddev_s") is None else (
                f"±{fmt_time(r['stddev_s'])}; {fmt_time(r['min_s'])}–{fmt_time(r['max_s'])}")
            ov = "1.00× (baseline)" if r["kind"] == "baseline" else (
                f"{r['overhead']:.2f}×" if r.get("overhead") else "")
            out.append(f"| {r['benchmark']} | {r['label']} | {fmt_time(r['median_s'])} | {spread} | {ov} | "
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
                    help="with --compare: compare this existing file instead of running the suite")
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


def main():
    args = parse_args()
    cfg, suite, benches, variants = load_config(args.config)

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
    if not os.access(args.memtrack, os.X_OK):
        sys.exit(f"bench: {args.memtrack} not found; run make first")
    if args.mode != "memory" and not shutil.which("hyperfine") and not args.smoke:
        sys.exit("bench: hyperfine not found; run scripts/bootstrap.sh (Debian package hyperfine)")
    if args.mode != "walltime" and not os.access(GNU_TIME, os.X_OK):
        sys.exit("bench: /usr/bin/time not found; run scripts/bootstrap.sh (Debian package time)")

    t_start = time.monotonic()
    ctx = Ctx()
    ctx.suite, ctx.benches, ctx.variants, ctx.smoke = suite, benches, variants, args.smoke
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
        needed = {n for b in benches for n in re.findall(r"\{input:([A-Za-z0-9_]+)\}", b["command"])}
        ctx.inputs = make_inputs(cfg, needed, inputs_dir)  # before any measured round

        walltime = run_walltime(ctx) if args.mode in ("all", "walltime") else []
        memory = run_memory(ctx) if args.mode in ("all", "memory") else []
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
        "scratch_fs": "tmpfs (/dev/shm)" if scratch_root == "/dev/shm" else scratch_root,
        "budget_s": suite.get("budget_s", 180),
        "peer_timeout_s": ctx.peer_timeout,
        "suite_seconds": time.monotonic() - t_start,
        "load": {"loadavg_1min_min": min(ctx.loads, default=None), "loadavg_1min_max": max(ctx.loads, default=None),
                 "rows_with_foreign_tracers": ctx.foreign_rows, "foreign_tracers": sorted(ctx.foreign)},
        "walltime": walltime,
        "memory": memory,
    }
    os.makedirs(args.out, exist_ok=True)
    stem = "smoke" if args.smoke else "results"
    jpath, mpath = os.path.join(args.out, stem + ".json"), os.path.join(args.out, stem + ".md")
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    md = markdown(result)
    with open(mpath, "w") as f:
        f.write(md)
    print(md)
    log(f"bench: wrote {os.path.relpath(mpath)} and {os.path.relpath(jpath)}; "
        f"suite took {result['suite_seconds']:.0f} s")
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
