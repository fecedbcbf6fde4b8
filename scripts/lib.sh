# SPDX-License-Identifier: GPL-2.0
# Shared settings for the test-bed scripts. Sourced, not executed.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${MLX4_BF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlx4-bf}
TOOLS=$CACHE/tools

# Pinned inputs. A different pin is a different cache key.
KERNEL_PKG_VERSION=${KERNEL_PKG_VERSION:-7.2.13-1}
RUSTC_VERSION=$(rustc --version | awk '{print $2}')
BINDGEN_VERSION=0.73.0
LIBCLANG_WHEEL_VERSION=18.1.1

log() { printf '>>> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Keyed stamp: a file whose name is a hash of everything the step depends on.
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

export PATH="$TOOLS/bin:$PATH"
export LIBCLANG_PATH="$TOOLS/libclang"
export RUST_LIB_SRC="$TOOLS/rust-src/usr/lib/rustlib/src/rust/library"
