# SPDX-License-Identifier: MIT
"""conftest.py - pytest glue for the integration tests (tests/integration).

A test is a module-level `def test_xxx(tmp)` in test_*.py; `tmp` is a fresh
temporary directory (pathlib.Path) of its own, kept by pytest for the last
few runs (pytest's --basetemp chooses where).  mtlib's soft checks
(check_eq, check_true) collect every difference of a test and fail it at
the end; its hard checks (require, require_eq) stop it with a message, not
a traceback.  Runs several tests look at (mtlib.shared_track) live in one
session directory, removed at the end.

Each test also prints one line, "PASS module.name (secs)" or "FAIL
module.name (secs)", which tests/run.sh counts with the unit tests.

Select with pytest's own options through tests/run.sh: -k heap, -x, --lf
is off (no cache is written into the tree).  Environment: MEMTRACK_BUILD,
as for mtlib.
"""
import shutil
import tempfile
import time

import pytest

import mtlib


@pytest.fixture
def tmp(tmp_path):
    """A fresh directory for the test's artifacts and scratch files."""
    return tmp_path


@pytest.fixture(scope="session", autouse=True)
def _session_tmp():
    mtlib.SESSION_TMP = tempfile.mkdtemp(prefix="mt-session-")
    yield
    shutil.rmtree(mtlib.SESSION_TMP, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs the test with mtlib's checks: every soft-check failure and a
    require() failure become one pytest failure listing them all."""
    mtlib.reset_failures()
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    problems = []
    try:
        pyfuncitem.obj(**args)
    except mtlib.Failure as e:
        problems.append(str(e))
    problems = mtlib.failures() + problems
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    return True


def _name(nodeid):
    """'tests/integration/test_heap.py::test_x' -> 'test_heap.test_x'."""
    path, _, func = nodeid.partition("::")
    return "%s.%s" % (path.rsplit("/", 1)[-1][:-3], func)


_started = {}


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = time.monotonic()


def pytest_report_teststatus(report, config):
    """No progress letters: the PASS/FAIL/SKIP lines below say it, one a line."""
    if report.skipped:
        return "skipped", "", "SKIPPED"
    if report.when == "call":
        if report.passed:
            return "passed", "", "PASSED"
        if report.failed:
            return "failed", "", "FAILED"
    return None


def _skip_reason(report):
    """The reason pytest.skip() gave (longrepr is (file, line, message))."""
    r = report.longrepr
    msg = r[2] if isinstance(r, tuple) and len(r) == 3 else str(r)
    return msg[len("Skipped: "):] if msg.startswith("Skipped: ") else msg


def pytest_runtest_logreport(report):
    """One PASS/FAIL/SKIP line per test (a failed setup or teardown is a
    FAIL; a skip is never counted as a pass: tests/run.sh counts SKIP lines)."""
    if report.skipped:
        print("SKIP %s (%s)" % (_name(report.nodeid), _skip_reason(report)), flush=True)
        return
    if report.when != "call" and not report.failed:
        return
    secs = time.monotonic() - _started.get(report.nodeid, time.monotonic())
    word = "PASS" if report.passed else "FAIL"
    print("%s %s (%.2fs)" % (word, _name(report.nodeid), secs), flush=True)


def pytest_collectreport(report):
    """A module that cannot be imported fails as one test."""
    if report.failed:
        print("FAIL %s.(import)" % report.nodeid.rsplit("/", 1)[-1][:-3], flush=True)
