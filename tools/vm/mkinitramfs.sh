#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Usage: mkinitramfs.sh OUT.cpio.gz MODULE.ko MODE CMD MODPARAMS [DIR...]
# Packs busybox ($BUSYBOX, /bin/busybox unless given: the s390x guest gets
# an s390x one), the module, the guest command and every file of each DIR
# (copied into /work) into a gzip'ed newc cpio.

set -euo pipefail
out=$1 ko=$2 mode=$3 cmd=$4 modparams=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d)
chmod 0755 "$root"  # mktemp makes it 0700: "/" of the guest, which non-root tests traverse
trap 'rm -rf "$root"' EXIT

mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,work,lib/modules,etc/mlx4-bf}
cp "${BUSYBOX:-/bin/busybox}" "$root/bin/busybox"
install -m 0755 "$here/init.sh" "$root/init"
cp "$ko" "$root/lib/modules/mlx4_bf.ko"
printf 'MODE=%q\nMODPARAMS=%q\n' "$mode" "$modparams" >"$root/etc/mlx4-bf/env"
printf '%s\n' "$cmd" >"$root/etc/mlx4-bf/cmd.sh"
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
for dir in "$@"; do
	[ -d "$dir" ] || { echo "error: EXTRA '$dir' is not a directory" >&2; exit 1; }
	cp -a "$dir"/. "$root/work/"
done
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out"
