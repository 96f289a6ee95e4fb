#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh - the `make test-kernels` runner: boots Debian 12's own kernels
# under qemu and runs a subset of the integration tests inside each.
#
# For each series (6.1: linux-image-6.1.0-N-amd64, 6.12: the backports'
# linux-image-6.12.N+deb12-amd64) it takes the newest package apt-cache
# knows at run time (old ones leave the archive), fetches it with
# `apt-get download` and unpacks it with `dpkg -x` into $OUT/kernels
# (nothing is installed, the machine is not rebooted), builds a busybox
# initramfs holding the package's own virtio/9p/overlay modules, and boots
# it under TCG (this machine's /dev/kvm is a PVM host on which stock kernels
# hang after "Probing EDD"), one host thread for both vCPUs (see boot).  The guest sees the host's root read-only over
# 9p with a tmpfs overlay for writes (tests/kernels/guest.sh), so it runs
# this checkout's build as it is.
#
# Output: each kernel's test lines, then per kernel exactly
#     kernel RELEASE: N passed, M failed
# Exit status 0 iff every kernel booted and had M == 0.
#
# With MT_KERNEL_ARCH=arm64 (make ARCH=arm64 test-kernels, on x86-64) it
# boots the arm64 packages of the same series (linux-image-*-arm64) under
# qemu-system-aarch64 (TCG, -machine virt -cpu max) in a root of Debian's
# arm64 packages (tests/kernels/arm64-root.sh: the host's programs are
# x86-64 ones) with the checkout, and OUT's cross build, at its own path;
# its default subset is ARM64_TESTS below (TCG emulates arm64 on x86-64
# several times slower than it runs x86-64).
#
# usage: tests/kernels/run.sh [SERIES...]      (default: 6.1 6.12)
# Environment: OUT (build directory, default build); MT_KERNEL_ARCH (amd64,
# the default, or arm64); MT_KERNEL_TESTS (a
# pytest -k expression replacing the default subset); MT_KERNEL_TIMEOUT
# (seconds per kernel, default 900); MT_KERNEL_MEM (guest MiB, default 3072);
# MT_KERNEL_CMD (a shell command the guest runs instead of the tests, to look
# at a kernel by hand: its output is shown, nothing is counted).
set -u

cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-build}
ROOT=$PWD
KDIR=$ROOT/$OUT/kernels
MEM=${MT_KERNEL_MEM:-3072}
# One test per feature at least: tree tracking and parking, heap on both
# paths, the mmap family, RSS, --physical, --stacks, --control, the reaper
# and what SIGKILL leaves, the daemon's path (a user's exact session; the
# daemon SIGKILLed mid-session), an OOM kill in a memory cgroup.  memtrack's BPF load takes ~4.5 s under TCG, so
# each name here is one or a few runs of memtrack.
DEFAULT_TESTS="test_fork_then_exec or test_double_fork_daemon or test_malloc_free_pairs \
or (test_fixture_same_both_ways and (heap_pairs or heap_realloc or threads or fork_seq \
or vfork_alloc or spawn_alloc or cxx_ops)) or test_mmap_munmap_mremap_brk or test_rss_ramp \
or test_cow_rss_and_physical or test_fixture_stack or test_only_the_enabled_phase_is_recorded \
or test_sigkilled_memtrack_leaves_readable_file or test_memtrack_killed_program_runs_on \
or test_teardown_closer_leaves_and_exits or test_mapped_glibc_heap_plus_own_mapping \
or test_mapped_thread_arena_not_counted or test_sudo_attach_own_process_and_setuid_child \
or test_sudo_attach_undumpable_leaves or test_sudo_attach_yama \
or (test_daemon and (test_exact_counts_as_user or test_daemon_sigkilled_mid_session)) \
or test_oom_kill_recorded"
# arm64: one test per feature family of memtrack's arm64 port, a run of
# memtrack or two each (the heap on both paths, fork and exec, the mmap
# family, RSS and --physical, --control, SIGKILL, the artifact's arch, call
# stacks without frame pointers on both unwinders: a malloc's, a thread's,
# an mmap's; Python frames from the kernel's unwinder; a user's session
# through the daemon): TCG's arm64 is several times slower here.
ARM64_TESTS="test_fork_then_exec or test_malloc_free_pairs \
or (test_fixture_same_both_ways and heap_pairs) or test_mmap_munmap_mremap_brk \
or test_cow_rss_and_physical or test_only_the_enabled_phase_is_recorded \
or test_sigkilled_memtrack_leaves_readable_file or test_arch \
or (test_fixture_stack and (nofp-recurse or nofp-thread or nofp-mmap) and not static) \
or (test_python_frames_kernel and debian) or (test_daemon and test_exact_counts_as_user)"
# the modules the guest needs to reach the host's root; builtin ones are skipped
ROOT_MODULES="virtio_pci 9pnet_virtio 9p overlay"
KARCH=${MT_KERNEL_ARCH:-amd64}
case $KARCH in
amd64)
	QEMU=qemu-system-x86_64 CONSOLE=ttyS0 BUSYBOX=$(command -v busybox)
	TIMEOUT=${MT_KERNEL_TIMEOUT:-900}
	TESTS=${MT_KERNEL_TESTS:-$DEFAULT_TESTS}
	;;
arm64)
	QEMU=qemu-system-aarch64 CONSOLE=ttyAMA0 BUSYBOX=$KDIR/arm64-busybox/bin/busybox
	TIMEOUT=${MT_KERNEL_TIMEOUT:-480}
	TESTS=${MT_KERNEL_TESTS:-$ARM64_TESTS}
	;;
*) echo "memtrack: test-kernels: MT_KERNEL_ARCH=$KARCH: amd64 or arm64" >&2 && exit 2 ;;
esac
# shellcheck source=scripts/kernel-pkg.sh
. scripts/kernel-pkg.sh
# shellcheck source=tests/kernels/arm64-root.sh
. tests/kernels/arm64-root.sh

die() {
	echo "memtrack: test-kernels: $*" >&2
	exit 2
}

for tool in "$QEMU" busybox apt-get apt-cache dpkg xz; do
	command -v "$tool" >/dev/null || die "$tool not found; run scripts/bootstrap.sh"
done
[ -x "$OUT/memtrack" ] || die "no $OUT/memtrack; run make first"
case $ROOT in *[[:space:]]*) die "the checkout's path '$ROOT' has a space; the guest cannot be told it" ;; esac

# module_file MODDIR NAME: the path of module NAME (- and _ are the same) under MODDIR
module_file() {
	find "$1/kernel" -name "$2.ko*" -o -name "${2//_/-}.ko*" | head -n1
}

# module_deps FILE: the module names FILE's .modinfo says it depends on
module_deps() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*) cat "$1" ;;
	esac | tr '\0' '\n' | grep -a '^depends=' | head -n1 | cut -d= -f2 | tr ',' ' '
}

# add_module MODDIR NAME DEST: copies NAME and (first) what it depends on
# into DEST, uncompressed, appending each to DEST/order as it goes: the
# order modules.dep gives, dependencies before their users.
add_module() {
	local moddir=$1 name=$2 dest=$3 file dep
	grep -qx "$name" "$dest/order" 2>/dev/null && return 0
	file=$(module_file "$moddir" "$name")
	if [ -z "$file" ]; then
		grep -q "/${name}.ko" "$moddir/modules.builtin" && return 0
		echo "memtrack: test-kernels: module $name not in $moddir" >&2
		return 1
	fi
	for dep in $(module_deps "$file"); do
		add_module "$moddir" "$dep" "$dest" || return 1
	done
	case $file in
	*.xz) xz -dc "$file" >"$dest/$name.ko" ;;
	*) cp "$file" "$dest/$name.ko" ;;
	esac
	echo "$name" >>"$dest/order"
}

# make_initramfs PKGDIR RELEASE: writes PKGDIR/initramfs.cpio.gz
make_initramfs() {
	local pkgdir=$1 release=$2 ird=$1/initramfs m
	rm -rf "$ird" && mkdir -p "$ird"/{bin,dev,proc,sys,lower,rw,newroot,mods} || return 1
	cp "$BUSYBOX" "$ird/bin/busybox" || return 1
	for m in $ROOT_MODULES; do
		add_module "$pkgdir/root/lib/modules/$release" "$m" "$ird/mods" || return 1
	done
	cp tests/kernels/init "$ird/init" && chmod 755 "$ird/init" || return 1
	(cd "$ird" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$pkgdir/initramfs.cpio.gz"
}

# boot PKGDIR RELEASE LOG: boots the kernel; its console goes to LOG and stdout
boot() {
	local pkgdir=$1 release=$2 log=$3 qemu append
	append="console=$CONSOLE quiet loglevel=3 panic=-1 mt.dir=$ROOT mt.out=$OUT"
	case $KARCH in
	# thread=single: under multi-threaded TCG, 6.12 oopsed on the int3 of
	# a static key being patched as memtrack attached rss_stat (a vCPU ran
	# the stale breakpoint after text_poke_bp() had finished)
	amd64) qemu=(qemu-system-x86_64 -accel 'tcg,thread=single') ;;
	# pauth-impdef: the CPU's own pointer authentication algorithm, not
	# QARMA, which TCG computes slowly (the kernel and libc sign return
	# addresses either way); mt.root: the arm64 root (arm64-root.sh);
	# thread=single as on amd64: under multi-threaded TCG the 6.1 guest gave
	# no result once in CI (its subset passed in 4 of 4 boots here), and code
	# patched while the other vCPU runs it is what multi-threaded TCG got
	# wrong on amd64
	arm64)
		qemu=(qemu-system-aarch64 -machine virt -cpu 'max,pauth-impdef=on' -accel 'tcg,thread=single')
		append="$append mt.root=$KDIR/arm64-root"
		;;
	esac
	timeout --foreground -k 10 "$TIMEOUT" "${qemu[@]}" \
		-smp 2 -m "$MEM" -nodefaults -display none -no-reboot \
		-serial stdio -monitor none \
		-kernel "$pkgdir/root/boot/vmlinuz-$release" -initrd "$pkgdir/initramfs.cpio.gz" \
		-append "$append" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		</dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
}

# guest_result LOG: prints the guest's summary line; fails if it has none or
# did not finish
guest_result() {
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n1)
	[ -n "$line" ] && grep -q '^MT-KERNEL-DONE' "$1" && echo "$line"
}

# run_kernel SERIES: boots the newest kernel of SERIES, prints its summary line
run_kernel() {
	local series=$1 pkg release pkgdir log line start
	pkg=$(kernel_package "$KARCH" "$series") || return 1
	if [ -z "$pkg" ]; then
		echo "kernel $series: no package found by apt-cache search (run apt-get update)"
		return 1
	fi
	release=${pkg#linux-image-}
	pkgdir=$KDIR/$pkg
	log=$KDIR/$release.log
	echo "== kernel $release ($pkg)"
	start=$(date +%s)
	if ! kernel_unpack "$KDIR" "$pkg" || ! make_initramfs "$pkgdir" "$release"; then
		summary+=("kernel $release: could not prepare the package")
		return 1
	fi
	boot "$pkgdir" "$release" "$log"
	if [ -n "${MT_KERNEL_CMD:-}" ]; then
		summary+=("kernel $release: ran MT_KERNEL_CMD, nothing counted ($(($(date +%s) - start)) s)")
		return 0
	fi
	# a guest that gives no result (it hung or crashed under emulation) is
	# booted once more, after its console's last lines: a CI log holds
	# what went wrong, and a fault of memtrack's, which comes back, still fails
	again=
	if ! guest_result "$log" >/dev/null; then
		echo "== kernel $release: no result after $(($(date +%s) - start)) s; its console's last lines:"
		tail -n 40 "$log" | sed 's/^/   | /'
		cp "$log" "$log.first"
		echo "== kernel $release: booted once more"
		again=", the second boot (the first gave no result: $log.first)"
		boot "$pkgdir" "$release" "$log"
	fi
	if ! line=$(guest_result "$log"); then
		summary+=("kernel $release: no result (the guest did not finish in ${TIMEOUT}s or crashed, twice; see $log and $log.first)")
		return 1
	fi
	summary+=("kernel $release: $line ($(($(date +%s) - start)) s$again)")
	case $line in *" 0 failed"*) return 0 ;; esac
	return 1
}

mkdir -p "$KDIR" || exit 2
if [ "$KARCH" = arm64 ]; then
	arm64_root "$KDIR" || exit 2
	file -L "$OUT/memtrack" | grep -q aarch64 || die "$OUT/memtrack is not an arm64 build; run make ARCH=arm64"
fi
# the guest reads the test selection from here (its root is this one, read-only)
printf '%s\n' "$TESTS" >"$KDIR/tests"
printf '%s\n' "${MT_KERNEL_CMD:-}" >"$KDIR/cmd"
[ $# -eq 0 ] && set -- 6.1 6.12
summary=()
rc=0
for series in "$@"; do
	run_kernel "$series" || rc=1
done
echo
printf '%s\n' "${summary[@]}"
exit $rc
