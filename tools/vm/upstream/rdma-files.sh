#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Usage: rdma-files.sh DEST
# Copies rdma-core's tools and perftest's (installed in the toolchain root by
# scripts/setup-root.sh), libibverbs' mlx4 provider with its driver file,
# and every shared library they load (ldd), into DEST at their absolute
# paths: the upstream boot copies DEST over the guest's / (upstream.sh).
# Runs in the toolchain root, whose libraries are the ones copied.
set -eu
dest=$1
BINS="ibv_devinfo ibv_devices ibv_rc_pingpong ib_send_lat ib_write_lat ib_read_lat ib_send_bw ib_write_bw"
PROVIDER_DIR=/usr/lib/x86_64-linux-gnu/libibverbs

files=/etc/libibverbs.d/mlx4.driver
elves=$(ls "$PROVIDER_DIR"/libmlx4-rdmav*.so)
for b in $BINS; do
	p=$(command -v "$b") || { echo "rdma-files: $b not in the root (setup-root.sh RDMA_PKGS)" >&2; exit 1; }
	elves="$elves $p"
done
for e in $elves; do
	files="$files $e"
	# "name => /path (addr)" and the loader's "/path (addr)".
	files="$files $(ldd "$e" | sed -n 's#.*=> \(/[^ ]*\) .*#\1#p; s#^[[:space:]]*\(/[^ ]*\) (.*#\1#p')"
done
for f in $(printf '%s\n' $files | sort -u); do
	mkdir -p "$dest$(dirname "$f")"
	cp -L "$f" "$dest$f"
done
