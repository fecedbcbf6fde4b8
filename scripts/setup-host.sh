#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Installs everything the test bed needs: host packages with apt-get, the
# kernel source and a rust-src matching rustc from Debian through a private apt
# configuration under the cache (the host's apt setup is left untouched),
# libclang from PyPI and bindgen-cli from crates.io. Idempotent and quick when
# everything is already there.

source "$(dirname "$0")/lib.sh"

HOST_PKGS=(flex bison bc libelf-dev libssl-dev cpio busybox-static
	   qemu-system-x86 kmod python3-venv xz-utils rsync linux-libc-dev)

need_host_pkgs() {
	local p
	for p in "${HOST_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || return 0
	done
	return 1
}

if need_host_pkgs; then
	[ "$(id -u)" = 0 ] || die "host packages missing (${HOST_PKGS[*]}); run as root"
	log "installing host packages: ${HOST_PKGS[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${HOST_PKGS[@]}" >/dev/null
fi

mkdir -p "$TOOLS/bin" "$CACHE/apt"

# --- Private apt configuration for newer Debian suites -------------------
APTDIR=$CACHE/apt
# Usage: apt_private apt-get|apt-cache ARGS...
apt_private() {
	local tool=$1
	shift
	"$tool" -o APT::Sandbox::User=root \
		-o Dir::Etc::SourceList="$APTDIR/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$APTDIR/lists" \
		-o Dir::Cache="$APTDIR/cache" \
		-o Debug::NoLocking=1 "$@"
}

private_apt_update() {
	[ -f "$APTDIR/updated" ] && return 0
	# Reuse the mirror the host already uses, so no host is named here.
	local mirror
	mirror=$({ cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
			2>/dev/null || true; } | grep -E '^(URIs:|deb )' |
		grep -o -E 'https?://[^ ]+/debian/?' | head -n1 || true)
	[ -n "$mirror" ] || die "cannot find the Debian mirror in the host's apt sources"
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
	cat >"$APTDIR/sources.list" <<-SRC
	deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main
	deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie-backports main
	SRC
	log "updating private apt lists (sid, trixie-backports)"
	apt_private apt-get update -qq
	touch "$APTDIR/updated"
}

# Download one package into $APTDIR/debs; print the .deb path.
fetch_deb() {
	local name=$1 want=$2 version
	mkdir -p "$APTDIR/debs"
	version=$(apt_private apt-cache madison "$name" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
		  grep -x -F "$want" | head -n1 || true)
	if [ -z "$version" ]; then
		version=$(apt_private apt-cache madison "$name" | awk -F'|' '{gsub(/ /,"",$2); print $2}' | head -n1)
		[ -n "$version" ] || die "package $name is not served"
		log "WARNING: $name $want is not served; using $version"
	fi
	(cd "$APTDIR/debs" && apt_private apt-get download -qq "$name=$version" >/dev/null)
	ls "$APTDIR/debs/${name}_${version/*:/}"_*.deb
}

# --- Kernel source -------------------------------------------------------
if [ -z "${KERNEL_SRC:-}" ] && [ ! -f "$TOOLS/linux/.complete" ]; then
	private_apt_update
	deb=$(fetch_deb linux-source-7.2 "$KERNEL_PKG_VERSION")
	log "unpacking $(basename "$deb")"
	rm -rf "$TOOLS/linux" "$TOOLS/linux-deb"
	dpkg-deb -x "$deb" "$TOOLS/linux-deb"
	mkdir -p "$TOOLS/linux"
	tar -C "$TOOLS/linux" --strip-components=1 -xf "$TOOLS"/linux-deb/usr/src/linux-source-*.tar.*
	rm -rf "$TOOLS/linux-deb"
	basename "$deb" >"$TOOLS/linux/.debian-package"
	touch "$TOOLS/linux/.complete"
	rm -f "$deb"
fi

# --- rust-src matching rustc exactly -------------------------------------
if [ ! -f "$TOOLS/rust-src/.version-$RUSTC_VERSION" ]; then
	private_apt_update
	want=$(apt_private apt-cache madison rust-src | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
	       grep -E "^${RUSTC_VERSION//./\\.}\+" | head -n1 || true)
	[ -n "$want" ] || die "Debian serves no rust-src $RUSTC_VERSION (rustc is $RUSTC_VERSION)"
	deb=$(fetch_deb rust-src "$want")
	rm -rf "$TOOLS/rust-src"
	dpkg-deb -x "$deb" "$TOOLS/rust-src"
	touch "$TOOLS/rust-src/.version-$RUSTC_VERSION"
	rm -f "$deb"
fi

# --- libclang from PyPI --------------------------------------------------
if [ ! -e "$LIBCLANG_PATH/libclang.so" ]; then
	log "installing libclang $LIBCLANG_WHEEL_VERSION from PyPI"
	python3 -m venv "$TOOLS/venv"
	"$TOOLS/venv/bin/pip" install -q "libclang==$LIBCLANG_WHEEL_VERSION"
	so=$(find "$TOOLS/venv" -name 'libclang.so' | head -n1)
	[ -n "$so" ] || die "the libclang wheel has no libclang.so"
	rm -rf "$LIBCLANG_PATH"
	ln -s "$(dirname "$so")" "$LIBCLANG_PATH"
fi

# --- bindgen-cli ---------------------------------------------------------
if ! "$TOOLS/bin/bindgen" --version 2>/dev/null | grep -q "$BINDGEN_VERSION"; then
	log "installing bindgen-cli $BINDGEN_VERSION (about a minute)"
	cargo install -q --locked --root "$TOOLS" "bindgen-cli@$BINDGEN_VERSION"
fi
