#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the s390x QEMU the s390x test bed runs on: Debian's QEMU source
# package (QEMU_SRC_VERSION, fetched with the root's apt: deb-src), Debian's
# own patches, then the project's (tools/qemu/*.patch: PCISTB delivers every
# doubleword byte-reversed on a little-endian host without them), configured
# for the s390x system target only, with TCG plugins (make profile's
# tools/profile/insn_profile.so). The binary is cached under a directory
# keyed by the source version, the patches, the configure flags, this script
# and the toolchain root's versions; source and build tree are removed
# afterwards. Runs inside the root.
#
# The bare build has no firmware (the +ds source has no s390-ccw.img): run it
# with -L /usr/share/qemu (backports' qemu-system-s390x in the root).
#
# Usage: build-qemu.sh    Prints the path of qemu-system-s390x.

source "$(dirname "$0")/lib.sh"

FLAGS=(--target-list=s390x-softmmu --without-default-features --enable-tcg
       --enable-plugins --disable-docs --disable-tools --disable-install-blobs
       --disable-werror --disable-fdt)
PATCHES=("$TOP"/tools/qemu/*.patch)
[ -f "${PATCHES[0]}" ] || die "no patches in $TOP/tools/qemu"

key=$( {
	echo "qemu=$QEMU_SRC_VERSION"
	echo "configure ${FLAGS[*]}"
	cat "${PATCHES[@]}"
	toolchain_id
	cat "$0"
} | sha256sum | cut -c1-16)

QDIR=$CACHE/qemu-s390x-$key
QEMU=$QDIR/qemu-system-s390x
mkdir -p "$CACHE"
exec 9>"$QDIR.lock"
flock 9
if [ -x "$QEMU" ]; then
	log "qemu: cached build $QEMU"
	echo "$QEMU"
	exit 0
fi

# Keep no other build: only the one this recipe names is ever used.
for dir in "$CACHE"/qemu-s390x-*; do
	case $dir in
	"$QDIR" | "$QDIR.lock") ;;
	*) rm -rf "$dir" ;;
	esac
done

served=$(apt-cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p')
grep -q -x -F "$QEMU_SRC_VERSION" <<<"$served" ||
	die "Debian's qemu source $QEMU_SRC_VERSION is not served (served: ${served//$'\n'/ })"

work=$QDIR.tmp
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
log "qemu: downloading Debian's qemu source $QEMU_SRC_VERSION"
(cd "$work" && apt-get -o APT::Sandbox::User=root source -qq --download-only \
	"qemu=$QEMU_SRC_VERSION" >/dev/null)
dpkg-source --no-check -x "$work"/qemu_*.dsc "$work/src" >/dev/null
for p in "${PATCHES[@]}"; do
	log "qemu: applying ${p#"$TOP"/}"
	patch -d "$work/src" -p1 --forward --batch --quiet <"$p" ||
		die "$p does not apply to Debian's qemu $QEMU_SRC_VERSION"
done

log "qemu: configuring (s390x-softmmu only)"
mkdir -p "$work/src/build"
(cd "$work/src/build" && ../configure "${FLAGS[@]}" >"$work/configure.log" 2>&1) ||
	{ tail -n 30 "$work/configure.log" >&2; die "qemu: configure failed"; }
log "qemu: building qemu-system-s390x with -j$(nproc) (6-7 minutes on 2 cores)"
ninja -C "$work/src/build" -j"$(nproc)" qemu-system-s390x >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log" >&2; die "qemu: build failed"; }
mkdir -p "$QDIR"
strip -o "$QEMU.new" "$work/src/build/qemu-system-s390x"
"$QEMU.new" -version >/dev/null || die "qemu: the built binary does not run"
mv "$QEMU.new" "$QEMU"
log "qemu: built in $((SECONDS - start)) s: $("$QEMU" -version | head -n1)"
echo "$QEMU"
