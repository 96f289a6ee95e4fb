# SPDX-License-Identifier: MIT
"""callsites.py - what the call-site tests share: the callsites fixture
tracked with --stacks, its expected stacks (from tests/fixtures/callsites.c)
and a symbolization cache of each test's own."""
import os

import mtlib
from mtlib import MEMTRACK, REPO, fixture, run, require

SRC = REPO / "tests" / "fixtures" / "callsites.c"
# the outermost frames of a glibc main thread, as this Debian's libc names them
START = ["__libc_start_call_main", "__libc_start_main", "_start"]


def line_of(text):
    """The line number of the first line of callsites.c containing text."""
    for n, line in enumerate(SRC.read_text().splitlines(), 1):
        if text in line:
            return n
    raise mtlib.Failure("%r is not in %s" % (text, SRC))


def expected():
    """function -> (file line of its call) for the fixture's call chains."""
    return {
        "b": line_of("blocks[i] = malloc(4000)"),
        "a": line_of("\tb();"),
        "c": line_of("sink = malloc(200)"),
        "d": line_of("sink = malloc(777)"),
        "main>a": line_of("\ta();"),
        "main>c": line_of("\tc();"),
        "main>d": line_of("\td();"),
    }


def tracked(stacks=True):
    """The callsites fixture tracked once per run (--stacks, or --no-stacks)."""
    opts = ["--stacks"] if stacks else ["--no-stacks"]
    return mtlib.shared_track("callsites" + ("-stacks" if stacks else ""), [fixture("callsites")],
                              opts)


def own_cache(tmp):
    """Points the symbolization cache of every memtrack this test runs at tmp/cache."""
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    return tmp / "cache" / "memtrack"


def memtrack(*args, rc=0):
    p = run([MEMTRACK] + [str(a) for a in args])
    require(p.rc == rc, "exit status %s, expected %s: %s" % (p.rc, rc, p.describe()))
    return p
