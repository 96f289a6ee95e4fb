#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py - runs the integration tests (tests/integration/test_*.py).

Every module-level function named test_* is a test; it gets one argument, a
fresh temporary directory (pathlib.Path).  Each test prints one line,
"PASS module.name" or "FAIL module.name", followed for a failure by the
reasons, indented (tests/run.sh counts the PASS/FAIL lines).

usage: run.py [--list] [-k SUBSTRING]...
  --list     print the number of tests that would run, and nothing else
  -k SUB     run only tests whose "module.name" contains SUB (repeatable)
Environment: MEMTRACK_BUILD (the build directory, default <repo>/build);
MT_KEEP=1 keeps the temporary directories of failed tests.
Exit status: 0 when every test passed, 1 otherwise.
"""
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mtlib  # noqa: E402


def collect(filters):
    """[(name, function)]; a module that cannot be imported is one test that
    fails with the traceback."""
    tests = []
    for path in sorted(HERE.glob("test_*.py")):
        try:
            mod = importlib.import_module(path.stem)
        except Exception:
            tb = traceback.format_exc()

            def broken(tmp, tb=tb):
                raise mtlib.Failure("cannot import the module:\n" + tb)
            tests.append(("%s.(import)" % path.stem, broken))
            continue
        for name, fn in vars(mod).items():  # definition order
            if name.startswith("test_") and callable(fn):
                full = "%s.%s" % (path.stem, name)
                if not filters or any(f in full for f in filters):
                    tests.append((full, fn))
    return tests


def indent(text):
    return "\n".join("    " + line for line in text.rstrip("\n").splitlines())


def run_one(full, fn):
    mtlib.reset_failures()
    tmp = Path(tempfile.mkdtemp(prefix="mt-%s-" % full.split(".")[-1]))
    t0 = time.monotonic()
    problems = []
    try:
        fn(tmp)
    except mtlib.Failure as e:
        problems.append(str(e))
    except Exception:  # a bug in the test, or memtrack output it cannot parse
        problems.append(traceback.format_exc())
    problems = mtlib.failures() + problems
    secs = time.monotonic() - t0
    ok = not problems
    print("%s %s (%.2fs)" % ("PASS" if ok else "FAIL", full, secs), flush=True)
    for p in problems:
        print(indent(p), flush=True)
    if ok or not os.environ.get("MT_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("    (kept %s)" % tmp, flush=True)
    return ok


def main(argv):
    filters, listing = [], False
    i = 0
    while i < len(argv):
        if argv[i] == "--list":
            listing = True
        elif argv[i] == "-k" and i + 1 < len(argv):
            i += 1
            filters.append(argv[i])
        else:
            print(__doc__, file=sys.stderr)
            return 2
        i += 1
    tests = collect(filters)
    if listing:
        print(len(tests))
        return 0
    failed = 0
    mtlib.SESSION_TMP = tempfile.mkdtemp(prefix="mt-session-")
    try:
        for full, fn in tests:
            if not run_one(full, fn):
                failed += 1
    finally:
        shutil.rmtree(mtlib.SESSION_TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
