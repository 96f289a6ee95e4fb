#!/bin/sh
# bootstrap.sh - installs the Debian packages memtrack needs to build, test
# and benchmark (qemu-system-x86 and busybox-static boot the kernels of make
# test-kernels).  As root it runs apt-get; otherwise it prints the line to run.
# usage: scripts/bootstrap.sh [arm64]
#   arm64 (make ARCH=arm64 passes it on x86-64): also Debian's cross toolchain,
#   the :arm64 libraries memtrack links (dpkg --add-architecture arm64 first)
#   and qemu-system-arm, which boots the arm64 kernels of test-kernels.
set -e
PKGS="clang llvm bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev libzstd-dev pkg-config make gcc \
      libmsgpack-dev hyperfine heaptrack valgrind time python3 python3-pytest \
      clang-format clang-tidy cppcheck shellcheck git scdoc man-db dpkg-dev tmux \
      g++ libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev chromium \
      rustc cargo librust-jemalloc-sys-dev \
      golang-go nodejs qemu-system-x86 busybox-static"

cross=${1:-}
case $cross in
"") ;;
arm64)
	PKGS="$PKGS gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-system-arm libbpf-dev:arm64 libelf-dev:arm64 \
	      libdw-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64 libc6-dev:arm64"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		if [ "$(id -u)" != 0 ]; then
			echo "memtrack: arm64 is not a dpkg architecture here; run: sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2
			exit 1
		fi
		echo "bootstrap: dpkg --add-architecture arm64"
		dpkg --add-architecture arm64
		apt-get update -q >/dev/null
	fi
	;;
*)
	echo "memtrack: bootstrap: no cross build for '$cross' (known: arm64)" >&2
	exit 1
	;;
esac

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
