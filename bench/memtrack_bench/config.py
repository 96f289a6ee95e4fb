# SPDX-License-Identifier: MIT
"""The suite's configuration (bench/benchmarks.toml), typed.

load_config() checks the file and returns a Config: the [suite] settings
(Suite), the [inputs] (Input), the [[benchmark]]s (Benchmark) and the
[[variant]]s (Variant), in file order.  A key the file has and these
classes do not is an error (a typo would otherwise be ignored)."""
import dataclasses
import os
import re
import sys
import tomllib
import typing
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_PATH = os.path.join(REPO, "bench", "benchmarks.toml")
COSTS_PATH = os.path.join(REPO, "bench", "costs.json")
GNU_TIME = "/usr/bin/time"
KINDS = ("baseline", "memtrack", "peer")
INPUT_RE = r"\{input:([A-Za-z0-9_]+)\}"


@dataclass(frozen=True)
class Suite:
    """[suite]: how rows are run (README "Benchmarks" says what each means)."""
    warmup: int = 1                  # walltime warm-up rounds
    runs: int = 5                    # walltime rounds, at least
    max_runs: int = 10               # ... and at most
    stable_pct: float = 3.0          # a row stops once its last round moved the median by this much
    row_budget_s: float = 3.0        # ... or once it has spent this (after 3 rounds)
    heavy_round_s: float = 1.0       # a row whose round took this long: no warm-up, 2 rounds at least
    peer_warmup: int = 1             # heaptrack / massif rows: warm-up rounds
    peer_runs: int = 3               # ... rounds, at least
    peer_once_spread_pct: float = 5.0  # ... once when their last spread was within this
    peer_timeout_s: int = 60         # a peer's round is stopped after this
    memory_rounds: int = 1           # memory rows: rounds (the highest RSS is kept)
    memory_jobs: int = 2             # memory rows run at a time (at most the CPUs)
    outer_options: str = "-q"        # the outer memtrack's options (memory rows)
    walltime_threshold_pct: float = 15.0  # --compare flags a walltime row beyond this
    memory_threshold_pct: float = 5.0     # ... a memory row
    budget_s: int | float = 180      # the suite's time budget (a warning when over)
    scratch: str = "auto"            # inputs and artifacts: a directory, or auto (/dev/shm if it has room)


@dataclass(frozen=True)
class Input:
    """[inputs.NAME]: a file made before any measured round."""
    name: str
    kind: str                        # file (size_mib zero MiB), tar (of source) or tree (source's shape)
    size_mib: int = 64
    source: str = ""


@dataclass(frozen=True)
class Benchmark:
    """[[benchmark]]: one workload; its own runs/warm-ups override [suite]'s."""
    name: str
    command: str                     # {fixtures}, {repo}, {fresh}, {cc1}, {memtrack}, {input:NAME}
    label: str = ""                  # the tables' name (default: name)
    variants: str = ""               # comma-separated: runs under these variants only (default: all)
    records: str = ""                # the Records cell of its rows (default: the variant's)
    children: bool = False           # the workload forks children (gcc)
    warmup: int | None = None
    runs: int | None = None
    max_runs: int | None = None
    peer_warmup: int | None = None
    peer_runs: int | None = None

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", self.name)

    @property
    def inputs(self):
        return re.findall(INPUT_RE, self.command)

    def runs_under(self, variant):
        if not self.variants:
            return not variant.named_only
        return variant.name in self.variants.split(",")


@dataclass(frozen=True)
class Variant:
    """[[variant]]: how a workload runs (untracked, under memtrack, a peer)."""
    name: str
    command: str                     # {workload}, {memtrack}, {artifact}
    kind: str = "memtrack"           # baseline, memtrack or peer
    label: str = ""                  # the tables' name (default: name)
    records: str = ""                # what it records (the Records column)
    optional: bool = False           # a failure is "did not run", not a failed suite
    follows_children: bool | None = None  # False: records the first process only
    requires_option: str | None = None    # n/a unless `memtrack track --help` has it
    requires_program: str | None = None   # n/a unless on PATH
    named_only: bool = False         # runs only under a benchmark whose variants = names it
    daemon: bool = False             # through the `memtrack daemon` the run starts ({daemon}: its
                                     # socket); walltime only (memory mode would measure the client)

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", self.name)


UNTRACKED = Variant(name="untracked", kind="baseline", command="{workload}")


@dataclass(frozen=True)
class Config:
    path: str
    suite: Suite
    inputs: dict = field(default_factory=dict)       # name -> Input
    benchmarks: list = field(default_factory=list)   # [Benchmark], file order
    variants: list = field(default_factory=list)     # [Variant], file order

    @property
    def baseline(self):
        """The untracked variant (the overheads' denominator)."""
        return next((v for v in self.variants if v.kind == "baseline"), None)


def mode_variants(mode, variants, bench=None):
    """The variants a mode runs (of @bench's, if given): all for walltime,
    memtrack's for memory."""
    return [v for v in variants if (mode == "walltime" or (v.kind == "memtrack" and not v.daemon))
            and (bench is None or bench.runs_under(v))]


def _accepts(t, value):
    """Whether @value fits the annotation @t (int, float, str, bool, or a
    union of them with None): a float field takes an int too, and only a
    bool field takes a bool (in Python a bool is an int)."""
    args = typing.get_args(t) or (t,)
    types = [a for a in args if a is not type(None)]
    if value is None:
        return len(types) < len(args)
    if isinstance(value, bool):
        return bool in types
    return any(isinstance(value, (int, float) if a is float else a) for a in types)


def _typed(cls, what, raw, errors, **extra):
    """cls(**extra, **raw), floats as floats; a key cls lacks or a value of
    the wrong type is added to @errors (and None returned)."""
    fields = {f.name: f.type for f in dataclasses.fields(cls) if f.name not in extra}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        errors.append(f"{what}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
        return None
    bad = [f"{k} = {v!r}" for k, v in raw.items() if not _accepts(fields[k], v)]
    if bad:
        errors.append(f"{what}: wrong type: {', '.join(bad)}")
        return None
    return cls(**extra, **{k: float(v) if fields[k] is float else v for k, v in raw.items()})


def load_config(path):
    """The checked configuration in @path; exits with one line naming every
    problem when it is not usable."""
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
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
        if v.get("kind", "memtrack") not in KINDS:
            errors.append(f"variant '{v.get('name')}': kind must be baseline, memtrack or peer")
    if sum(1 for v in variants if v.get("kind") == "baseline") > 1:
        errors.append("at most one variant may have kind = \"baseline\"")
    names = {v.get("name") for v in variants}
    for b in benches:
        unknown = [n for n in str(b.get("variants", "")).split(",") if n and n not in names]
        if unknown:
            errors.append(f"benchmark '{b.get('name')}': variants = unknown variant(s) {','.join(unknown)}")
        for name in re.findall(INPUT_RE, b.get("command", "")):
            if name not in cfg.get("inputs", {}):
                errors.append(f"benchmark '{b['name']}' uses {{input:{name}}} but there is no [inputs.{name}]")
    if not errors:
        suite = _typed(Suite, "[suite]", cfg.get("suite", {}), errors)
        inputs = {n: _typed(Input, f"[inputs.{n}]", spec, errors, name=n) for n, spec in cfg.get("inputs", {}).items()}
        benches = [_typed(Benchmark, f"benchmark '{b['name']}'", b, errors) for b in benches]
        variants = [_typed(Variant, f"variant '{v['name']}'", v, errors) for v in variants]
    if errors:
        sys.exit("bench: " + path + ": " + "; ".join(errors))
    return Config(path=path, suite=suite, inputs=inputs, benchmarks=benches, variants=variants)
