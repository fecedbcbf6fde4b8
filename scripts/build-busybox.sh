#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the s390x guest's static busybox from Debian's busybox source package
# (the version trixie ships) with the root's s390x cross gcc, configured as
# Debian configures busybox-static (debian/config/os/linux, then
# debian/config/pkg/static: every applet the guest's init, run_guest.sh and
# the selftests use is in it). Runs inside the toolchain root while
# setup-root.sh makes it, and installs the binary at $S390X_BUSYBOX.
#
# Why not busybox-static:s390x: that needs the s390x package index, and the
# root uses no index of another architecture (the mirror's have been stale for
# days at a time). The source index is the same for every architecture. What
# is downloaded is verified: apt checks each file against the signed Sources
# index, and dpkg-source checks them against the .dsc.
#
# Usage: build-busybox.sh     (inside the root, as root)

source "$(dirname "$0")/lib.sh"

[ -n "${MLX4_BF_IN_ROOT:-}" ] || die "build-busybox.sh runs inside the toolchain root"

work=$(mktemp -d /tmp/mlx4-bf-busybox.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get -o APT::Sandbox::User=root source --download-only -qq busybox/trixie >/dev/null ||
	die "busybox: downloading Debian's trixie source failed (is trixie's deb-src index there?)"
# No --no-check: without a keyring the signature is skipped with a warning,
# the checksums are still checked.
dpkg-source -x busybox_*.dsc src >dpkg-source.log 2>&1 ||
	{ cat dpkg-source.log >&2; die "busybox: unpacking the source failed"; }
version=$(cd src && dpkg-parsechangelog -S Version)

# debian/rules' recipe for one flavour, cross: the config files, oldconfig,
# then 'make all' with the cross prefix.
out=$work/out
mkdir -p "$out"
cat src/debian/config/os/linux src/debian/config/pkg/static >"$out/.config"
export KCONFIG_NOTIMESTAMP=1
kmake=(make -C "$out" -f "$work/src/Makefile" KBUILD_SRC="$work/src"
       CROSS_COMPILE=s390x-linux-gnu-)
# yes dies of SIGPIPE when oldconfig is done: no pipefail for this pipeline.
(set +o pipefail; yes "" | "${kmake[@]}" silentoldconfig >oldconfig.log 2>&1) ||
	{ tail -n 20 oldconfig.log >&2; die "busybox: configuring failed"; }
grep -qx 'CONFIG_STATIC=y' "$out/.config" || die "busybox: the static config lost CONFIG_STATIC"
log "busybox: building Debian's $version for s390x (static, about 30 s)"
"${kmake[@]}" -j"$(nproc)" SKIP_STRIP=y all >build.log 2>&1 ||
	{ tail -n 30 build.log >&2; die "busybox: build failed"; }
s390x-linux-gnu-strip -o busybox "$out/busybox"
file -b busybox | grep -q 'IBM S/390.*statically linked' ||
	die "busybox: not a static s390x binary: $(file -b busybox)"
install -D -m 0755 busybox "$S390X_BUSYBOX"
echo "$version" >"$S390X_BUSYBOX.version"
