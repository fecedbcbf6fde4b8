#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's own binaries of programs the guest runs that cannot be built
# here, with what they need to run there, as one of two sets: rdma (the
# default), iproute2's rdma tool (rdma dev, link, resource, statistic),
# for the upstream and provider boots, amd64 for the x86_64 guest and
# s390x for the s390x one; pyverbs (x86_64 only), that and python3 with
# rdma-core's Python bindings and tests (python3-pyverbs), libibverbs and
# Debian's libmlx4, for make pyverbs. The mirror serves no source tarball
# of iproute2 or of libmnl, which it links, so they are not built
# statically like rdma-core (scripts/build-rdma-core.sh); trixie's binary
# packages are served, of both architectures. The root has trixie's amd64
# Packages index; for s390x this script reads the mirror's s390x index
# into an apt state of its own (apt's Dir::State and Dir::Etc options: the
# root's apt and dpkg are not touched), signed by the same archive keys.
# The guest is a busybox initramfs without a libc: each program runs there
# by the loader of its own glibc, which bin/NAME (a sh wrapper) calls with
# --library-path naming the libraries beside it and --inhibit-cache (no
# /etc/ld.so.cache is read, on the host either), so the tree runs from
# wherever it lies (the guest's /work/debroot). Runs inside the toolchain
# root; prints the output directory:
#
#   bin/NAME                   a wrapper: the loader, the library path, the program
#   usr/bin/NAME, ...          the program, as its package installs it
#   usr/lib/<triplet>/         the loader and the shared libraries the
#                              programs need, each under its SONAME
#   versions                   the packages, one line; the files kept
# and in the pyverbs set also, whole (TREES): python's standard library,
# pyverbs, rdma-core's tests (usr/share/doc/rdma-core/tests, unzipped:
# run_tests.py), and libmlx4 as the libibverbs provider it dlopen()s
# (libmlx4-rdmav34.so in the library directory: bin/python3 names it in
# RDMAV_DRIVERS, there is no /etc/libibverbs.d in the guest).
#
# The packages are GUEST_DEBS of scripts/lib.sh (and PYVERBS_DEBS for
# pyverbs), each pinned to a version (or the index's, where an update
# replaced the pin)
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
# Cached in $CACHE/debroot-<debian arch>-<set>-<key>, keyed by the pinned
# packages, this script and the root's toolchain record; one build at a
# time (flock); trees of other keys unused for a day are removed.
#
# Usage: build-guest-debs.sh [rdma|pyverbs]     (ARCH=x86_64 or s390, inside the root)

source "$(dirname "$0")/lib.sh"

SET=${1:-rdma}

[ -n "${MLX4_BF_IN_ROOT:-}" ] || die "build-guest-debs.sh runs inside the toolchain root"

# Per architecture: Debian's name for it; the rdma set's packages; where
# the libraries are in the output and, in this order, in the packages
# (trixie's are merged-/usr; libc6-s390x-cross keeps its own directory);
# what file(1) says of its ELF files.
case $ARCH in
x86_64)	DEB_ARCH=amd64
	RDMA_DEBS=("${GUEST_DEBS[@]}")
	LIBDIR=usr/lib/x86_64-linux-gnu
	LIBDIRS=("$LIBDIR")
	ELF_KIND='ELF 64-bit LSB .*x86-64' ;;
s390)	DEB_ARCH=s390x
	RDMA_DEBS=("${GUEST_DEBS_S390X[@]}")
	LIBDIR=usr/lib/s390x-linux-gnu
	LIBDIRS=("$LIBDIR" usr/s390x-linux-gnu/lib)
	ELF_KIND='ELF 64-bit MSB .*S/390' ;;
esac
PYTHON=python3.13
# Per set: the packages; the programs kept, as their packages install
# them, each with bin/NAME; directories kept whole (their ELF files are
# roots of the closure); libraries dlopen()ed, not NEEDED, kept in LIBDIR
# (as "path-in-packages=name").
TREES=()
PLUGINS=()
case $SET in
rdma)
	DEBS=("${RDMA_DEBS[@]}")
	PROGRAMS=(usr/bin/rdma) ;;
pyverbs)
	[ "$ARCH" = x86_64 ] ||
		die "build-guest-debs.sh: the pyverbs set is for the x86_64 guest only (python under s390x TCG is not run)"
	DEBS=("${RDMA_DEBS[@]}" "${PYVERBS_DEBS[@]}")
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
# The index: the root's own for amd64; for another architecture the
# mirror the root reads (its sources.list), that architecture only, in an
# apt state under $work (no status file: nothing counts as installed).
# The suite alone: the pins are trixie's (point releases update it), and
# the mirror's -updates index has been seen mid-sync (a size mismatch).
APT=()
if [ "$DEB_ARCH" != "$(dpkg --print-architecture)" ]; then
	mirror=$(sed -n 's/^deb \[[^]]*\] \([^ ]*\) .*/\1/p' /etc/apt/sources.list | head -n1)
	[ -n "$mirror" ] || die "debs: no mirror in the root's /etc/apt/sources.list"
	suite=$(sed -n 's/^deb \[[^]]*\] [^ ]* \([^ ]*\) main$/\1/p' /etc/apt/sources.list | head -n1)
	mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
	printf 'deb [arch=%s] %s %s main\n' "$DEB_ARCH" "$mirror" "$suite" >"$work/apt/sources.list"
	: >"$work/apt/status"
	APT=(-o "APT::Architecture=$DEB_ARCH" -o "APT::Architectures=$DEB_ARCH"
		-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
		-o "Dir::State::Lists=$work/apt/lists" -o "Dir::State::status=$work/apt/status"
		-o "Dir::Cache=$work/apt/cache" -o Acquire::Retries=3 -o APT::Sandbox::User=root)
	apt-get "${APT[@]}" update -q >"$work/update.log" 2>&1 || {
		cat "$work/update.log" >&2
		die "debs: reading the mirror's $DEB_ARCH index ($mirror $suite) failed"
	}
	log "debs: the mirror's $DEB_ARCH index: $mirror $suite"
fi
# A pin a stable or security update has since replaced is not in a newer
# index (the mirror serves a suite's current versions only): the
# index's version of that package instead, said in the log and in
# versions. Any other package missing stops the download below.
pins=()
for pin in "${DEBS[@]}"; do
	if ! apt-cache "${APT[@]}" madison "${pin%%=*}" 2>/dev/null |
		awk -F'|' -v v="${pin#*=}" '{ gsub(/ /, "", $2) } $2 == v { f = 1 } END { exit !f }'; then
		now=$(apt-cache "${APT[@]}" policy "${pin%%=*}" 2>/dev/null | sed -n 's/^ *Candidate: //p')
		if [ -n "$now" ] && [ "$now" != "(none)" ]; then
			log "debs: ${pin%%=*} ${pin#*=} is not in the $DEB_ARCH index any more: taking its $now"
			pin=${pin%%=*}=$now
		fi
	fi
	pins+=("$pin")
done
DEBS=("${pins[@]}")
# apt-get download refuses a package or version the index does not list
# and checks each file's hash against it. As root in the root: no _apt
# sandbox user for the download directory.
(cd "$work/dl" && apt-get "${APT[@]}" download -q -o APT::Sandbox::User=root "${DEBS[@]}") \
	>"$work/download.log" 2>&1 || {
	cat "$work/download.log" >&2
	die "debs: apt-get download failed: a pin of GUEST_DEBS or PYVERBS_DEBS (scripts/lib.sh) not in the $DEB_ARCH index? (apt-cache policy NAME in the root, for amd64)"
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
	file -b "$1" | grep -q "^$ELF_KIND" ||
		die "debs: ${1#"$EXT"/} is not a $DEB_ARCH ELF file: $(file -b "$1")"
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
		lib=
		for dir in "${LIBDIRS[@]}"; do
			lib=$(in_ext "$dir/$soname") && break
		done
		[ -n "$lib" ] ||
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

# The tree runs here as in the guest (the root is amd64, as the pyverbs
# set is): pyverbs and rdma-core's tests import (no device is needed to
# list them).
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
