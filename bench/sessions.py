#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sessions.py MEMTRACK N DIR - the bench's "N concurrent sessions" row:
N memtrack sessions at once on fixtures/oracle (MEMTRACK's directory holds
the fixtures, as the bench's snapshot and build/ do), each checked exact
(tests/integration/test_concurrency.py); exits 1, one line per problem,
when a session failed or recorded what its program did not do."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: bench/sessions.py MEMTRACK N DIR")
    os.environ["MEMTRACK_BUILD"] = os.path.dirname(os.path.abspath(sys.argv[1]))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import test_concurrency  # noqa: E402  (after MEMTRACK_BUILD, which mtlib reads)
    sys.exit(test_concurrency.main(sys.argv[1:]))
