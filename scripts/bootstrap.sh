#!/bin/sh
# bootstrap.sh - installs the Debian packages memtrack needs to build, test
# and benchmark (qemu-system-x86 and busybox-static boot the kernels of make
# test-kernels).  As root it runs apt-get; otherwise it prints the line to run.
set -e
PKGS="clang llvm bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev libzstd-dev pkg-config make gcc \
      libmsgpack-dev hyperfine heaptrack valgrind time python3 python3-pytest \
      clang-format clang-tidy cppcheck shellcheck git scdoc man-db dpkg-dev tmux \
      g++ libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev chromium \
      rustc cargo librust-jemalloc-sys-dev \
      golang-go nodejs qemu-system-x86 busybox-static"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "memtrack: missing packages:$missing; run: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "bootstrap: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# $missing is a list of package names: split on purpose
# shellcheck disable=SC2086
apt-get install -y -q $missing >/dev/null 2>&1 || {
	apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null
}
