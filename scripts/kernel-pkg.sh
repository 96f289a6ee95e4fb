#!/bin/bash
# (sourced, not run: the line above tells shellcheck its shell)
# SPDX-License-Identifier: MIT
#
# kernel-pkg.sh - Debian 12's kernel packages, fetched and unpacked without
# installing them: sourced by tests/kernels/run.sh (the kernels it boots)
# and scripts/vmlinux-h.sh (a cross build's vmlinux.h, from the BTF of the
# target's kernel).  Both keep them in the same place, OUT/kernels/PACKAGE,
# so a cross build's package is the one its test-kernels run boots.

# kernel_package ARCH SERIES: the newest linux-image package of SERIES (6.1:
# linux-image-6.1.0-N-ARCH, 6.12: the backports' linux-image-6.12.N+deb12-ARCH)
# for Debian architecture ARCH (amd64, arm64) apt-cache knows (old ones leave
# the archive); nothing, with a message, for an unknown series.
kernel_package() {
	local re
	case $2 in
	6.1) re="^linux-image-6\.1\.0-[0-9]+-$1 " ;;
	6.12) re="^linux-image-6\.12\.[0-9]+\+deb12-$1 " ;;
	*)
		echo "memtrack: unknown kernel series '$2' (known: 6.1 6.12)" >&2
		return 1
		;;
	esac
	apt-cache search --names-only '^linux-image-6\.1' | grep -E "$re" | cut -d' ' -f1 | sort -V | tail -n1
}

# kernel_unpack KDIR PACKAGE: fetches and unpacks PACKAGE into KDIR/PACKAGE/root (once)
kernel_unpack() {
	local pkg=$2 dir=$1/$2
	[ -f "$dir/.unpacked" ] && return 0
	rm -rf "$dir" && mkdir -p "$dir/deb" || return 1
	(cd "$dir/deb" && apt-get download -q "$pkg" >/dev/null 2>&1) || {
		echo "memtrack: apt-get download $pkg failed; run apt-get update" >&2
		return 1
	}
	dpkg -x "$dir"/deb/*.deb "$dir/root" && rm -f "$dir"/deb/*.deb && touch "$dir/.unpacked"
}
