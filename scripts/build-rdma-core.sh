#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds what the guest runs of rdma-core and perftest for $ARCH (x86_64 or
# s390x) from Debian's trixie sources: libibverbs with the mlx4 provider,
# ibv_devices, ibv_devinfo, libibverbs' five pingpongs (RC, UC, UD, SRQ,
# XRC SRQ), and perftest's latency programs (send, write, read, atomic) and
# its bandwidth ones (send, write, read, atomic), every program
# statically linked (the guest has no libc). With the root's gcc for x86_64,
# its s390x cross gcc for s390x: the same recipe for both. Runs inside the
# toolchain root; prints the output directory:
#
#   bin/                   the programs, static, stripped
#   lib/, include/         libibverbs.a and libmlx4.a with their headers
#                          (programs of our own against libibverbs)
#   versions               the source packages, one line
#   qp-post/bin/, lib/,    perftest's latency programs and ib_send_bw, and
#   include/               libmlx4.a and its mlx4dv.h, with
#                          tools/rdma-core/*.patch applied:
#                          libmlx4 posts BlueFlame WQEs through our driver's
#                          QP_POST method where it is offered
#
# Sources: rdma-core (RDMA_CORE_SRC_VERSION), perftest (PERFTEST_SRC_VERSION)
# and pciutils (PCIUTILS_SRC_VERSION: perftest needs libpci, for its PCIe
# relaxed ordering check), each file downloaded by apt and checked against the
# SHA256 of trixie's signed Sources index (the .dsc is not used: the mirror
# serves none for these three); rdma-core and perftest with Debian's patches
# (debian/patches/series), pciutils' upstream tarball only (its Debian tarball
# is not served; only libpci is built, which Debian does not patch for
# Linux). No binary package of another architecture is used.
#
# Static linking: Debian builds rdma-core with ENABLE_STATIC too (its
# libibverbs-dev holds libibverbs.a and libmlx4.a). A static libibverbs has
# no provider loader: a provider registers itself from a constructor of the
# object that defines verbs_provider_<name>, so the link pulls that object in
# (-Wl,--undefined=verbs_provider_mlx4, what RDMA_STATIC_PROVIDERS=mlx4 does
# through a header macro). rdma-core links its own tools against the shared
# libibverbs only: the tools are linked again here from the objects cmake
# compiled. Without libnl (ENABLE_RESOLVE_NEIGH=0, rdma-core's own switch)
# libibverbs finds devices through sysfs instead of RDMA netlink and cannot
# resolve Ethernet neighbours (RoCE address handles); neither is used on the
# model's InfiniBand port.
#
# Cached in $CACHE/rdma-<arch>-<key>, keyed by the source versions, this
# script, our libmlx4 patches and the root's toolchain record; one build at
# a time (flock); builds of other keys unused for a day are removed.
#
# Usage: build-rdma-core.sh     (ARCH=x86_64|s390, inside the root)

source "$(dirname "$0")/lib.sh"

[ -n "${MLX4_BF_IN_ROOT:-}" ] || die "build-rdma-core.sh runs inside the toolchain root"

# The target as gcc, dpkg and file(1) name it.
case $ARCH in
x86_64) TRIPLET=x86_64-linux-gnu DEB_ARCH=amd64 FILE_ARCH=x86-64 ;;
s390) TRIPLET=s390x-linux-gnu DEB_ARCH=s390x FILE_ARCH="IBM S/390" ;;
esac
CC=$TRIPLET-gcc
TOOLS=(ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong
       ibv_xsrq_pingpong)
PERFTEST=(ib_send_lat ib_write_lat ib_read_lat ib_atomic_lat ib_send_bw ib_write_bw ib_read_bw
          ib_atomic_bw)
# Linked again with the patched libmlx4.
PERFTEST_QP_POST=(ib_send_lat ib_write_lat ib_send_bw)
PATCHES=("$TOP"/tools/rdma-core/*.patch)
# rdma-core's own switches for what the guest does not need.
CMAKE_FLAGS=(-DENABLE_STATIC=1 -DENABLE_RESOLVE_NEIGH=0 -DNO_PYVERBS=1 -DNO_MAN_PAGES=1
             -DENABLE_VALGRIND=0 -DCMAKE_BUILD_TYPE=Release -DDISTRO_FLAVOUR=Debian)
# Pulls the mlx4 provider into every static link (see above).
PROVIDER_LINK=(-Wl,--undefined=verbs_provider_mlx4)

key=$( {
	echo "rdma-core=$RDMA_CORE_SRC_VERSION perftest=$PERFTEST_SRC_VERSION pciutils=$PCIUTILS_SRC_VERSION"
	echo "$TRIPLET"
	toolchain_id
	cat "$0" "${PATCHES[@]}"
} | sha256sum | cut -c1-16)

RDIR=$CACHE/rdma-$DEB_ARCH-$key
mkdir -p "$CACHE"
exec 9>"$RDIR.lock"
flock 9
if [ -f "$RDIR/versions" ]; then
	log "rdma-core: cached build $RDIR"
	touch "$RDIR/versions"
	echo "$RDIR"
	exit 0
fi
# Builds of other keys not used for a day (checkouts of other versions of
# this script share the cache).
for dir in "$CACHE"/rdma-"$DEB_ARCH"-*; do
	case $dir in
	"$RDIR" | *.lock | *.tmp) ;;
	*) [ -n "$(find "$dir/versions" -mmin -1440 2>/dev/null)" ] || rm -rf "$dir" "$dir.lock" ;;
	esac
done

work=$RDIR.tmp
rm -rf "$work"
mkdir -p "$work/src" "$work/dl" "$work/stage"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# fetch_source PKG VERSION KIND...: unpacks Debian's source package PKG at
# VERSION into $work/src/PKG from its files of each KIND (orig: the upstream
# tarball; debian: Debian's tarball, whose patches are then applied as
# dpkg-source applies a "3.0 (quilt)" series). apt downloads each file and
# checks it against the SHA256 that the signed Sources index gives.
fetch_source() {
	local pkg=$1 version=$2 kind uris line uri name hash dir=$work/src/$1
	shift 2
	uris=$(apt-get source --print-uris -qq "$pkg=$version" 2>/dev/null | grep "^'") ||
		die "$pkg: Debian's source $version is not in the root's Sources index"
	mkdir -p "$dir"
	for kind; do
		line=$(grep -E " ${pkg}_[^ ]*\\.$kind\\.tar\\.[a-z0-9]+ " <<<"$uris") ||
			die "$pkg $version: no $kind tarball in the Sources index"
		read -r uri name _ hash <<<"$line"
		uri=${uri//\'/}
		/usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file \
			"$uri" "$work/dl/$name" "$hash" >"$work/dl/$name.log" 2>&1 ||
			{ cat "$work/dl/$name.log" >&2; die "$pkg: downloading $name failed"; }
		if [ "$kind" = orig ]; then
			tar -xf "$work/dl/$name" -C "$dir" --strip-components=1
		else
			tar -xf "$work/dl/$name" -C "$dir"
		fi
	done
	[ -f "$dir/debian/patches/series" ] || return 0
	grep -qx '3.0 (quilt)' "$dir/debian/source/format" ||
		die "$pkg: unexpected source format $(cat "$dir/debian/source/format")"
	local patch opts
	while read -r patch opts; do
		case $patch in '' | '#'*) continue ;; esac
		# shellcheck disable=SC2086 # a quilt series line's options (-pN)
		patch -d "$dir" ${opts:--p1} --forward --batch --quiet <"$dir/debian/patches/$patch" ||
			die "$pkg: Debian's patch $patch does not apply"
	done <"$dir/debian/patches/series"
}

log "rdma-core: Debian's sources rdma-core $RDMA_CORE_SRC_VERSION, perftest $PERFTEST_SRC_VERSION, pciutils $PCIUTILS_SRC_VERSION"
fetch_source rdma-core "$RDMA_CORE_SRC_VERSION" orig debian
fetch_source perftest "$PERFTEST_SRC_VERSION" orig debian
fetch_source pciutils "$PCIUTILS_SRC_VERSION" orig

# Debian's flags for the target architecture (hardening=+all, as both
# packages' debian/rules ask; -ffile-prefix-map of the source directory).
buildflag() {
	(cd "$work/src" && DEB_HOST_ARCH=$DEB_ARCH DEB_BUILD_MAINT_OPTIONS=hardening=+all \
		dpkg-buildflags --get "$1")
}
CFLAGS="$(buildflag CPPFLAGS) $(buildflag CFLAGS)"
LDFLAGS=$(buildflag LDFLAGS)
# Nothing of the root's own libraries: no pkg-config module is found.
export PKG_CONFIG_LIBDIR=$work/no-pkgconfig
STAGE=$work/stage
jobs=$(nproc)

log "rdma-core: building libpci ($ARCH, static)"
make -C "$work/src/pciutils" -j"$jobs" CROSS_COMPILE="$TRIPLET-" HOST="${TRIPLET%%-*}-linux" \
	OPT="$CFLAGS" ZLIB=no DNS=no LIBKMOD=no HWDB=no SHARED=no lib/libpci.a \
	>"$work/pciutils.log" 2>&1 || { tail -n 20 "$work/pciutils.log" >&2; die "libpci: build failed"; }
mkdir -p "$STAGE/include/pci" "$STAGE/lib"
cp "$work/src/pciutils/lib/"{config.h,header.h,pci.h,types.h} "$STAGE/include/pci/"
cp "$work/src/pciutils/lib/libpci.a" "$STAGE/lib/"

log "rdma-core: configuring ($ARCH, static, no libnl)"
rbuild=$work/rdma-build
mkdir -p "$rbuild"
cross=()
if [ "$ARCH" = s390 ]; then
	# cmake looks for the target's headers and libraries in the cross
	# libc's tree only.
	cross=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=s390x
	       -DCMAKE_FIND_ROOT_PATH="/usr/$TRIPLET" -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER
	       -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY)
fi
(cd "$rbuild" && CFLAGS=$CFLAGS LDFLAGS=$LDFLAGS cmake -GNinja -DCMAKE_C_COMPILER="$CC" \
	"${cross[@]}" "${CMAKE_FLAGS[@]}" "$work/src/rdma-core" >"$work/cmake.log" 2>&1) ||
	{ tail -n 30 "$work/cmake.log" >&2; die "rdma-core: cmake failed"; }
log "rdma-core: building with -j$jobs"
# make_static: the installable static libraries (rdma-core's
# buildlib/sanitize_static_lib.py), which wants every provider compiled.
ninja -C "$rbuild" -j"$jobs" make_static "${TOOLS[@]}" \
	>"$work/ninja.log" 2>&1 ||
	{ tail -n 30 "$work/ninja.log" >&2; die "rdma-core: build failed"; }
# The installable static libraries perftest links, with the headers; of the
# providers' direct-verbs headers only mlx4's: perftest's configure turns on
# mlx5, efa and hns features by header and would need their libraries
# (Debian's perftest links them; the guest has no such device).
cp "$rbuild"/lib/{libibverbs,libmlx4,librdmacm,libibumad}.a "$STAGE/lib/"
cp -rL "$rbuild/include/infiniband" "$rbuild/include/rdma" "$STAGE/include/"
rm "$STAGE"/include/infiniband/{mlx5dv,mlx5_api,mlx5_user_ioctl_verbs,efadv,hnsdv,manadv}.h

# Each program: static, of the target's architecture, libmlx4 linked in.
program_check() { # program
	file -b "$1" | grep -q "$FILE_ARCH.*statically linked" ||
		die "${1##*/} is not a static $FILE_ARCH program: $(file -b "$1")"
	# grep -c reads to the end: with -q, nm could die of SIGPIPE (pipefail).
	"$TRIPLET-nm" "$1" | grep -c ' verbs_provider_mlx4$' >/dev/null ||
		die "${1##*/} has no mlx4 provider (verbs_provider_mlx4)"
}

# rdma-core's tools use libibverbs' private symbols (IBVERBS_PRIVATE_*,
# e.g. ibv_query_gid_type), which the installable static library renames:
# they are linked against the build's own static libraries instead, with
# the internal ones, as rdma_executable() links them.
log "rdma-core: linking its tools statically"
ex=$rbuild/libibverbs/examples
for tool in "${TOOLS[@]}"; do
	"$CC" -static $LDFLAGS -o "$STAGE/$tool" "$ex/CMakeFiles/$tool.dir"/*.o \
		"$ex/libibverbs_tools.a" "${PROVIDER_LINK[@]}" "$rbuild"/lib/statics/lib{mlx4,ibverbs}.a \
		"$rbuild"/{util/librdma_util,ccan/libccan,kernel-headers/libkern-abi}.a -lpthread \
		>>"$work/link.log" 2>&1 || { tail -n 20 "$work/link.log" >&2; die "$tool: link failed"; }
	program_check "$STAGE/$tool"
done

log "rdma-core: building perftest ($ARCH, static)"
pt=$work/src/perftest
# configure's checks link with the compiler (-static); the programs link
# through libtool, for which -static means only its own libraries
# (-all-static: everything).
(cd "$pt" && ./configure --host="$TRIPLET" CC="$CC" CFLAGS="$CFLAGS" \
	CPPFLAGS="-I$STAGE/include" LDFLAGS="-static $LDFLAGS -L$STAGE/lib" \
	LIBS="${PROVIDER_LINK[*]} -lmlx4 -libverbs -lpthread" >"$work/perftest-configure.log" 2>&1) ||
	{ tail -n 30 "$work/perftest-configure.log" >&2; die "perftest: configure failed"; }
make -C "$pt" -j"$jobs" LDFLAGS="-all-static $LDFLAGS -L$STAGE/lib" "${PERFTEST[@]}" \
	>"$work/perftest.log" 2>&1 ||
	{ tail -n 30 "$work/perftest.log" >&2; die "perftest: build failed"; }
for p in "${PERFTEST[@]}"; do
	cp "$pt/$p" "$STAGE/$p"
	program_check "$STAGE/$p"
done

# The same perftest against libmlx4 with our patches: only libmlx4's
# objects are compiled again, perftest's programs only linked again.
log "rdma-core: libmlx4 with ${PATCHES[*]##*/}"
for patch in "${PATCHES[@]}"; do
	patch -d "$work/src/rdma-core" -p1 --forward --batch --quiet <"$patch" ||
		die "rdma-core: ${patch##*/} does not apply"
done
ninja -C "$rbuild" -j"$jobs" make_static >>"$work/ninja.log" 2>&1 ||
	{ tail -n 30 "$work/ninja.log" >&2; die "rdma-core: patched libmlx4: build failed"; }
mkdir -p "$STAGE/qp-post/lib" "$STAGE/qp-post/bin" "$STAGE/qp-post/include/infiniband"
cp "$rbuild/lib/libmlx4.a" "$STAGE/qp-post/lib/"
cp "$work/src/rdma-core/providers/mlx4/mlx4dv.h" "$STAGE/qp-post/include/infiniband/"
rm -f "${PERFTEST_QP_POST[@]/#/$pt/}"
make -C "$pt" -j"$jobs" LDFLAGS="-all-static $LDFLAGS -L$STAGE/qp-post/lib -L$STAGE/lib" \
	"${PERFTEST_QP_POST[@]}" >>"$work/perftest.log" 2>&1 ||
	{ tail -n 30 "$work/perftest.log" >&2; die "perftest: linking with the patched libmlx4 failed"; }
for p in "${PERFTEST_QP_POST[@]}"; do
	program_check "$pt/$p"
	grep -q MLX4_KERNEL_BF "$pt/$p" || die "$p: not linked with the patched libmlx4"
	"$TRIPLET-strip" -o "$STAGE/qp-post/bin/$p" "$pt/$p"
done

mkdir -p "$STAGE/bin"
for p in "${TOOLS[@]}" "${PERFTEST[@]}"; do
	"$TRIPLET-strip" -o "$STAGE/bin/$p" "$STAGE/$p"
	rm "$STAGE/$p"
done
rm -rf "${STAGE:?}"/include/{pci,rdma} "$STAGE"/lib/{libpci,librdmacm,libibumad}.a
"$TRIPLET-strip" --strip-debug "$STAGE"/lib/*.a "$STAGE"/qp-post/lib/*.a
echo "rdma-core $RDMA_CORE_SRC_VERSION, perftest $PERFTEST_SRC_VERSION, libpci of pciutils $PCIUTILS_SRC_VERSION; static, $TRIPLET" \
	>"$STAGE/versions"
rm -rf "$RDIR"
mv "$STAGE" "$RDIR"
log "rdma-core: built in $((SECONDS - start)) s, $(du -sh "$RDIR" | cut -f1): $(cat "$RDIR/versions")"
echo "$RDIR"
