// SPDX-License-Identifier: GPL-2.0

//! Reads `uapi/mlx4_bf.h` with bindgen, so the tests can compare the C ABI
//! with its Rust mirror in `mlx4_bf_core::abi`.

use std::{env, path::PathBuf};

fn main() {
    let uapi = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../uapi");
    let header = uapi.join("mlx4_bf.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    bindgen::Builder::default()
        .header(header.to_str().unwrap())
        .allowlist_item("(mlx4_bf|MLX4_BF).*")
        .allowlist_item("UVERBS_ID_NS_SHIFT")
        .prepend_enum_name(false)
        // Evaluates function-like macros such as MLX4_BF_IOCTL (_IOWR(...)).
        .clang_macro_fallback()
        .layout_tests(false)
        .generate()
        .expect("bindgen could not read uapi/mlx4_bf.h (libclang missing? make test runs in the toolchain root)")
        .write_to_file(PathBuf::from(env::var("OUT_DIR").unwrap()).join("uapi.rs"))
        .unwrap();
}
