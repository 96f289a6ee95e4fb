# SPDX-License-Identifier: MIT
"""Exactness on real programs, against an independent counter.

fixtures/libcount_heap.so is an LD_PRELOAD interposer that logs every
outermost call of the C allocator functions (and forwards it to libc with
dlsym(RTLD_NEXT)).  memtrack runs with it in its environment, so both count
the same run: per process of the tree, memtrack's records of each heap type
must equal the interposer's calls, in number and in bytes.  The interposer
is itself an allocator wrapper (malloc/free defined twice in every process),
so these runs also check that a wrapper's calls are counted once.

memtrack itself is preloaded too (it passes its environment on); its own
calls are logged under its pid, which is not in the tree, and left out.

Then the issue-25 measure: the counter run alone, without memtrack, against
memtrack's default path run in the same environment (ASLR off, hash seeds
fixed, and libcount_none.so, a do-nothing library of a name as long,
preloaded in the counter's place): per process, the same calls and bytes.
"""
import collections
import ctypes
import os
import subprocess
from pathlib import Path

import pytest

from mtlib import (BUILD, MEMTRACK, Artifact, Failure, check_eq, fixture,
                   heap, require, require_eq, tree_pids)

COUNTER = BUILD / "fixtures" / "libcount_heap.so"
NO_COUNTER = BUILD / "fixtures" / "libcount_none.so"  # as long a path: the same environment
SEEDS = {"PYTHONHASHSEED": "0", "PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}

C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; char name[24]; int v; };
static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
int main(int argc, char **argv)
{
	struct node *head = NULL;
	int xs[64];
	for (int i = 0; i < 64; i++) {
		struct node *n = malloc(sizeof(*n));
		snprintf(n->name, sizeof(n->name), "n%d", i);
		n->v = (i * 7919) % 64; n->next = head; head = n; xs[i] = n->v;
	}
	qsort(xs, 64, sizeof(int), cmp);
	while (head) { struct node *n = head->next; free(head); head = n; }
	return xs[0] + argc - 1;
}
"""


def interposer_counts(log, exclude_pid):
    """{pid: Counter{(type, 'n'|'bytes'): value}} from the interposer's log,
    each call mapped to the record memtrack makes of it (docs/METRICS.md)."""
    out = collections.defaultdict(collections.Counter)

    def add(pid, typ, size=0):
        out[pid][(typ, "n")] += 1
        out[pid][(typ, "bytes")] += size

    for line in Path(log).read_text().splitlines():
        f = line.split()
        pid, fn = int(f[0], 16), f[1]
        a0, a1, a2, ret = (int(x, 16) for x in f[2:6])
        if pid == exclude_pid:
            continue
        if fn == "malloc" and ret:
            add(pid, "malloc", a0)
        elif fn == "calloc" and ret:
            add(pid, "calloc", a0 * a1)
        elif fn in ("realloc", "reallocarray"):
            size = a1 if fn == "realloc" else a1 * a2
            if not a0:
                if ret:
                    add(pid, "malloc", size)
            elif ret:
                add(pid, "realloc", size)
            elif not size:
                add(pid, "free")
        elif fn == "free" and a0:
            add(pid, "free")
        elif fn in ("memalign", "aligned_alloc") and ret:
            add(pid, "aligned_alloc", a1)
        elif fn == "posix_memalign" and ret != (1 << 64) - 1:
            add(pid, "aligned_alloc", a2)
        elif fn in ("valloc", "pvalloc") and ret:
            add(pid, "aligned_alloc", a0)
    return out


def memtrack_counts(events):
    out = collections.defaultdict(collections.Counter)
    for e in heap(events):
        out[e["pid"]][(e["type"], "n")] += 1
        out[e["pid"]][(e["type"], "bytes")] += e.get("size", 0)
    return out


def run_counted(tmp, shell_cmd, cwd=None, timeout=120, opts=()):
    """Tracks `sh -c shell_cmd` (memtrack options opts) with the counter
    preloaded in memtrack's environment; returns (artifact, {pid: counts},
    {pid: counts})."""
    require(COUNTER.exists(), "%s is not built (make test builds it)" % COUNTER)
    out, log = Path(tmp) / "out.mtrk", Path(tmp) / "count.log"
    env = dict(os.environ, LD_PRELOAD=str(COUNTER), MT_COUNT_LOG=str(log))
    argv = [MEMTRACK, "track", "-q", "-o", str(out)] + list(opts)
    argv += ["--", "/bin/sh", "-c", shell_cmd]
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise Failure("timed out: %s" % shell_cmd)
    require_eq(p.returncode, 0, "memtrack's exit status (stderr: %s)" % err.strip())
    art = Artifact(out)
    return art, memtrack_counts(art.events), interposer_counts(log, p.pid)


def check_exact(tmp, shell_cmd, min_processes=1, cwd=None, opts=()):
    art, mine, theirs = run_counted(tmp, shell_cmd, cwd=cwd, opts=opts)
    pids = set(tree_pids(art.events))
    require(len(pids) >= min_processes, "processes recorded: %d, expected at least %d"
            % (len(pids), min_processes))
    check_eq(sorted(set(theirs) - pids), [],
             "processes the counter saw allocating that memtrack did not record")
    total = 0
    for pid in sorted(pids | set(theirs)):
        check_eq(dict(mine.get(pid, {})), dict(theirs.get(pid, {})),
                 "heap records of pid %d by (type, count/bytes)" % pid)
        total += sum(v for (t, k), v in theirs.get(pid, {}).items() if k == "n")
    require(total > 0, "the counter logged no call: is it preloaded?")
    return art


def test_exact_python(tmp):
    check_exact(tmp, "/usr/bin/python3 -c \"import json,collections; "
                "json.dumps([{'a': i, 'b': str(i)} for i in range(20000)]); "
                "collections.Counter(range(5000))\"")


def test_exact_perl(tmp):
    check_exact(tmp, "perl -e 'my %h; $h{$_} = [$_] for 1..20000'")


def test_exact_gcc(tmp):
    (Path(tmp) / "prog.c").write_text(C_SOURCE)
    art = check_exact(tmp, "gcc -O1 -c prog.c -o prog.o", min_processes=3, cwd=tmp)
    paths = [e["path"].rsplit("/", 1)[-1] for e in art.events if e["type"] == "exec"]
    for tool in ("cc1", "as"):
        check_eq(tool in paths, True, "%s was exec'd and recorded (%s)" % (tool, paths))


def test_exact_tar(tmp):
    check_exact(tmp, "tar -cf - /usr/include > /dev/null 2>&1")


def test_exact_git_log(tmp):
    repo = Path(tmp) / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-C", str(repo)]
    subprocess.run(git[:-2] + ["init", "-q", str(repo)], check=True)
    for i in range(12):
        (repo / ("f%d.txt" % (i % 4))).write_text("line %d\n" % i * (i + 3))
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "c%d" % i], check=True)
    check_exact(tmp, "git --no-pager -C %s log -p > /dev/null" % repo)


def test_exact_sort(tmp):
    data = Path(tmp) / "lines.txt"
    data.write_text("".join("%d\n" % ((i * 7919) % 100003) for i in range(100000)))
    check_exact(tmp, "sort %s > /dev/null" % data)


def test_exact_cxx_map_string(tmp):
    check_exact(tmp, fixture("cxx_map"))


def _no_aslr():
    """preexec_fn: ASLR off (setarch -R) without a setarch process of the tree."""
    ctypes.CDLL(None).personality(0x0040000)  # ADDR_NO_RANDOMIZE


def alone_env(preload=None, extra=None):
    """The caller's environment with the hash seeds fixed, TMPDIR=/tmp (the
    --fast socket's directory: a fixed length) and LD_PRELOAD=@preload."""
    env = dict(os.environ, TMPDIR="/tmp", **SEEDS)
    for k in ("LD_PRELOAD", "MEMTRACK_FAST_SOCKET", "MT_COUNT_LOG"):
        env.pop(k, None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    env.update(extra or {})
    return env


def run_alone(argv, env, cwd, timeout=180):
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, text=True, timeout=timeout, preexec_fn=_no_aslr)
    require_eq(p.returncode, 0, "exit status of %s (stderr: %s)" % (argv, p.stderr.strip()))
    return p.stdout


def counted_alone(tmp, shell_cmd, cwd=None):
    """`sh -c shell_cmd` without memtrack, ASLR off, the counter preloaded:
    {pid: counts} (as interposer_counts)."""
    require(COUNTER.exists(), "%s is not built (make fixtures builds it)" % COUNTER)
    log = Path(tmp) / "alone.log"
    if log.exists():
        log.unlink()
    run_alone(["/bin/sh", "-c", shell_cmd],
              alone_env(COUNTER, {"MT_COUNT_LOG": str(log)}), cwd or tmp)
    return interposer_counts(log, None)


def tracked_alone(tmp, shell_cmd, name, opts=(), cwd=None, counted_env=True):
    """memtrack track (options @opts) of `sh -c shell_cmd`, ASLR off, in
    counted_alone's environment (libcount_none.so in the counter's place)
    or, with counted_env False, in alone_env()'s; returns (artifact, stdout)."""
    out = Path(tmp) / name
    extra = {"MT_COUNT_LOG": str(Path(tmp) / "alone.log")} if counted_env else None
    require(NO_COUNTER.exists(), "%s is not built (make fixtures builds it)" % NO_COUNTER)
    env = alone_env(NO_COUNTER if counted_env else None, extra)
    stdout = run_alone([MEMTRACK, "track", "-q", "-o", str(out)] + list(opts)
                       + ["--", "/bin/sh", "-c", shell_cmd], env, cwd or tmp)
    return Artifact(out), stdout


def per_process(counts):
    """{pid: counts} as a sorted list of each process's sorted counts (runs
    differ in pids)."""
    return sorted(sorted(c.items()) for c in counts.values() if c)


def check_as_counted_alone(tmp, shell_cmd, cwd=None, min_fast=1):
    """The default path's heap records, per process, equal the calls the
    counter logged in a run of its own."""
    art, _ = tracked_alone(tmp, shell_cmd, "default.mtrk", cwd=cwd)
    fast = {e["pid"] for e in art.events if e["type"] == "fast"}
    require(len(fast) >= min_fast, "processes that went in-process: %d, expected at least %d"
            % (len(fast), min_fast))
    mine = per_process(memtrack_counts(art.events))
    theirs = per_process(counted_alone(tmp, shell_cmd, cwd=cwd))
    require(theirs, "the counter logged no call: is it preloaded?")
    check_eq(mine, theirs, "heap records per process (type, count/bytes), default path "
             "vs the counter run alone")
    return art


ALONE = {
    "python": "/usr/bin/python3 -c \"import json,collections; "
              "json.dumps([{'a': i, 'b': str(i)} for i in range(20000)]); "
              "collections.Counter(range(5000))\"",
    "perl": "perl -e 'my %h; $h{$_} = [$_] for 1..20000'",
    "gcc": "gcc -O1 -c prog.c -o /dev/null",  # an existing -o file changes what gcc allocates
    "tar": "tar -cf - /usr/include > /dev/null 2>&1",
    "sort": "sort lines.txt > /dev/null",
}


@pytest.mark.parametrize("name", sorted(ALONE))
def test_default_path_as_counted_alone(tmp, name):
    """The issue-25 measure on the five real programs: the default path, not
    only --no-fast, records what the program does without memtrack."""
    (Path(tmp) / "prog.c").write_text(C_SOURCE)
    (Path(tmp) / "lines.txt").write_text("".join("%d\n" % ((i * 7919) % 100003)
                                                 for i in range(100000)))
    check_as_counted_alone(tmp, ALONE[name], min_fast=3 if name == "gcc" else 1)
