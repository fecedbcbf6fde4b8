#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the Rust-enabled test kernel with LLVM=1 (clang and rustc, as
# Rust-for-Linux prefers) out of tree, under the cache directory, in a build
# directory keyed by everything that affects the result: the kernel source
# and its patch series (below), the config fragments, this script and the
# toolchain root's versions (its package list). A warm cache reuses the
# build; a changed input gets a new directory, so a stale build can never be
# picked up. Runs inside the root.
# With ARCH=s390 it cross-builds the s390x kernel instead (gcc, the s390
# fragment; scripts/lib.sh: KMAKE_FLAGS).
#
# The kernel carries the project's patch series, tools/linux/*.patch (the
# RDMA bindings and helpers the module needs): the build's source is a copy
# of the kernel source with the series applied, made of hard links to it
# (no file data copied but for the files the series changes), keyed by the
# source and the series, made once and shared by every build of them. The
# source itself is never written: other checkouts build from it with their
# own series.
#
# Usage: [ARCH=s390] build-kernel.sh [base|debug]    Prints the build directory.

source "$(dirname "$0")/lib.sh"

KSRC=${KERNEL_SRC:-$TOOLS/linux}
[ -f "$KSRC/Makefile" ] || die "no kernel tree at $KSRC (run scripts/kernel-source.sh)"
PATCHES=("$TOP"/tools/linux/*.patch)
[ -f "${PATCHES[0]}" ] || die "no patches in $TOP/tools/linux"

# What the series changes, for the keys: each patch from its first diff on,
# so that a commit message's words (a patch's measured numbers, filled in
# after the build they were measured on) do not rebuild every kernel.
patch_diffs() {
	local p
	for p in "${PATCHES[@]}"; do
		sed -n '/^diff --git /,$p' "$p"
	done
}

# make_patched SRC DIR: DIR as SRC with the series applied.
make_patched() {
	local src=$1 dir=$2 f p
	log "kernel: the source with tools/linux/*.patch applied, in $dir"
	rm -rf "$dir" "$dir.tmp"
	cp -al "$src" "$dir.tmp" 2>/dev/null || { rm -rf "$dir.tmp"; cp -a "$src" "$dir.tmp"; }
	# A file the series changes becomes a file of its own first, so that
	# nothing can write through its link into SRC, however patch writes.
	for f in $(sed -n 's|^+++ b/||p' "${PATCHES[@]}" | sort -u); do
		if [ -e "$dir.tmp/$f" ]; then
			cp --remove-destination "$src/$f" "$dir.tmp/$f"
		fi
	done
	for p in "${PATCHES[@]}"; do
		log "kernel: applying ${p#"$TOP"/}"
		patch -d "$dir.tmp" -p1 --forward --batch --quiet --fuzz=0 \
			--no-backup-if-mismatch <"$p" || die "$p does not apply to $src"
	done
	mv "$dir.tmp" "$dir"
	touch "$dir/.mlx4-bf-complete"
}

# patched_source SRC: sets PSRC to SRC's patched copy, made if missing, and
# holds it (a shared lock on fd 5) until this script ends, so that another
# checkout's build cannot prune it meanwhile. Copies that no kernel build
# uses any more go: a build directory's Makefile names its source, and one
# being built holds the lock of its source.
patched_source() {
	local src=$1 key d base
	key=$( {
		echo "src=$src"
		cat "$src/.debian-package" 2>/dev/null || true
		make -s -C "$src" kernelversion
		patch_diffs
	} | sha256sum | cut -c1-16)
	PSRC=$TOOLS/linux-patched-$key
	mkdir -p "$TOOLS"
	exec 5>>"$PSRC.lock"
	flock -s 5
	# Made by the first caller; converting the lock is not atomic, so
	# check again once it is shared.
	until [ -f "$PSRC/.mlx4-bf-complete" ]; do
		flock -x 5
		if [ ! -f "$PSRC/.mlx4-bf-complete" ]; then
			make_patched "$src" "$PSRC"
		fi
		flock -s 5
	done
	for d in "$TOOLS"/linux-patched-*; do
		base=${d%.tmp}
		case $d in "$PSRC" | "$PSRC.tmp" | *.lock) continue ;; esac
		grep -qsF "include $base/Makefile" "$CACHE"/kbuild-*/Makefile && continue
		(flock -n 7 && rm -rf "$base" "$base.tmp" "$base.lock") 7>>"$base.lock"
	done
}

patched_source "$KSRC"
KSRC=$PSRC
KSRC_CONFIGS=$KSRC/kernel/configs

flavour=${1:-base}
# x86: on kvm_guest.config; s390: on tinyconfig alone.
base_configs=("$KSRC_CONFIGS/kvm_guest.config")
case $ARCH-$flavour in
x86_64-base)  fragments=("$TOP/configs/base.config") ;;
x86_64-debug) fragments=("$TOP/configs/base.config" "$TOP/configs/debug.config") ;;
s390-base)    fragments=("$TOP/configs/s390.config"); base_configs=() ;;
*)            die "unknown KCONFIG '$flavour' for $ARCH (base or debug; s390: base)" ;;
esac

key=$( {
	echo "src=$KSRC"
	echo "make ${KMAKE_FLAGS[*]}"
	cat "$KSRC/.debian-package" 2>/dev/null || true
	make -s -C "$KSRC" kernelversion
	git -C "$KSRC" rev-parse HEAD 2>/dev/null || true
	patch_diffs
	cat "${fragments[@]}"
	toolchain_id
	cat "$0"
} | sha256sum | cut -c1-16)

# x86's directories keep their names; s390's say so.
[ "$ARCH" = x86_64 ] || flavour=$ARCH-$flavour
KBUILD=$CACHE/kbuild-$flavour-$key
mkdir -p "$CACHE"
# One build per directory at a time: a second caller waits, then reuses it.
exec 9>"$KBUILD.lock"
flock 9
if [ -f "$KBUILD/.mlx4-bf-complete" ]; then
	log "kernel: cached build $KBUILD"
	echo "$KBUILD"
	exit 0
fi

# Disk is not free: of the other builds of this flavour keep only the newest
# complete one (another config or toolchain to switch back to), and those
# another checkout is building (it holds .lock) or running (mlx4-bf.sh holds
# .use shared while it uses a cached kernel).
keep=$(find "$CACHE" -maxdepth 2 -path "$CACHE/kbuild-$flavour-*/.mlx4-bf-complete" \
	! -path "$KBUILD/*" -printf '%T@ %h\n' 2>/dev/null | sort -rn | head -n1 | cut -d' ' -f2-)
for dir in "$CACHE"/kbuild-"$flavour"-*; do
	case $dir in
	"$KBUILD" | "$keep" | *.lock | *.use) ;;
	*) (flock -n 7 && flock -n 8 && rm -rf "$dir" "$dir.lock" "$dir.use") \
		7>>"$dir.use" 8>>"$dir.lock" ;;
	esac
done

mkdir -p "$KBUILD"
kmake() { make -s -C "$KSRC" O="$KBUILD" "${KMAKE_FLAGS[@]}" "$@"; }

log "kernel: checking the Rust toolchain (make rustavailable)"
kmake rustavailable >&2

log "kernel: configuring ($flavour)"
kmake tinyconfig >&2
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$KBUILD" "$KBUILD/.config" \
	"${base_configs[@]}" "${fragments[@]}" >/dev/null
kmake olddefconfig >&2

# merge_config only warns; a silently dropped option would give a kernel the
# tests cannot run on, so insist on every option the fragments ask for.
missing=0
for f in "${fragments[@]}"; do
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*) grep -qx -F "$line" "$KBUILD/.config" ||
			{ echo "config: wanted $line, got: $(grep "^${line%%=*}=" "$KBUILD/.config" || echo unset)" >&2; missing=1; } ;;
		"# CONFIG_"*" is not set") ! grep -q "^${line:2:$((${#line} - 13))}=" "$KBUILD/.config" ||
			{ echo "config: wanted '$line'" >&2; missing=1; } ;;
		esac
	done <"$f"
done
[ $missing = 0 ] || die "the kernel config lacks options the tests need (see above)"

log "kernel: building $ARCH bzImage and modules (Module.symvers) with -j$(nproc) (10-20 minutes cold)"
start=$SECONDS
kmake -j"$(nproc)" bzImage modules >&2
log "kernel: built in $((SECONDS - start)) s"
touch "$KBUILD/.mlx4-bf-complete"
echo "$KBUILD"
