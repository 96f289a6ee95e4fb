#!/bin/bash
# guest.sh - runs inside the test-kernels guest (tests/kernels/init), in the
# host's root seen read-only under a tmpfs overlay: the integration tests
# named in OUT/kernels/tests, on this checkout's build, under the booted
# kernel.  Its output goes to the console the host reads.
# usage: guest.sh CHECKOUT OUT
set -u
cd "$1" || exit 2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
out=$2
tests=$(cat "$out/kernels/tests")
cmd=$(cat "$out/kernels/cmd")
if [ -n "$cmd" ]; then
	echo "guest: Linux $(uname -r), running: $cmd"
	bash -c "$cmd"
	exit
fi
echo "guest: Linux $(uname -r), $(nproc) CPUs, tests: $tests"
OUT=$out tests/run.sh --integration -k "$tests"
