#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's own amd64 binaries of programs the x86_64 guest runs that cannot
# be built here, with what they need to run there, as one of two sets:
# rdma (the default), iproute2's rdma tool (rdma dev, link, resource,
# statistic), for the upstream and provider boots; pyverbs, that and
# python3 with rdma-core's Python bindings and tests (python3-pyverbs),
# libibverbs and Debian's libmlx4, for make pyverbs. The mirror serves no source
# tarball of iproute2 or of libmnl, which it links, so they are not built
# statically like rdma-core (scripts/build-rdma-core.sh); trixie's binary
# packages are served, and the root has trixie's amd64 Packages index.
# The guest is a busybox initramfs without a libc: each program runs there
# by the loader of its own glibc, which bin/NAME (a sh wrapper) calls with
# --library-path naming the libraries beside it and --inhibit-cache (no
# /etc/ld.so.cache is read, on the host either), so the tree runs from
# wherever it lies (the guest's /work/debroot). Runs inside the toolchain
# root; prints the output directory:
#
#   bin/NAME                   a wrapper: the loader, the library path, the program
#   usr/bin/NAME, ...          the program, as its package installs it
#   usr/lib/x86_64-linux-gnu/  the loader and the shared libraries the
#                              programs need, each under its SONAME
#   versions                   the packages, one line; the files kept
# and in the pyverbs set also, whole (TREES): python's standard library,
# pyverbs, rdma-core's tests (usr/share/doc/rdma-core/tests, unzipped:
# run_tests.py), and libmlx4 as the libibverbs provider it dlopen()s
# (libmlx4-rdmav34.so in the library directory: bin/python3 names it in
# RDMAV_DRIVERS, there is no /etc/libibverbs.d in the guest).
#
# The packages are GUEST_DEBS of scripts/lib.sh (and PYVERBS_DEBS for
# pyverbs), each pinned to a version (or the root's index's, where an
# update replaced the pin)
# (name=version), downloaded by apt-get download, which checks each .deb
# against the SHA256 of trixie's signed Packages index, and unpacked with
# dpkg-deb -x into one tree. Of it only PROGRAMS (below) are kept and the
# libraries of their ELF NEEDED closure (readelf -d, followed through the
# libraries to the loader, which libc.so.6 names); a library that none of
# the packages holds stops the build naming it and what needs it: add its
# package to the set's list. No package is installed, in the root or anywhere.
# More programs: their packages (and what their NEEDED closure asks for) to
# the set's list, their paths to PROGRAMS. A program that dlopen()s what its
# NEEDED entries do not name (python3's extension modules, libibverbs'
# providers) needs those files kept too, as roots of the closure (TREES,
# PLUGINS).
#
# Cached in $CACHE/debroot-amd64-<set>-<key>, keyed by the pinned packages, this
# script and the root's toolchain record; one build at a time (flock);
# trees of other keys unused for a day are removed.
#
# Usage: build-guest-debs.sh [rdma|pyverbs]     (ARCH=x86_64, inside the root)

source "$(dirname "$0")/lib.sh"

SET=${1:-rdma}

[ -n "${MLX4_BF_IN_ROOT:-}" ] || die "build-guest-debs.sh runs inside the toolchain root"
[ "$ARCH" = x86_64 ] ||
	die "build-guest-debs.sh: Debian's amd64 binaries are for the x86_64 guest only, not ARCH=$ARCH (the root reads no index of another architecture)"

DEB_ARCH=amd64
# Where the libraries are in the packages (trixie's are merged-/usr) and
# in the output.
LIBDIR=usr/lib/x86_64-linux-gnu
PYTHON=python3.13
# Per set: the packages; the programs kept, as their packages install
# them, each with bin/NAME; directories kept whole (their ELF files are
# roots of the closure); libraries dlopen()ed, not NEEDED, kept in LIBDIR
# (as "path-in-packages=name").
TREES=()
PLUGINS=()
case $SET in
rdma)
	DEBS=("${GUEST_DEBS[@]}")
	PROGRAMS=(usr/bin/rdma) ;;
pyverbs)
	DEBS=("${GUEST_DEBS[@]}" "${PYVERBS_DEBS[@]}")
	PROGRAMS=(usr/bin/rdma "usr/bin/$PYTHON")
	TREES=("usr/lib/$PYTHON" usr/lib/python3/dist-packages/pyverbs usr/share/doc/rdma-core/tests)
	PLUGINS=("$LIBDIR/libibverbs/libmlx4-rdmav34.so=libmlx4-rdmav34.so") ;;
*)	die "build-guest-debs.sh: no set '$SET' (rdma or pyverbs)" ;;
esac
# Python's extension modules that need libraries of packages not in the
# set, none of which rdma-core's tests import: left out.
DYNLOAD_LEFT_OUT='(_test.*|_ctypes_test|_xxtestfuzz|xx.*|_curses.*|readline|_dbm|_gdbm|_sqlite3|_ssl|_hashlib|_tkinter)\.cpython'

key=$( {
	echo "$SET ${DEBS[*]}"
	echo "${PROGRAMS[*]} ${TREES[*]} ${PLUGINS[*]} $DEB_ARCH"
	toolchain_id
	cat "$0"
} | sha256sum | cut -c1-16)

DDIR=$CACHE/debroot-$DEB_ARCH-$SET-$key
mkdir -p "$CACHE"
exec 9>"$DDIR.lock"
flock 9
if [ -f "$DDIR/versions" ]; then
	log "debs: cached tree $DDIR"
	touch "$DDIR/versions"
	echo "$DDIR"
	exit 0
fi
# Trees of other keys not used for a day (checkouts of other versions of
# this script share the cache).
for dir in "$CACHE"/debroot-"$DEB_ARCH"-*; do
	case $dir in
	"$DDIR" | *.lock | *.tmp) ;;
	*) [ -n "$(find "$dir/versions" -mmin -1440 2>/dev/null)" ] || rm -rf "$dir" "$dir.lock" ;;
	esac
done

work=$DDIR.tmp
rm -rf "$work"
mkdir -p "$work/dl" "$work/ext" "$work/out"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

log "debs: Debian's $DEB_ARCH packages for $SET: ${DEBS[*]}"
# A pin a stable or security update has since replaced is not in a newer
# root's index (the mirror serves a suite's current versions only): the
# index's version of that package instead, said in the log and in
# versions. Any other package missing stops the download below.
pins=()
for pin in "${DEBS[@]}"; do
	if ! apt-cache madison "${pin%%=*}" 2>/dev/null |
		awk -F'|' -v v="${pin#*=}" '{ gsub(/ /, "", $2) } $2 == v { f = 1 } END { exit !f }'; then
		now=$(apt-cache policy "${pin%%=*}" 2>/dev/null | sed -n 's/^ *Candidate: //p')
		if [ -n "$now" ] && [ "$now" != "(none)" ]; then
			log "debs: ${pin%%=*} ${pin#*=} is not in the root's index any more: taking its $now"
			pin=${pin%%=*}=$now
		fi
	fi
	pins+=("$pin")
done
DEBS=("${pins[@]}")
# apt-get download refuses a package or version the index does not list
# and checks each file's hash against it. As root in the root: no _apt
# sandbox user for the download directory.
(cd "$work/dl" && apt-get download -q -o APT::Sandbox::User=root "${DEBS[@]}") \
	>"$work/download.log" 2>&1 || {
	cat "$work/download.log" >&2
	die "debs: apt-get download failed: a pin of GUEST_DEBS or PYVERBS_DEBS (scripts/lib.sh) not in the root's $DEB_ARCH index? (apt-cache policy NAME in the root)"
}
# Each pin is one .deb of that name, version and architecture.
for pin in "${DEBS[@]}"; do
	found=
	for deb in "$work"/dl/*.deb; do
		[ "$(dpkg-deb -f "$deb" Package)" = "${pin%%=*}" ] || continue
		[ "$(dpkg-deb -f "$deb" Version)" = "${pin#*=}" ] ||
			die "debs: $deb is not version ${pin#*=}"
		case $(dpkg-deb -f "$deb" Architecture) in
		"$DEB_ARCH" | all) ;;
		*) die "debs: $deb is not $DEB_ARCH" ;;
		esac
		found=$deb
	done
	[ -n "$found" ] || die "debs: no .deb of $pin downloaded"
	dpkg-deb -x "$found" "$work/ext"
done

EXT=$work/ext
OUT=$work/out

# in_ext PATH: PATH of the unpacked packages with its symbolic links
# followed inside them (an absolute link names the packages' /, not the
# root's); nothing if it is not there.
in_ext() {
	local p=$EXT/$1 t i
	for i in 1 2 3 4 5 6 7 8; do
		[ -L "$p" ] || break
		t=$(readlink "$p")
		case $t in
		/*) p=$EXT$t ;;
		*) p=${p%/*}/$t ;;
		esac
	done
	[ -f "$p" ] && [ ! -L "$p" ] && echo "$p"
}
elf_check() { # file
	file -b "$1" | grep -q '^ELF 64-bit LSB .*x86-64' ||
		die "debs: ${1#"$EXT"/} is not an x86-64 ELF file: $(file -b "$1")"
}
needed() { # elf
	readelf -dW "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]$/\1/p'
}

# The programs, then the NEEDED closure: each library once, under its
# SONAME, from the packages' library directory.
roots=()
for prog in "${PROGRAMS[@]}"; do
	src=$(in_ext "$prog") || die "debs: $prog is in none of the packages (${DEBS[*]})"
	elf_check "$src"
	mkdir -p "$OUT/${prog%/*}"
	cp "$src" "$OUT/$prog"
	roots+=("$src")
done
mkdir -p "$OUT/$LIBDIR"
for plugin in "${PLUGINS[@]}"; do
	src=$(in_ext "${plugin%%=*}") || die "debs: ${plugin%%=*} is in none of the packages (${DEBS[*]})"
	elf_check "$src"
	cp "$src" "$OUT/$LIBDIR/${plugin#*=}"
	roots+=("$src")
done
# The trees: a symbolic link in them is replaced by what it names in the
# packages, or goes if that is not there (python's sitecustomize.py names
# /etc/python3.13/, not shipped); compressed files (Debian's docs) are
# unpacked; the extension modules left out go.
for tree in "${TREES[@]}"; do
	[ -d "$EXT/$tree" ] || die "debs: $tree is in none of the packages (${DEBS[*]})"
	mkdir -p "$OUT/${tree%/*}"
	cp -a "$EXT/$tree" "$OUT/$tree"
	while IFS= read -r -d '' link; do
		rel=${link#"$OUT"/}
		rm "$link"
		src=$(in_ext "$rel") && cp "$src" "$link"
	done < <(find "$OUT/$tree" -type l -print0)
	find "$OUT/$tree" -type f -name '*.gz' -exec gunzip {} +
	find "$OUT/$tree" -type f -regextype posix-extended \
		-regex ".*/lib-dynload/$DYNLOAD_LEFT_OUT[^/]*" -delete
	while IFS= read -r -d '' f; do
		case $(file -b "$f") in ELF*) elf_check "$f"; roots+=("$f") ;; esac
	done < <(find "$OUT/$tree" -type f -name '*.so' -print0)
done
declare -A have=()
queue=("${roots[@]}")
while [ ${#queue[@]} -gt 0 ]; do
	elf=${queue[0]}
	queue=("${queue[@]:1}")
	for soname in $(needed "$elf"); do
		[ -z "${have[$soname]:-}" ] || continue
		lib=$(in_ext "$LIBDIR/$soname") ||
			die "debs: $soname (NEEDED by ${elf#"$EXT"/}) is in none of the packages (${DEBS[*]}): add its package to the set's list in scripts/lib.sh"
		elf_check "$lib"
		[ "$(readelf -dW "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')" = "$soname" ] ||
			die "debs: ${lib#"$EXT"/} is not $soname"
		cp "$lib" "$OUT/$LIBDIR/$soname"
		have[$soname]=1
		queue+=("$lib")
	done
done

# The wrappers: each program by the loader it names (PT_INTERP), which
# must be the one of the closure.
for prog in "${PROGRAMS[@]}"; do
	interp=$(readelf -lW "$OUT/$prog" | sed -n 's/.*Requesting program interpreter: \(.*\)\]$/\1/p')
	[ -n "$interp" ] || die "debs: $prog names no loader (static? then it needs no wrapper)"
	loader=${interp##*/}
	[ -n "${have[$loader]:-}" ] ||
		die "debs: $prog's loader $interp is not in the NEEDED closure (${!have[*]})"
	name=${prog##*/}
	env=
	# python3: its prefix (the loader runs it, /proc/self/exe names the
	# loader), libmlx4 for libibverbs, no bytecode written beside the tree.
	if [ "$name" = "$PYTHON" ]; then
		name=python3
		env="PYTHONHOME=\$d/usr RDMAV_DRIVERS=mlx4 PYTHONDONTWRITEBYTECODE=1 "
	fi
	mkdir -p "$OUT/bin"
	cat >"$OUT/bin/$name" <<EOF
#!/bin/sh
# $name of Debian's packages ($SET: ${DEBS[*]}), run by their loader with
# the libraries beside it (scripts/build-guest-debs.sh).
case \$0 in */*) d=\${0%/*}/.. ;; *) d=.. ;; esac
d=\$(cd "\$d" && pwd) || exit 127
${env:+export $env
}exec "\$d/$LIBDIR/$loader" --inhibit-cache --library-path "\$d/$LIBDIR" \\
	--argv0 $name "\$d/$prog" "\$@"
EOF
	chmod 0755 "$OUT/bin/$name"
done

# The tree runs here as in the guest (the root is amd64 too): pyverbs and
# rdma-core's tests import (no device is needed to list them).
if [ "$SET" = pyverbs ]; then
	n=$(cd "$OUT/usr/share/doc/rdma-core" && "$OUT/bin/python3" tests/run_tests.py --list-tests 2>&1 |
		grep -c '^tests\.test_') || true
	[ "$n" -gt 100 ] || {
		(cd "$OUT/usr/share/doc/rdma-core" && "$OUT/bin/python3" tests/run_tests.py --list-tests 2>&1 | tail -n 20) >&2
		die "debs: rdma-core's tests do not load with the pyverbs tree ($n listed)"
	}
	log "debs: rdma-core's tests load: $n listed"
fi

{
	echo "Debian $DEB_ARCH ($SET): ${DEBS[*]}"
	(cd "$OUT" && find . -type f ! -name versions | grep -v -E "^\./(${TREES[*]// /|})/" |
		sed 's|^\./|  |' | sort)
	for tree in "${TREES[@]}"; do echo "  $tree/ ($(find "$OUT/$tree" -type f | wc -l) files)"; done
} >"$OUT/versions"
rm -rf "$DDIR"
mv "$OUT" "$DDIR"
log "debs: built in $((SECONDS - start)) s, $(du -sh "$DDIR" | cut -f1): ${PROGRAMS[*]}, ${!have[*]}"
echo "$DDIR"
