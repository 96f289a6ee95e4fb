#!/bin/bash
# SPDX-License-Identifier: MIT
#
# vmlinux-h.sh - a cross build's vmlinux.h (make ARCH=arm64): the C types of
# the target architecture's kernel, dumped by bpftool from the BTF of Debian
# 12's newest 6.12 kernel package for it (scripts/kernel-pkg.sh fetches and
# unpacks it under KDIR, where test-kernels finds it again).  A native build
# dumps the running kernel's /sys/kernel/btf/vmlinux instead (Makefile).
# CO-RE relocates the programs to whichever kernel loads them.
#
# usage: scripts/vmlinux-h.sh DEBIAN-ARCH KDIR OUT-FILE
set -u
[ $# -eq 3 ] || { echo "usage: scripts/vmlinux-h.sh DEBIAN-ARCH KDIR OUT-FILE" >&2; exit 2; }
arch=$1 kdir=$2 out=$3
here=$(dirname "$0")
# shellcheck source=scripts/kernel-pkg.sh
. "$here/kernel-pkg.sh"

pkg=$(kernel_package "$arch" 6.12)
[ -n "$pkg" ] || {
	echo "memtrack: no linux-image-6.12.*-$arch package known to apt-cache; run apt-get update" >&2
	exit 1
}
mkdir -p "$kdir" && kernel_unpack "$kdir" "$pkg" || exit 1
image=$kdir/$pkg/root/boot/vmlinuz-${pkg#linux-image-}
"$here/image-btf.py" "$image" "$out.btf" || exit 1
bpftool btf dump file "$out.btf" format c >"$out.tmp" && mv "$out.tmp" "$out" && rm -f "$out.btf"
