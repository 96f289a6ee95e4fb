#!/bin/sh
# SPDX-License-Identifier: MIT
#
# build.sh DIR VERSION ARCH MAINTAINER LIBDIR OUT.deb KERNEL_FLOOR - the `make deb`
# packager (KERNEL_FLOOR: the oldest kernel memtrack runs on, for the Description).
# DIR/debian/memtrack holds `make install PREFIX=/usr LIBDIR=LIBDIR DESTDIR=...`; this
# script gives it the shape Debian policy asks of a binary package, then
# runs dpkg-deb on it:
#   - ELF files stripped (policy 10.1), the static library of its debug info;
#   - the man page and the docs over 4 KiB compressed with gzip -9n (12.3);
#   - copyright (scripts/deb/copyright.in, the years of the commits) and changelog.gz in the doc dir (12.5, 12.7);
#   - Depends computed by dpkg-shlibdeps from the binary and libmemtrack-fast.so;
#   - DEBIAN/md5sums; files owned by root (dpkg-deb --root-owner-group).
# Dates come from the last commit, so two builds of a commit are identical.
set -eu

dir=$1 version=$2 arch=$3 maint=$4 libdir=$5 out=$6 floor=$7
here=$(dirname "$0")
root=$dir/debian/memtrack
doc=$root/usr/share/doc/memtrack
elfs="usr/bin/memtrack usr/lib/memtrack/libmemtrack-fast.so"

for f in $elfs; do
	strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/$f"
done
strip --strip-debug --remove-section=.comment "$root/usr/$libdir/libmemtrack-ctl.a"
gzip -9n "$root/usr/share/man/man1/memtrack.1"
find "$doc" -type f -size +4k -exec gzip -9n {} +
first=$(git log --reverse --format=%ad --date=format:%Y 2>/dev/null | head -n1)
last=$(git log -1 --format=%ad --date=format:%Y 2>/dev/null) || true
years=${first:-$(date +%Y)}
[ -n "$last" ] && [ "$last" != "$years" ] && years="$years-$last"
sed "s/@YEARS@/$years/" "$here/copyright.in" >"$doc/copyright"
date=$(git log -1 --format=%aD 2>/dev/null) || date=$(date -R)
printf 'memtrack (%s) unstable; urgency=medium\n\n  * Built from the source tree with make deb.\n\n -- %s  %s\n' \
	"$version" "$maint" "$date" | gzip -9n >"$doc/changelog.gz"

# dpkg-shlibdeps reads debian/control (the package's name) and finds the
# package's root by its DEBIAN directory; it prints shlibs:Depends=...
mkdir -p "$root/DEBIAN"
printf 'Source: memtrack\n\nPackage: memtrack\nArchitecture: any\n' >"$dir/debian/control"
args=""
for f in $elfs; do args="$args -edebian/memtrack/$f"; done
# $args is a list of -eFILE words without blanks: split on purpose
# shellcheck disable=SC2086
depends=$(cd "$dir" && dpkg-shlibdeps -O $args | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build.sh: dpkg-shlibdeps found no dependency" >&2; exit 1; }

size=$(du -sk "$root" | cut -f1)
awk -v v="$version" -v a="$arch" -v m="$maint" -v s="$size" -v d="$depends" -v k="$floor" '{
	gsub(/@VERSION@/, v); gsub(/@ARCH@/, a); gsub(/@MAINTAINER@/, m); gsub(/@KERNEL_FLOOR@/, k)
	gsub(/@SIZE@/, s); gsub(/@DEPENDS@/, d); print }' "$here/control.in" >"$root/DEBIAN/control"
(cd "$root" && find . -type f ! -path './DEBIAN/*' | sed 's|^\./||' | LC_ALL=C sort |
	xargs md5sum) >"$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) || SOURCE_DATE_EPOCH=$(date +%s)
export SOURCE_DATE_EPOCH
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group --build "$root" "$out" >/dev/null
echo "  DEB      $out"
