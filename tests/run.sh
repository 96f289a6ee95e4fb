#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh - the `make test` runner: every unit test binary ($OUT/tests/test_*),
# then the integration tests (pytest on tests/integration, root + BPF only).
#
# Each test prints "PASS name" or "FAIL name" (unit tests through harness.h,
# integration tests through tests/integration/conftest.py), or "SKIP name
# (reason)"; this script shows them as they come and counts them, and lists
# the skipped ones before the last line (a skip is never a pass).  A binary
# that exits non-zero without a FAIL line (a crash, say) counts as one more
# failure.  The last line is exactly
#     N passed, M failed, K skipped
# where K counts the SKIP lines and, when not run as root, the integration
# tests that could not run (a banner above says so).  Exit status 0 iff
# M == 0: a skip does not fail the run, and is never counted as a pass.
#
# usage: tests/run.sh [--unit|--integration] [PYTEST ARGS...]
#   --unit / --integration run one half only; the other arguments go to
#   pytest, e.g. -k heap (a substring or expression of test names), -x.
# Environment: OUT (build directory, default build); PYTEST (default
# pytest-3, Debian's python3-pytest, else python3 -m pytest).
set -u

cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-build}
MEMTRACK_BUILD=$(cd "$OUT" 2>/dev/null && pwd) || MEMTRACK_BUILD=$PWD/$OUT
export MEMTRACK_BUILD

run_units=1
run_integration=1
case ${1:-} in
--unit) run_integration=0; shift ;;
--integration) run_units=0; shift ;;
esac

passed=0
failed=0
not_root=0
log=$(mktemp "${TMPDIR:-/tmp}/memtrack-test.XXXXXX") || exit 2
skips=$(mktemp "${TMPDIR:-/tmp}/memtrack-skips.XXXXXX") || exit 2
trap 'rm -f "$log" "$skips"' EXIT

# run_counted NAME CMD...: runs CMD showing its output, adds its PASS/FAIL
# lines to the totals; a non-zero exit without a FAIL line is a failure.
run_counted() {
	local name=$1 status p f
	shift
	"$@" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	p=$(grep -c '^PASS ' "$log")
	f=$(grep -c '^FAIL ' "$log")
	grep '^SKIP ' "$log" >>"$skips"
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name (exit status $status, no FAIL line: crashed or could not run)"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}

# --- unit tests ---------------------------------------------------------
units=0
[ "$run_units" -eq 1 ] && for bin in "$OUT"/tests/test_*; do
	case $bin in *.d | *.o) continue ;; esac
	if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then continue; fi
	units=$((units + 1))
	echo "== unit: $bin"
	run_counted "$bin" "$bin"
done
if [ "$run_units" -eq 1 ] && [ "$units" -eq 0 ]; then
	echo "FAIL unit tests (no binary $OUT/tests/test_*: run make test)"
	failed=$((failed + 1))
fi

# --- integration tests --------------------------------------------------
if [ -z "${PYTEST:-}" ]; then
	if command -v pytest-3 >/dev/null; then PYTEST="pytest-3"; else PYTEST="python3 -m pytest"; fi
fi
read -ra pytest <<<"$PYTEST"
if [ "$run_integration" -eq 0 ]; then
	:
elif ! "${pytest[@]}" --version >/dev/null 2>&1; then
	echo "FAIL integration tests (pytest not found: run make deps)"
	failed=$((failed + 1))
elif [ "$(id -u)" -ne 0 ]; then
	# pytest -qq --collect-only prints "test_x.py: N" per module
	k=$("${pytest[@]}" tests/integration --collect-only -q "$@" 2>/dev/null |
		awk -F': ' '/\.py: [0-9]+$/ { n += $2 } END { print n + 0 }')
	echo
	echo "!!! $k integration tests SKIPPED: they need root (BPF); run sudo make test !!!"
	echo
	not_root=$k
else
	echo "== integration: tests/integration ($MEMTRACK_BUILD)"
	run_counted "pytest tests/integration" "${pytest[@]}" tests/integration "$@"
fi

# skipped tests are named and counted apart, never as passed
k=$(grep -c '^SKIP ' "$skips")
if [ "$k" -gt 0 ]; then
	echo "$k skipped:"
	sed 's/^SKIP /  /' "$skips"
fi
[ "$not_root" -gt 0 ] && echo "$not_root integration tests skipped: not root"
echo "$passed passed, $failed failed, $((k + not_root)) skipped"
[ "$failed" -eq 0 ]
