#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - memtrack's overhead benchmarks (driven by bench/run.sh); the
code is the package beside it, bench/memtrack_bench (its __init__ says
which module does what)."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memtrack_bench.cli import main  # noqa: E402  (after the path it is found on)

if __name__ == "__main__":
    sys.exit(main())
