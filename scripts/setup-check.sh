#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The setup check: makes a throw-away toolchain root from scratch with the
# recipe as it is in this checkout (scripts/setup-root.sh: debootstrap, the apt
# indices, every package install, the s390x busybox; no kernel, no QEMU build)
# under a temporary cache, builds rdma-core and perftest in it for both guests
# (scripts/build-rdma-core.sh), checks what a fresh machine depends on, prints
# what it took and removes it. A cached root cannot hide a broken recipe from
# it: run it whenever setup-root.sh, build-busybox.sh or build-rdma-core.sh
# changes (make setup-check).
#
# Usage: setup-check.sh     (as root; about 7 minutes, 3 GiB under $TMPDIR)

source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "the setup check makes a root with debootstrap: run it as root"
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/mlx4-bf-setup-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
log "setup-check: a new root under $scratch"
start=$SECONDS
root=$(MLX4_BF_CACHE=$scratch "$TOP/scripts/setup-root.sh")
took=$((SECONDS - start))

# shellcheck disable=SC2016
MLX4_BF_CACHE=$scratch CACHE=$scratch in_root_at "$root" sh -c '
	set -e
	foreign=$(dpkg --print-foreign-architectures)
	[ -z "$foreign" ] || { echo "setup-check: foreign architectures: $foreign" >&2; exit 1; }
	if ls /var/lib/apt/lists | grep "_binary-" | grep -v -e "_binary-amd64_" -e "_binary-all_"; then
		echo "setup-check: the root holds the indices of another architecture (above)" >&2
		exit 1
	fi
	file -b '"$S390X_BUSYBOX"' | grep -q "IBM S/390.*statically linked" ||
		{ echo "setup-check: '"$S390X_BUSYBOX"' is not a static s390x binary" >&2; exit 1; }
	sed "s/^/setup-check: /" /etc/mlx4-bf-toolchain
' || die "setup-check: the new root is not what the recipe promises"
# rdma-core and perftest from Debian's sources for either guest, in the new
# root: what a fresh machine's first upstream boot builds (the build checks
# that each program is a static one of its architecture).
for arch in x86_64 s390; do
	start=$SECONDS
	rdma=$(ARCH=$arch MLX4_BF_CACHE=$scratch CACHE=$scratch in_root_at "$root" \
		"$TOP/scripts/build-rdma-core.sh") || die "setup-check: building rdma-core for $arch failed"
	echo "setup-check: rdma-core for $arch: $(cat "$rdma/versions"); $(ls "$rdma/bin" | wc -l)" \
		"programs, $(du -sh "$rdma" | cut -f1), built in $((SECONDS - start)) s"
done
echo "setup-check: indices: $(ls "$root/var/lib/apt/lists" | sed -n 's/.*_dists_\(.*\)_\(Packages\|Sources\)$/\1/p' |
	tr '_' '/' | sort | paste -sd ' ')"
echo "setup-check: root made from scratch in $took s, $(du -sh "$root" | cut -f1)"
echo "setup-check: ok"
