#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's own amd64 binaries of programs the x86_64 guest runs that cannot
# be built here, with what they need to run there: iproute2's rdma tool
# (rdma dev, link, resource, statistic). The mirror serves no source
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
#
# The packages are GUEST_DEBS of scripts/lib.sh, each pinned to a version
# (name=version), downloaded by apt-get download, which checks each .deb
# against the SHA256 of trixie's signed Packages index, and unpacked with
# dpkg-deb -x into one tree. Of it only PROGRAMS (below) are kept and the
# libraries of their ELF NEEDED closure (readelf -d, followed through the
# libraries to the loader, which libc.so.6 names); a library that none of
# the packages holds stops the build naming it and what needs it: add its
# package to GUEST_DEBS. No package is installed, in the root or anywhere.
# More programs: their packages (and what their NEEDED closure asks for) to
# GUEST_DEBS, their paths to PROGRAMS. A program that dlopen()s what its
# NEEDED entries do not name (python3's extension modules, libibverbs'
# providers) needs those files kept too, as roots of the closure.
#
# Cached in $CACHE/debroot-amd64-<key>, keyed by the pinned packages, this
# script and the root's toolchain record; one build at a time (flock);
# trees of other keys unused for a day are removed.
#
# Usage: build-guest-debs.sh     (ARCH=x86_64, inside the root)

source "$(dirname "$0")/lib.sh"

[ -n "${MLX4_BF_IN_ROOT:-}" ] || die "build-guest-debs.sh runs inside the toolchain root"
[ "$ARCH" = x86_64 ] ||
	die "build-guest-debs.sh: Debian's amd64 binaries are for the x86_64 guest only, not ARCH=$ARCH (the root reads no index of another architecture)"

DEB_ARCH=amd64
# The programs kept, as their packages install them; each gets bin/NAME.
PROGRAMS=(usr/bin/rdma)
# Where the libraries are in the packages (trixie's are merged-/usr) and
# in the output.
LIBDIR=usr/lib/x86_64-linux-gnu

key=$( {
	echo "${GUEST_DEBS[*]}"
	echo "${PROGRAMS[*]} $DEB_ARCH"
	toolchain_id
	cat "$0"
} | sha256sum | cut -c1-16)

DDIR=$CACHE/debroot-$DEB_ARCH-$key
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

log "debs: Debian's $DEB_ARCH packages ${GUEST_DEBS[*]}"
# apt-get download refuses a package or version the index does not list
# and checks each file's hash against it. As root in the root: no _apt
# sandbox user for the download directory.
(cd "$work/dl" && apt-get download -q -o APT::Sandbox::User=root "${GUEST_DEBS[@]}") \
	>"$work/download.log" 2>&1 || {
	cat "$work/download.log" >&2
	die "debs: apt-get download failed: a pin of GUEST_DEBS (scripts/lib.sh) not in the root's $DEB_ARCH index? (apt-cache policy NAME in the root)"
}
# Each pin is one .deb of that name, version and architecture.
for pin in "${GUEST_DEBS[@]}"; do
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
	src=$(in_ext "$prog") || die "debs: $prog is in none of the packages (${GUEST_DEBS[*]})"
	elf_check "$src"
	mkdir -p "$OUT/${prog%/*}"
	cp "$src" "$OUT/$prog"
	roots+=("$src")
done
mkdir -p "$OUT/$LIBDIR"
declare -A have=()
queue=("${roots[@]}")
while [ ${#queue[@]} -gt 0 ]; do
	elf=${queue[0]}
	queue=("${queue[@]:1}")
	for soname in $(needed "$elf"); do
		[ -z "${have[$soname]:-}" ] || continue
		lib=$(in_ext "$LIBDIR/$soname") ||
			die "debs: $soname (NEEDED by ${elf#"$EXT"/}) is in none of the packages (${GUEST_DEBS[*]}): add its package to GUEST_DEBS in scripts/lib.sh"
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
	mkdir -p "$OUT/bin"
	cat >"$OUT/bin/$name" <<EOF
#!/bin/sh
# $name of Debian's packages (${GUEST_DEBS[*]}), run by their loader with
# the libraries beside it (scripts/build-guest-debs.sh).
case \$0 in */*) d=\${0%/*}/.. ;; *) d=.. ;; esac
d=\$(cd "\$d" && pwd) || exit 127
exec "\$d/$LIBDIR/$loader" --inhibit-cache --library-path "\$d/$LIBDIR" \\
	--argv0 $name "\$d/$prog" "\$@"
EOF
	chmod 0755 "$OUT/bin/$name"
done

{
	echo "Debian $DEB_ARCH: ${GUEST_DEBS[*]}"
	(cd "$OUT" && find . -type f ! -name versions | sed 's|^\./|  |' | sort)
} >"$OUT/versions"
rm -rf "$DDIR"
mv "$OUT" "$DDIR"
log "debs: built in $((SECONDS - start)) s, $(du -sh "$DDIR" | cut -f1): ${PROGRAMS[*]}, ${!have[*]}"
echo "$DDIR"
