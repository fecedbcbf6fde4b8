#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unpacks Debian's linux-source-7.2 (KERNEL_PKG_VERSION) under the cache.
# Runs inside the toolchain root, whose apt lists serve it (sid, pinned so it
# is only ever downloaded, never installed). Quick when already there.

source "$(dirname "$0")/lib.sh"

[ -n "${KERNEL_SRC:-}" ] && exit 0
dest=$TOOLS/linux
[ -f "$dest/.complete" ] && exit 0
mkdir -p "$TOOLS"
exec 9>"$dest.lock"
flock 9
[ -f "$dest/.complete" ] && exit 0

versions() { apt-cache madison linux-source-7.2 | awk -F'|' '{gsub(/ /,"",$2); print $2}'; }
version=$(versions | grep -x -F "$KERNEL_PKG_VERSION" | head -n1 || true)
if [ -z "$version" ]; then
	version=$(versions | head -n1)
	[ -n "$version" ] || die "linux-source-7.2 is not served"
	log "WARNING: linux-source-7.2 $KERNEL_PKG_VERSION is not served; using $version"
fi
work=$(mktemp -d "$TOOLS/linux-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "kernel source: downloading linux-source-7.2 $version"
(cd "$work" && apt-get -o APT::Sandbox::User=root download -qq "linux-source-7.2=$version" >/dev/null)
dpkg-deb -x "$work"/linux-source-7.2_*.deb "$work/x"
rm -rf "$dest"
mkdir -p "$dest"
tar -C "$dest" --strip-components=1 -xf "$work"/x/usr/src/linux-source-*.tar.*
basename "$work"/linux-source-7.2_*.deb >"$dest/.debian-package"
touch "$dest/.complete"
