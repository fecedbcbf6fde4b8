# SPDX-License-Identifier: GPL-2.0
# Shared settings for the test-bed scripts. Sourced, not executed.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${MLX4_BF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlx4-bf}
TOOLS=$CACHE/tools

# Pinned inputs. A different pin is a different cache key.
KERNEL_PKG_VERSION=${KERNEL_PKG_VERSION:-7.2.13-1}
# Debian's QEMU source for the s390x QEMU (scripts/build-qemu.sh): 10.2 has
# the vfio-user client; newer sources were not served.
QEMU_SRC_VERSION=${QEMU_SRC_VERSION:-1:10.2.2+ds-1}
# Debian's trixie sources of what the guest runs of rdma-core and perftest,
# and of libpci, which perftest links (scripts/build-rdma-core.sh).
RDMA_CORE_SRC_VERSION=56.1-1
PERFTEST_SRC_VERSION=25.01.0+0.80-1
PCIUTILS_SRC_VERSION=1:3.13.0-2
# Debian's trixie binary packages of what the guest runs with its own
# loader (scripts/build-guest-debs.sh), amd64 or s390x as the guest is:
# iproute2's rdma and the packages of its ELF NEEDED closure (libmnl.so.0,
# libcap.so.2, libc.so.6 with the loader, ld-linux-x86-64.so.2 or
# ld64.so.1), name=version. s390x's glibc is libc6-s390x-cross, trixie's
# glibc 2.41 for s390x as the root's cross gcc links it (the index's s390x
# libc6 2.41-12+deb13u5 is not served by the mirror: 404).
GUEST_DEBS=(iproute2=6.15.0-1 libmnl0=1.0.5-3 libcap2=1:2.75-10+deb13u1+b3 libc6=2.41-12+deb13u5)
GUEST_DEBS_S390X=(iproute2=6.15.0-1 libmnl0=1.0.5-3 libcap2=1:2.75-10+deb13u1+b3 libc6-s390x-cross=2.41-11cross1)
# On top of them, for the pyverbs boot (make pyverbs): python3 and its
# standard library, rdma-core's Python bindings and tests (python3-pyverbs,
# the same rdma-core 56.1 as the static tools), libibverbs with Debian's
# libmlx4, and the packages of their NEEDED closure.
PYVERBS_DEBS=(python3.13-minimal=3.13.5-2+deb13u5 libpython3.13-minimal=3.13.5-2+deb13u5
	libpython3.13-stdlib=3.13.5-2+deb13u5 libpython3.13=3.13.5-2+deb13u5
	python3-pyverbs=56.1-1 libibverbs1=56.1-1 ibverbs-providers=56.1-1 librdmacm1t64=56.1-1
	libnl-3-200=3.7.0-2 libnl-route-3-200=3.7.0-2 libffi8=3.4.8-2
	zlib1g=1:1.3.dfsg+really1.3.1-1+deb13u1 libexpat1=2.9.0-1~deb13u1 libbz2-1.0=1.0.8-6
	liblzma5=5.8.1-1+deb13u2 libuuid1=2.41.5-0+deb13u1)

# The s390x guest's static busybox inside the root (setup-root.sh).
S390X_BUSYBOX=/opt/s390x/busybox

# The target: x86_64 (the default: LLVM=1, as Rust-for-Linux prefers) or
# s390 (ARCH=s390 or s390x: the cross gcc; s390 has no LLVM=1 build). Every
# kernel and module build passes KMAKE_FLAGS; KIMAGE is the kernel image in
# a build directory.
case ${ARCH:-x86_64} in
x86_64 | x86)
	ARCH=x86_64
	KMAKE_FLAGS=(LLVM=1)
	KIMAGE=arch/x86/boot/bzImage ;;
s390 | s390x)
	ARCH=s390
	KMAKE_FLAGS=(ARCH=s390 CROSS_COMPILE=s390x-linux-gnu-)
	KIMAGE=arch/s390/boot/bzImage ;;
*)
	printf 'error: unknown ARCH %s (x86_64 or s390)\n' "$ARCH" >&2
	exit 1 ;;
esac

log() { printf '>>> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The toolchain root's directory, keyed by its recipe (scripts/setup-root.sh and
# the s390x busybox it builds, scripts/build-busybox.sh).
root_dir() {
	echo "$CACHE/root-$(cat "$TOP/scripts/setup-root.sh" "$TOP/scripts/build-busybox.sh" |
		sha256sum | cut -c1-16)"
}

# in_root_at ROOT CMD...: run CMD inside the toolchain root with bubblewrap.
# The checkout, the cache, /dev (with /dev/shm and /dev/kvm), /proc, /tmp and
# the host's CA bundle (the registry's proxy) are bound in; nothing of it
# outlives the command on the host.
in_root_at() {
	local root=$1 dir=$PWD
	shift
	case $dir in "$TOP" | "$TOP"/* | "$CACHE" | "$CACHE"/*) ;; *) dir=$TOP ;; esac
	local caps=()
	[ "$(id -u)" = 0 ] && caps=(--cap-add ALL)
	bwrap --bind "$root" / --dev-bind /dev /dev --proc /proc --ro-bind /sys /sys \
		--bind /tmp /tmp \
		--ro-bind /etc/resolv.conf /etc/resolv.conf \
		--ro-bind /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt \
		--bind "$TOP" "$TOP" --bind "$CACHE" "$CACHE" \
		"${caps[@]}" --die-with-parent --chdir "$dir" \
		--unsetenv RUSTUP_HOME --unsetenv RUSTUP_TOOLCHAIN --unsetenv CARGO_TARGET_DIR \
		--unsetenv LIBCLANG_PATH --unsetenv RUST_LIB_SRC \
		--setenv PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--setenv HOME /root --setenv CARGO_HOME "$CACHE/cargo-home" \
		--setenv CARGO_HTTP_CAINFO /etc/ssl/certs/ca-certificates.crt \
		--setenv MLX4_BF_ROOT "$root" --setenv MLX4_BF_IN_ROOT 1 \
		"$@"
}

# Everything the toolchain root holds, one line per tool (setup-root.sh).
toolchain_id() { cat /etc/mlx4-bf-toolchain; }

# Keyed stamp: a file whose name is a hash of everything the step depends on.
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

# A copy of the module's sources in DIR, without build outputs: a variant of
# the module (KRUSTFLAGS) is built there, beside the checkout's own build.
module_sources_copy() { # dir
	cp -a "$TOP/Kbuild" "$TOP/drivers" "$TOP/rust" "$TOP/uapi" "$1/"
	find "$1/drivers" \( -name '*.o' -o -name '*.ko' -o -name '.*.cmd' \) -delete
}
