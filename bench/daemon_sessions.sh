#!/bin/bash
# SPDX-License-Identifier: MIT
#
# daemon_sessions.sh - issue 36's "1,000 sessions one after another with no
# fd, memory or BPF link growth in the daemon".
#
#   bench/daemon_sessions.sh [N]     (default 1000; needs root and make)
#
# Starts its own `memtrack daemon` on a socket in a temporary directory
# (never the default /run/memtrack/daemon.sock), warms it with 10 sessions,
# then runs N sessions of build/fixtures/heap_pairs one after another, each
# checked (exit 0, its 3 mallocs of 4099 bytes in the artifact).  Before and
# after the N it reads the daemon's fds (/proc/PID/fd), the BPF links among
# them, its VmRSS, and bpftool's count of the system's links (other runs on
# the machine change that one: it is printed, not judged).  Prints one line
# per figure and exits 1 when a session failed or the daemon's fds or
# links are not exactly as many after as before.  make test runs a bounded
# version (tests/integration/test_daemon.py, test_sequential_sessions_no_growth).
set -u
cd "$(dirname "$0")/.." || exit 2
N=${1:-1000}
MT=$PWD/build/memtrack
FIX=$PWD/build/fixtures/heap_pairs
case $N in '' | *[!0-9]*) echo "usage: bench/daemon_sessions.sh [N]" >&2 && exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "daemon_sessions: the daemon needs root; run: sudo $0 $*" >&2 && exit 2; }
if [ ! -x "$MT" ] || [ ! -x "$FIX" ]; then
	echo "daemon_sessions: build/memtrack or $FIX missing; run make" >&2
	exit 2
fi

DIR=$(mktemp -d /tmp/memtrack-sessions.XXXXXX)
SOCK=$DIR/d.sock
"$MT" daemon --socket "$SOCK" >"$DIR/daemon.log" 2>&1 &
DPID=$!
trap 'kill -TERM $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 600); do
	[ -S "$SOCK" ] && break
	kill -0 $DPID 2>/dev/null || break
	sleep 0.1
done
[ -S "$SOCK" ] || { echo "daemon_sessions: the daemon did not start: $(tail -n1 "$DIR/daemon.log")" >&2 && exit 1; }

# fds links rss_kib sys_links: the daemon's, once its fds are quiet (a
# session's end closes them on the daemon's thread, just after DONE)
measure() {
	local last="" now fds links fd
	for _ in $(seq 50); do
		fds=0 links=0
		for fd in "/proc/$DPID/fd"/*; do
			fds=$((fds + 1))
			[ "$(readlink "$fd" 2>/dev/null)" = anon_inode:bpf_link ] && links=$((links + 1))
		done
		now="$fds $links"
		[ "$now" = "$last" ] && break
		last=$now
		sleep 0.2
	done
	echo "$now $(awk '/^VmRSS:/ { print $2 }' "/proc/$DPID/status") $(bpftool link show | grep -c '^[0-9]')"
}

FAILED=0
session() {
	local out=$DIR/s.mtrk
	if ! "$MT" track -q --daemon="$SOCK" -o "$out" -- "$FIX" >/dev/null 2>"$DIR/err"; then
		echo "daemon_sessions: session $1 failed: $(tail -n1 "$DIR/err")" >&2
		FAILED=$((FAILED + 1))
		return
	fi
	# heap_pairs: 3 mallocs of 4099 bytes (no other call in its run asks that size)
	local n
	n=$("$MT" dump "$out" | grep -c '"type":"malloc".*"size":4099,')
	if [ "$n" != 3 ]; then
		echo "daemon_sessions: session $1 recorded $n mallocs of 4099 bytes, not 3" >&2
		FAILED=$((FAILED + 1))
	fi
}

for i in $(seq 10); do session "warm-$i"; done
read -r FDS0 LINKS0 RSS0 SYS0 <<<"$(measure)"
T0=$(date +%s.%N)
for i in $(seq "$N"); do session "$i"; done
T1=$(date +%s.%N)
read -r FDS1 LINKS1 RSS1 SYS1 <<<"$(measure)"

echo "sessions: $N one after another, $FAILED failed, $(echo "($T1 - $T0) * 1000 / $N" | bc) ms each"
echo "daemon fds: $FDS0 before, $FDS1 after"
echo "daemon BPF links: $LINKS0 before, $LINKS1 after"
echo "daemon RSS: $RSS0 KiB before, $RSS1 KiB after ($((RSS1 - RSS0)) KiB)"
echo "system BPF links (bpftool link, every run on the machine): $SYS0 before, $SYS1 after"
[ "$FAILED" = 0 ] && [ "$FDS0" = "$FDS1" ] && [ "$LINKS0" = "$LINKS1" ]
