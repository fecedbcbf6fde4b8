#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Makes the toolchain root: a Debian trixie tree under the cache with
# trixie-backports' Rust (rustc, rust-src, cargo, rustfmt, clippy) and QEMU,
# and trixie's LLVM, bindgen and build tools. Every build and every test of the
# project runs inside it (scripts/lib.sh: in_root), so one Rust toolchain and
# one QEMU serve the kernel, the module, the tools and the guest. For s390x it
# also holds the cross gcc and libc, QEMU's build dependencies (the s390x QEMU
# is built from source with a fix: scripts/build-qemu.sh), backports' s390x
# QEMU for its firmware, and an s390x static busybox ($S390X_BUSYBOX) built
# from Debian's source (scripts/build-busybox.sh). rdma-core and perftest are
# not installed: they are built from Debian's sources for the guest's
# architecture when a boot needs them (scripts/build-rdma-core.sh). Every apt
# index it uses is amd64 or a source index: none of another architecture.
#
# The root is created once and reused; its directory is keyed by this file and
# build-busybox.sh, so a changed recipe makes a new root. The versions actually installed are
# recorded in $ROOT/etc/mlx4-bf-toolchain (printed by make test, hashed into
# every build's cache key). On the host this installs only debootstrap and
# bubblewrap.
#
# Usage: setup-root.sh     Prints the root's directory.

source "$(dirname "$0")/lib.sh"

SUITE=trixie
# From trixie-backports: Rust >= 1.96 (s390x kernels), QEMU >= 10.1 (the
# vfio-user client), and libelf-dev, which must match the libelf1t64 that
# backports' QEMU pulls in.
BACKPORTS_PKGS=(rustc rust-src cargo rustfmt rust-clippy qemu-system-x86 libelf-dev
                qemu-system-s390x)
# From trixie: LLVM for LLVM=1 kernels, bindgen, the kernel's build tools, gcc
# and libc6-dev for the static selftests, busybox for the guest, cmake for
# rdma-core (built from Debian's source for either guest, static:
# scripts/build-rdma-core.sh).
PKGS=(clang lld llvm libclang-dev bindgen make flex bison bc libssl-dev python3
      cpio kmod busybox-static gcc libc6-dev perl xz-utils gzip findutils
      file git cmake)
# s390x: the cross gcc and binutils (kernel, module), the cross libc (static
# selftests), and what Debian's QEMU source needs to configure and build the
# s390x system emulator (scripts/build-qemu.sh; dpkg-dev unpacks the source).
S390X_PKGS=(gcc-s390x-linux-gnu binutils-s390x-linux-gnu libc6-dev-s390x-cross
            dpkg-dev ninja-build meson python3-venv python3-pycotap
            device-tree-compiler libglib2.0-dev pkgconf zlib1g-dev)

HOST_PKGS=(debootstrap bubblewrap)

for p in "${HOST_PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		[ "$(id -u)" = 0 ] || die "host packages missing (${HOST_PKGS[*]}); run as root"
		log "installing host packages: ${HOST_PKGS[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"${HOST_PKGS[@]}" >/dev/null
		break
	fi
done

ROOT=$(root_dir)
if [ -f "$ROOT/etc/mlx4-bf-toolchain" ]; then
	echo "$ROOT"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "making the toolchain root needs root (debootstrap)"
mkdir -p "$CACHE"
exec 9>"$ROOT.lock"
flock 9
if [ -f "$ROOT/etc/mlx4-bf-toolchain" ]; then
	echo "$ROOT"
	exit 0
fi

# Reuse the mirror the host already uses, so no host is named here.
mirror=$({ cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
		2>/dev/null || true; } | grep -E '^(URIs:|deb )' |
	grep -o -E 'https?://[^ ]+/debian/?' | head -n1 || true)
[ -n "$mirror" ] || die "cannot find the Debian mirror in the host's apt sources"

# A root is 2-3 GiB: keep no root of an older recipe.
for dir in "$CACHE"/root-*; do
	case $dir in
	"$ROOT" | "$ROOT.lock") ;;
	*) rm -rf "$dir" ;;
	esac
done

start=$SECONDS
tmp=$ROOT.tmp
rm -rf "$tmp"
log "root: debootstrap $SUITE into $tmp (about 1 minute)"
for try in 1 2 3; do
	debootstrap --variant=minbase "$SUITE" "$tmp" "$mirror" >"$CACHE/debootstrap.log" 2>&1 && break
	tail -n 20 "$CACHE/debootstrap.log" >&2
	[ "$try" = 3 ] && die "debootstrap failed three times (log: $CACHE/debootstrap.log)"
	log "root: debootstrap failed; trying again in 30 s"
	rm -rf "$tmp"
	sleep 30
done

# Every index is of the host's own architecture (amd64) or a source index:
# nothing of another architecture (the s390x guest's busybox is built from
# source, scripts/build-busybox.sh).
cat >"$tmp/etc/apt/sources.list" <<-SRC
deb [arch=amd64] $mirror $SUITE main
deb [arch=amd64] $mirror $SUITE-updates main
deb [arch=amd64] $mirror $SUITE-backports main
deb-src $mirror $SUITE main
deb-src $mirror $SUITE-backports main
SRC
# sid only for the pinned kernel source package (apt-get download) and
# QEMU's source (apt-get source), never for an install.
cat >"$tmp/etc/apt/sources.list.d/sid.list" <<-SRC
deb [check-valid-until=no arch=amd64] $mirror sid main
deb-src [check-valid-until=no] $mirror sid main
SRC
cat >"$tmp/etc/apt/preferences.d/sid" <<-PIN
Package: *
Pin: release n=sid
Pin-Priority: 1
PIN
# apt retries a failed download itself (a mirror that answers 5xx or is
# synced under us); no translations: nothing reads them.
cat >"$tmp/etc/apt/apt.conf.d/90mlx4-bf" <<-CONF
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "5";
Acquire::Languages "none";
CONF
mkdir -p "$tmp/etc/ssl/certs"

# apt-get update, retried while an index the recipe uses fails; one it does not
# use (point-release updates, backports' sources) may fail with a warning.
# Needed: trixie's and backports' binaries (the installs), trixie's sources
# (busybox), sid's amd64 binaries (linux-source) and sources (QEMU).
NEEDED_INDICES=(trixie/main/binary-amd64 trixie/main/binary-all trixie/main/source
                trixie-backports/main/binary-amd64 trixie-backports/main/binary-all
                sid/main/binary-amd64 sid/main/binary-all sid/main/source)
needed_index() {
	local index=$1 i
	for i in "${NEEDED_INDICES[@]}"; do
		# A suite's Release file fails every index of the suite.
		[[ $index == "$i" || $index == "${i%%/*}/InRelease" ]] && return 0
	done
	return 1
}
# The indices apt-get update's log names as failed, one per line, as
# SUITE/InRelease or SUITE/COMPONENT/KIND (binary-ARCH, source): from its
# "Err:N MIRROR SUITE[/COMPONENT] [ARCH] Packages|Sources|InRelease" lines
# and from its "E:"/"W:" lines that name a file under dists/ ("Failed to
# fetch", an expired or unsigned Release file).
failed_indices() {
	{
		sed -n -E 's#^Err:[0-9]+ [^ ]+ ([^ /]+)/([^ ]+) ([^ ]+) Packages.*#\1/\2/binary-\3#p
			   s#^Err:[0-9]+ [^ ]+ ([^ /]+)/([^ ]+) Sources.*#\1/\2/source#p
			   s#^Err:[0-9]+ [^ ]+ ([^ /]+) (In)?Release.*#\1/InRelease#p' "$1"
		grep -E '^(E|W): ' "$1" | grep -o -E '/dists/[^ ]+' | sed 's#^/dists/##' |
			sed -E 's#^([^/]+)/(In)?Release$#\1/InRelease#; t; s#^([^/]+/[^/]+/[^/]+)/.*#\1#' ||
			true
	} | sort -u
}
apt_update() {
	local log=$CACHE/apt-update.log try index failed needed
	for try in 1 2 3; do
		in_root_at "$tmp" apt-get update >"$log" 2>&1 && return 0
		failed=$(failed_indices "$log")
		[ -n "$failed" ] || { tail -n 20 "$log" >&2; die "apt-get update failed in the root (log: $log)"; }
		needed=
		for index in $failed; do
			if needed_index "$index"; then
				needed="$needed $index"
			else
				log "WARNING: the mirror's $index index failed; the recipe does not use it"
			fi
		done
		[ -z "$needed" ] && return 0
		grep -E '^(E|W): ' "$log" >&2 || true
		[ "$try" = 3 ] && break
		log "root: the mirror's$needed index failed its check; trying again in 60 s"
		sleep 60
	done
	die "the mirror ($mirror) is inconsistent: an index the root needs failed three times:$needed" \
	    "(it did not download, did not match the mirror's own Release file, or that Release file" \
	    "is not valid: the E: lines above; log: $log). Try again later, or point the host's apt" \
	    "sources at another mirror."
}
apt_update

# python3-venv (QEMU's configure makes a venv) pulls in ca-certificates, whose
# postinst replaces /etc/ssl/certs/ca-certificates.crt: the host's bundle is
# bound over it (in_root_at), so it is unmounted first, in this command's
# mount namespace only.
in_root_at "$tmp" sh -c "
	set -e
	export DEBIAN_FRONTEND=noninteractive
	umount /etc/ssl/certs/ca-certificates.crt
	apt-get install -y -qq -t $SUITE-backports ${BACKPORTS_PKGS[*]} >/dev/null
	apt-get install -y -qq ${PKGS[*]} ${S390X_PKGS[*]} >/dev/null
" || die "installing the toolchain into the root failed (apt-get install; the lines above say which package)"
in_root_at "$tmp" "$TOP/scripts/build-busybox.sh" || die "building the s390x busybox failed"
in_root_at "$tmp" apt-get clean

# What the root holds, as the cache keys and make test's header see it.
in_root_at "$tmp" sh -c '
	set -e
	echo "rustc: $(rustc --version)"
	echo "cargo: $(cargo --version)"
	echo "bindgen: $(bindgen --version)"
	echo "clang: $(clang --version | head -n1)"
	echo "ld.lld: $(ld.lld --version)"
	echo "gcc: $(gcc --version | head -n1)"
	echo "qemu: $(qemu-system-x86_64 --version | head -n1)"
	echo "s390x-gcc: $(s390x-linux-gnu-gcc --version | head -n1)"
	echo "qemu-s390x-firmware: $(dpkg-query -W -f "\${Version}" qemu-system-s390x)"
	echo "busybox-s390x: Debian source $(cat '"$S390X_BUSYBOX"'.version), $(file -b '"$S390X_BUSYBOX"' | cut -d, -f1-3)"
	echo "packages: $(dpkg-query -W | sha256sum | cut -c1-16)"
' >"$tmp/etc/mlx4-bf-toolchain.new"
grep -q '^rustc: rustc 1\.9[6-9]\|^rustc: rustc 1\.[1-9][0-9][0-9]' "$tmp/etc/mlx4-bf-toolchain.new" ||
	die "the root's rustc is older than 1.96: $(head -n1 "$tmp/etc/mlx4-bf-toolchain.new")"
mv "$tmp/etc/mlx4-bf-toolchain.new" "$tmp/etc/mlx4-bf-toolchain"
mv "$tmp" "$ROOT"
log "root: made in $((SECONDS - start)) s, $(du -sh "$ROOT" | cut -f1)"
echo "$ROOT"
