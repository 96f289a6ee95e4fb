# SPDX-License-Identifier: MIT
"""bench/run.sh as CI runs it (issue 23): --shard K/N splits the suite into
disjoint parts that cover it, --merge joins the parts' results into what a
whole run writes, and refuses parts of different commits or configurations.
The runs are real (--smoke: every command once, as CI runs it) on a slice of
the suite, to keep the test short."""
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

from mtlib import MEMTRACK, REPO, check_eq, check_true, require_eq, run

sys.path.insert(0, str(REPO / "bench"))
from memtrack_bench import shards  # noqa: E402  (found through the path above)
from memtrack_bench.config import COSTS_PATH, CONFIG_PATH, Benchmark, Suite, Variant, load_config  # noqa: E402
from memtrack_bench.walltime import Pace, median_stable, paced, round_plan  # noqa: E402

RUN_SH = str(REPO / "bench" / "run.sh")
SLICE = ["--smoke", "--only", "ls,alloc"]


def listed(*opts):
    p = run([RUN_SH, "--list"] + list(opts))
    require_eq(p.rc, 0, "bench/run.sh --list %s: %s" % (" ".join(opts), p.stderr))
    return p.stdout.splitlines()


def test_bench_shards_disjoint_and_cover(tmp):
    for mode in ("all", "walltime", "memory"):
        whole = listed("--mode", mode)
        check_true(len(whole) == len(set(whole)) and whole, "--mode %s lists each row once" % mode)
        for n in range(1, 5):
            parts = [listed("--mode", mode, "--shard", "%d/%d" % (k, n)) for k in range(1, n + 1)]
            seen = [row for part in parts for row in part]
            check_eq(sorted(seen), sorted(whole), "--mode %s: the %d shards' rows are the whole suite's" % (mode, n))
            check_eq(len(seen), len(set(seen)), "--mode %s: the %d shards are disjoint" % (mode, n))
            check_true(all(parts), "--mode %s: none of %d shards is empty" % (mode, n))
    # balanced by the committed costs: within 20% for 2 and 3 shards
    config = load_config(CONFIG_PATH)
    costs = shards.load_costs(COSTS_PATH)
    check_true(costs, "bench/costs.json has the rows' costs")
    for n in (2, 3):
        units = shards.suite_units(["walltime", "memory"], config.benchmarks, config.variants)
        _, load = shards.shard_units(units, costs, config.variants, n, config.benchmarks)
        check_true(max(load) <= 1.2 * min(load), "%d shards balanced within 20%%: %s" % (n, load))
    p = run([RUN_SH, "--list", "--shard", "4/3"])
    check_eq((p.rc, p.stderr.count("\n"), "--shard 4/3" in p.stderr), (1, 1, True),
             "--shard 4/3 is refused with one line: %r" % p.stderr)


def smoke(tmp, name, *opts):
    out = tmp / name
    p = run([RUN_SH, "--memtrack", MEMTRACK, "--out", out] + SLICE + list(opts), timeout=600)
    require_eq(p.rc, 0, "bench/run.sh %s %s: %s" % (" ".join(SLICE), " ".join(opts), p.stderr[-2000:]))
    return out / "smoke.json"


def merge(tmp, name, *parts):
    out = tmp / name / "smoke.json"
    p = run([RUN_SH, "--merge"] + list(parts) + ["--results", out])
    return p, out


def rows(path):
    r = json.loads(path.read_text())
    return [(m, x["benchmark"], x["variant"], x["label"], x["status"], x.get("records"))
            for m in ("walltime", "memory") for x in r[m]]


def table_rows(md_path):
    """The tables' first three cells of every row (benchmark, variant,
    records or peak RSS's absence aside): what a reader compares."""
    return [tuple(c.strip() for c in line.split("|")[1:3])
            for line in md_path.read_text().splitlines() if re.match(r"\| (ls|alloc) \|", line)]


def test_bench_merge_equals_whole_smoke(tmp):
    whole = smoke(tmp, "whole")
    s1, s2 = smoke(tmp, "s1", "--shard", "1/2"), smoke(tmp, "s2", "--shard", "2/2")
    w1, w2 = (smoke(tmp, "w%d" % k, "--mode", "walltime", "--shard", "%d/2" % k) for k in (1, 2))
    mem = smoke(tmp, "mem", "--mode", "memory")
    for what, parts in (("--shard 1/2 + 2/2", [s2, s1]), ("walltime 1/2 + 2/2 + memory", [w1, mem, w2])):
        p, out = merge(tmp, "m" + str(len(parts)), *parts)
        require_eq(p.rc, 0, "merge of %s: %s" % (what, p.stderr))
        check_eq(rows(out), rows(whole), "merge of %s: the whole run's rows, in its order" % what)
        md = out.with_suffix(".md")
        check_eq(table_rows(md), table_rows(whole.with_suffix(".md")), "merge of %s: the tables' rows" % what)
        text = md.read_text()
        for part in parts:
            sh = json.loads(part.read_text()).get("shard") or {"k": 1, "n": 1}
            check_true("- Shard %d/%d (" % (sh["k"], sh["n"]) in text and "  - Machine: " in text,
                       "merge of %s: shard %d/%d's line and machine are kept" % (what, sh["k"], sh["n"]))


def test_bench_merge_refuses_mismatch(tmp):
    tiny = ["--only", "ls", "--variant", "rss", "--no-peers"]
    a, b = smoke(tmp, "a", *tiny, "--shard", "1/2"), smoke(tmp, "b", *tiny, "--shard", "2/2")
    other = smoke(tmp, "c", "--only", "ls", "--variant", "no-alloc", "--no-peers", "--shard", "2/2")
    p, _ = merge(tmp, "ok", a, b)
    check_eq(p.rc, 0, "the matching shards merge: %s" % p.stderr)

    def edited(name, change):
        r = json.loads(b.read_text())
        change(r)
        path = tmp / name
        path.write_text(json.dumps(r))
        return path

    commit = edited("commit.json", lambda r: r["memtrack"].update(git="0000000"))
    config = edited("config.json", lambda r: r.update(config_sha256="0" * 64))
    copy = tmp / "a-again.json"
    shutil.copy(a, copy)
    for what, parts, says in (("another commit", [a, commit], "commit"),
                              ("another benchmarks.toml", [a, config], "configuration"),
                              ("another --variant", [a, other], "selection"),
                              ("the same shard twice", [a, copy], "both"),
                              ("a shard missing", [a], "missing")):
        p, out = merge(tmp, "refused", *parts)
        check_eq(p.rc, 1, "merge of %s refused (exit status)" % what)
        check_true(p.stderr.startswith("bench: cannot merge: ") and p.stderr.count("\n") == 1
                   and says in p.stderr, "merge of %s: one line naming it: %r" % (what, p.stderr))
        check_eq(out.exists(), False, "merge of %s wrote nothing" % what)


def test_bench_rounds_rule(tmp):
    """Issue 23: rounds until the median is stable, between a minimum and a
    maximum; rows of heavy rounds without warm-up; a peer of small spread
    once (memtrack_bench.walltime's round_plan and median_stable, from
    bench/costs.json)."""
    check_eq(median_stable([1.0], 3), False, "one round is never stable")
    check_eq(median_stable([1.0, 1.02], 3), True, "two rounds 2% apart: stable at 3%")
    check_eq(median_stable([1.0, 1.2], 3), False, "two rounds 20% apart: not stable")
    check_eq(median_stable([1.0, 1.2, 1.01], 3), False, "a third round moved the median by 9%")
    check_eq(median_stable([1.0, 1.2, 1.01, 1.02], 3), True, "a fourth moved it by 0.5%")

    suite = Suite(warmup=1, runs=5, max_runs=10, peer_warmup=1, peer_runs=2, heavy_round_s=0.5,
                  peer_once_spread_pct=5.0)
    costs = {"walltime/w/cheap": {"round_s": 0.01, "spread_pct": 1.0},
             "walltime/w/heavy": {"round_s": 3.0, "spread_pct": 1.0},
             "walltime/w/calm": {"round_s": 3.0, "spread_pct": 4.0},
             "walltime/w/noisy": {"round_s": 3.0, "spread_pct": 30.0}}
    w = Benchmark(name="w", command="true")

    def plan(name, kind, runs_override=None):
        return round_plan(suite, costs, runs_override, w, Variant(name=name, kind=kind, command="{workload}"))
    check_eq(plan("cheap", "memtrack"), (1, 5, 10), "a cheap row: warm-up, 5..10 rounds")
    check_eq(plan("heavy", "memtrack"), (0, 2, 10), "a heavy row: no warm-up, 2..10 rounds")
    check_eq(plan("unknown", "memtrack"), (1, 5, 10), "a row the costs do not know: the config's")
    check_eq(plan("calm", "peer"), (0, 1, 1), "a peer of 4% spread: once")
    check_eq(plan("noisy", "peer"), (0, 2, 10), "a heavy peer of 30% spread: 2..10 rounds")
    check_eq(plan("heavy", "memtrack", 4), (1, 4, 4), "--runs 4: exactly 4 rounds after a warm-up")
    w3 = Benchmark(name="w", command="true", runs=3, peer_runs=1, max_runs=6)
    check_eq(round_plan(suite, {}, None, w3, Variant(name="x", command="{workload}")), (1, 3, 6),
             "a benchmark's own runs and max_runs override the suite's")
    check_eq(round_plan(suite, {}, None, w3, Variant(name="x", kind="peer", command="{workload}")), (1, 1, 6),
             "... and its peer_runs")


def test_bench_paced_when_behind_budget(tmp):
    """Issue 35: a suite behind its budget (the rows left, at the rate the
    rows so far ran against their costs, would end after it) runs the next
    rows at their minimum of rounds, at most 3, without warm-up, and so
    does every row after it; on time, as planned.  5% of the budget is kept
    for what no row's cost counts."""
    check_eq(paced((1, 5, 10)), (0, 3, 3), "a cheap row, paced")
    check_eq(paced((0, 2, 10)), (0, 2, 2), "a heavy row, paced")
    check_eq(paced((0, 1, 1)), (0, 1, 1), "a peer run once, paced")
    v = [Variant(name="untracked", kind="baseline", command="{workload}"), Variant(name="rss", command="x")]
    b = [Benchmark(name="w%d" % i, command="true") for i in range(4)]
    costs = {shards.cost_key(m, x.name, y.name): {"seconds": 10.0} for x in b for y in v for m in ("walltime", "memory")}
    run_ = types.SimpleNamespace(costs=costs, variants=v, deadline=None)
    pace = Pace(run_, b)
    check_eq((pace.left, pace.memory), (80.0, 40.0), "the costs of the rows left (walltime, memory)")
    check_eq(pace.behind(), False, "no budget (--smoke, --runs): never behind")
    run_.deadline = pace.t0 + 180
    check_eq(pace.behind(pace.t0), False, "before a rate is known: not behind")
    pace.ran(b[0], v[0])
    pace.ran(b[0], v[1])  # 20 s of costs done, 100 left
    check_eq(pace.behind(pace.t0 + 20), False, "at the costs' rate: 100 s left of 151 (160 less the 5% margin)")
    check_eq(pace.behind(pace.t0 + 30), True, "1.5 times slower: 150 s left of 150, of which the margin "
             "keeps 9 s")
    pace.ran(b[1], v[0])  # 30 s of costs done, 90 left
    check_eq(pace.behind(pace.t0 + 30), True, "back at the costs' rate (90 s left of 141), still paced: "
             "once behind, the rest of the suite is")


def test_bench_config_is_checked(tmp):
    """A benchmarks.toml key the typed configuration does not know, or a
    value of the wrong type, is refused with one line naming it (a typo
    would otherwise be ignored)."""
    good = (REPO / "bench" / "benchmarks.toml").read_text()
    for what, text, says in (("a misspelt [suite] key", good.replace("max_runs = 10", "max_rnus = 10"),
                              "[suite]: unknown key(s) max_rnus"),
                             ("a string for a number", good.replace("runs = 5", 'runs = "5"'),
                              "[suite]: wrong type: runs = '5'"),
                             ("a misspelt variant key", good.replace("optional = true", "optinal = true"),
                              "variant 'massif': unknown key(s) optinal")):
        path = tmp / "benchmarks.toml"
        path.write_text(text)
        p = run([RUN_SH, "--list", "--config", path])
        check_eq((p.rc, p.stdout, p.stderr.count("\n")), (1, "", 1), "%s: refused, one line" % what)
        check_true(p.stderr.startswith("bench: %s: " % path) and says in p.stderr,
                   "%s: the line names it: %r" % (what, p.stderr))


def test_bench_named_only_variant():
    """A named_only variant (--no-python-frames, issue 37) runs under the
    benchmark that names it (py_json) and under no other; the other
    variants py_json names run there too."""
    rows = [r.split() for r in listed("--mode", "walltime")]
    check_eq(sorted(b for _, b, v in rows if v == "no-python-frames"), ["py_json"],
             "benchmarks run under no-python-frames")
    check_eq([v for _, b, v in rows if b == "py_json"],
             ["untracked", "rss", "stacks", "no-python-frames", "heaptrack"], "py_json's variants")
    check_eq(len([1 for _, b, v in rows if b == "dd"]),
             len([v for v in load_config(str(CONFIG_PATH)).variants if not v.named_only]),
             "dd runs under every variant that is not named_only")
    check_eq(sorted(b for _, b, v in rows if v == "daemon"), ["ls", "true"],
             "benchmarks run through the daemon (issue 36)")
    memory = [r.split() for r in listed("--mode", "memory")]
    check_eq([b for _, b, v in memory if v == "daemon"], [],
             "no memory row through the daemon (it would measure the client)")
    check_true(any(b == "ls" for _, b, v in memory), "ls has memory rows")


def test_bench_memory_rows_name_tables_and_bytes_per_event(tmp):
    """A memory row says the kernel memory of the inner run's unwind tables
    (its report's stack_table_bytes: a number with --stacks, none without)
    and the inner artifact's bytes per event, in the JSON and the table."""
    out = smoke(tmp, "tables", "--only", "ls", "--variant", "stacks,rss", "--no-peers",
                "--mode", "memory")
    mem = {r["variant"]: r for r in json.loads(out.read_text())["memory"]}
    require_eq(sorted(mem), ["rss", "stacks"], "memory rows")
    for v in ("rss", "stacks"):
        r = mem[v]
        require_eq(r["status"], "ok", "%s row's status (%s)" % (v, r.get("note")))
        check_true(r["artifact_bytes"] > 0 and r["inner_events"] > 0, "%s: artifact and events" % v)
        check_eq(r["artifact_bytes_per_event"], r["artifact_bytes"] / r["inner_events"],
                 "%s: bytes per event" % v)
    check_eq(mem["rss"]["table_kernel_bytes"], None, "no tables without --stacks")
    check_true(0 < mem["stacks"]["table_kernel_bytes"] < 16 << 20,
               "the stacks row's tables: %r" % mem["stacks"]["table_kernel_bytes"])
    md = out.with_suffix(".md").read_text()
    check_true("| Tables (kernel) | B/event |" in md, "the memory table's columns")


def fresh_clone(tmp):
    """A clone of this tree's HEAD, as CI checks it out, with build/ the
    binaries of this build (symlinks in a real build/, which .gitignore
    ignores, so `git status` sees what a run writes to the tree)."""
    clone = tmp / "clone"
    p = run(["git", "clone", "-q", REPO, clone], timeout=300)
    require_eq(p.rc, 0, "git clone: %s" % p.stderr)
    build = clone / "build"
    build.mkdir()
    for name in ("memtrack", "libmemtrack-fast.so", "fixtures"):
        (build / name).symlink_to(Path(MEMTRACK).parent / name)
    return clone


def git_status(clone):
    p = run(["git", "-C", clone, "status", "--porcelain", "--ignored=no"])
    require_eq(p.rc, 0, "git status: %s" % p.stderr)
    return p.stdout


def test_bench_shard_merge_fresh_clone(tmp):
    """Issue 35: the CI flow, in a fresh clone: --smoke --shard K/N
    --results F for each K, then --merge of the Fs; every file where
    --results said, nothing under the clone's build/bench-results, the
    checkout clean."""
    clone = fresh_clone(tmp)
    out = tmp / "fb"
    sh = clone / "bench" / "run.sh"
    parts = []
    for k in (1, 2):
        part = out / ("s%d.json" % k)
        p = run([sh, "--smoke", "--only", "ls,alloc", "--shard", "%d/2" % k, "--results", part], timeout=600)
        require_eq(p.rc, 0, "shard %d/2: %s" % (k, p.stderr[-2000:]))
        check_true(part.exists() and part.with_suffix(".md").exists(), "shard %d/2 wrote %s and its .md" % (k, part))
        parts.append(part)
    merged = out / "merged.json"
    p = run([sh, "--merge"] + parts + ["--results", merged])
    require_eq(p.rc, 0, "merge: %s" % p.stderr)
    listed_rows = run([sh, "--list", "--only", "ls,alloc"]).stdout.splitlines()
    check_eq(sorted("%s %s %s" % r[:3] for r in rows(merged)), sorted(listed_rows),
             "the merged rows are the slice's rows")
    check_true(merged.with_suffix(".md").exists(), "the merge wrote its .md beside --results")
    check_eq(sorted(p.name for p in out.iterdir()), ["merged.json", "merged.md", "s1.json", "s1.md",
                                                     "s2.json", "s2.md"], "files written")
    check_eq((clone / "build" / "bench-results").exists(), False, "nothing in build/bench-results")
    check_eq(git_status(clone), "", "the checkout after the shards and the merge (git status)")


TINY = """
[suite]
runs = 2
max_runs = 2
warmup = 0
[[benchmark]]
name = "ls"
command = "ls /usr/bin"
[[variant]]
name = "untracked"
kind = "baseline"
command = "{workload}"
[[variant]]
name = "rss"
command = "{memtrack} track -q --no-stacks -o {artifact} -- {workload}"
"""


def test_bench_costs_beside_results(tmp):
    """Issue 35: a whole run writes the costs it measured beside its
    results, never into the tree; the next run's plan (here a shard's)
    reads them; --update-costs refuses a configuration that is not the
    committed one; the checkout stays clean."""
    clone = fresh_clone(tmp)
    sh = clone / "bench" / "run.sh"
    config = tmp / "tiny.toml"
    config.write_text(TINY)
    committed = (clone / "bench" / "costs.json").read_text()
    out = tmp / "whole"
    p = run([sh, "--config", config, "--results", out / "r.json", "--update-costs"], timeout=600)
    require_eq(p.rc, 0, "a whole run of %s: %s" % (config, p.stderr[-2000:]))
    costs = json.loads((out / "costs.json").read_text())["rows"]
    check_eq(sorted(costs), ["memory/ls/rss", "walltime/ls/rss", "walltime/ls/untracked"],
             "the costs measured, beside the results")
    check_true(all(c["seconds"] > 0 for c in costs.values()), "every row's cost measured: %s" % costs)
    check_true("--update-costs: the results are of" in p.stderr and "left as it is" in p.stderr,
               "--update-costs with another configuration says so: %r" % p.stderr[-600:])
    p = run([sh, "--config", config, "--results", out / "s1.json", "--shard", "1/2", "--smoke"], timeout=600)
    require_eq(p.rc, 0, "a shard after it: %s" % p.stderr[-2000:])
    used = json.loads((out / "s1.json").read_text())["shard"]["costs"]
    check_eq(used["file"], str(out / "costs.json"), "the shard's plan used the costs measured beside it")
    check_eq((clone / "bench" / "costs.json").read_text(), committed, "bench/costs.json untouched")
    check_eq(git_status(clone), "", "the checkout after a whole run (git status)")


def test_bench_sigterm_cleans_up(tmp):
    """A run ended by SIGTERM (a CI job's timeout) exits 143 and leaves no
    scratch: killed runs had left up to 8 GiB each in /dev/shm."""
    scratch = tmp / "scratch"
    config = tmp / "slow.toml"
    config.write_text(TINY.replace("[suite]\n", "[suite]\nscratch = \"%s\"\n" % scratch)
                      .replace('command = "ls /usr/bin"', 'command = "sleep 30"'))
    p = subprocess.Popen([REPO / "bench" / "run.sh", "--config", config, "--smoke",
                          "--results", tmp / "r.json"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30 and not (scratch.exists() and any(scratch.iterdir())):
        time.sleep(0.1)
    time.sleep(1)  # into the first round's sleep
    check_true(scratch.exists() and any(scratch.iterdir()), "the run's scratch was made")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    check_eq(p.returncode, 143, "the run's exit status after SIGTERM (stderr %r)" % err[-600:])
    check_eq(sorted(x.name for x in scratch.iterdir()), [], "what the run left in its scratch")
