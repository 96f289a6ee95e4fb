#!/bin/bash
# (sourced, not run: the line above tells shellcheck its shell)
# SPDX-License-Identifier: MIT
#
# arm64-root.sh - the arm64 guest's root, for tests/kernels/run.sh
# (sourced).  The host's root, which the x86-64 guests run in, holds
# x86-64 programs: the arm64 guest runs in a root of Debian's own arm64
# packages instead (its shell and tools, python3.11 and pytest, the
# libraries memtrack and the fixtures link), fetched with `apt-get
# download` and unpacked with `dpkg -x` into KDIR/arm64-root (merged /usr,
# as Debian 12 installs it), once.  The guest sees it read-only under a
# tmpfs overlay, with the checkout (memtrack's cross build and the tests)
# at its own path (tests/kernels/init, mt.root=arm64).  busybox-static is
# unpacked apart: the initramfs's busybox.

# Every package is named (no dependency resolution at run time): the
# closure of `apt-cache depends --recurse` of bash, dash, coreutils, grep,
# sed, python3.11-minimal and libpython3.11-stdlib (less the awk
# alternatives, dpkg and perl), python3-pytest's, util-linux's (setarch,
# which test_fast runs), binutils' and libc6-dbg (addr2line names glibc's
# frames and readelf reads build-ids in test_stacks), passwd's (useradd
# and userdel: test_daemon's users) and the libraries memtrack links.
ARM64_PKGS="bash dash coreutils grep sed tar debianutils findutils procps libproc2-0 mawk \
python3.11-minimal libpython3.11-minimal libpython3.11-stdlib python3-minimal \
libc6 libgcc-s1 gcc-12-base libstdc++6 libacl1 libattr1 libbz2-1.0 libcom-err2 libcrypt1 libdb5.3 \
libexpat1 libffi8 libgmp10 libgssapi-krb5-2 libk5crypto3 libkeyutils1 libkrb5-3 \
libkrb5support0 liblzma5 libmd0 libmpfr6 libncursesw6 libnsl2 libpcre2-8-0 libreadline8 \
libselinux1 libsigsegv2 libsqlite3-0 libssl3 libtinfo6 libtirpc3 libuuid1 libzstd1 zlib1g \
libsystemd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1 libbpf1 libelf1 libdw1 libc6-dbg \
binutils binutils-aarch64-linux-gnu binutils-common libbinutils libctf0 libctf-nobfd0 libgprofng0 libjansson4 \
util-linux libblkid1 libcap-ng0 libmount1 libpam0g libsmartcols1 libudev1 libaudit1 \
passwd libsemanage2 libsepol2"
# pytest and what it imports, and libsemanage2's configuration (Architecture: all)
ALL_PKGS="python3-pytest python3-attr python3-more-itertools python3-pkg-resources python3-pluggy \
python3-py python3-iniconfig python3-packaging libsemanage-common"

# arm64_root KDIR: makes KDIR/arm64-root (the packages above) and
# KDIR/arm64-busybox/bin/busybox, once per package list
arm64_root() {
	local kdir=$1 root=$1/arm64-root debs=$1/arm64-debs stamp pkgs=() p deb
	stamp=$(printf '%s\n' "$ARM64_PKGS $ALL_PKGS" | md5sum | cut -c1-12)
	[ -f "$root/.done-$stamp" ] && [ -x "$kdir/arm64-busybox/bin/busybox" ] && return 0
	rm -rf "$root" "$debs" "$kdir/arm64-busybox" && mkdir -p "$root" "$debs" || return 1
	for p in $ARM64_PKGS busybox-static; do pkgs+=("$p:arm64"); done
	for p in $ALL_PKGS; do pkgs+=("$p:all"); done
	(cd "$debs" && apt-get download -q "${pkgs[@]}" >/dev/null 2>&1) || {
		echo "memtrack: test-kernels: apt-get download of the arm64 root's packages failed; run apt-get update" >&2
		return 1
	}
	for deb in "$debs"/*.deb; do
		case $deb in
		*/busybox-static_*) dpkg -x "$deb" "$kdir/arm64-busybox" ;;
		*) dpkg -x "$deb" "$root" ;;
		esac || return 1
	done
	rm -rf "$debs"
	# merged /usr: /bin, /sbin and /lib are links into /usr, as on Debian 12
	for p in bin sbin lib; do
		if [ -d "$root/$p" ] && [ ! -L "$root/$p" ]; then
			mkdir -p "$root/usr/$p" && cp -a "$root/$p/." "$root/usr/$p/" && rm -rf "${root:?}/$p" || return 1
		fi
		ln -sfn "usr/$p" "$root/$p" || return 1
	done
	# the modules' bytecode, compiled here once: the guest's root is read-only,
	# so its python3 would compile what it imports at every start (pytest
	# took 60 s to import under TCG); .pyc files are the same on every arch
	if command -v python3.11 >/dev/null; then
		python3.11 -m compileall -q -j 2 -s "$root" -p / "$root/usr/lib/python3.11" \
			"$root/usr/lib/python3/dist-packages" >/dev/null 2>&1
	fi
	mkdir -p "$root"/{proc,sys,dev,tmp,run,root,etc} || return 1
	# the users the tests name (test_privilege runs commands as nobody)
	printf '%s\n' 'root:x:0:0:root:/root:/bin/bash' 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' \
		>"$root/etc/passwd"
	printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$root/etc/group"
	touch "$root/.done-$stamp"
}
