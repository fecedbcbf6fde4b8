// SPDX-License-Identifier: GPL-2.0

//! The RDMA device's calls (`verbs/verbs_shim.c`), compiled against the
//! project's rdma-core build and linked with its static libibverbs and
//! QP_POST-patched libmlx4: `MLX4_BF_RDMA` names that build
//! (scripts/build-rdma-core.sh's output: `include/`, `lib/`,
//! `qp-post/lib/`). The helper speaks nothing else, so it does not build
//! without it; scripts/mlx4-bf.sh sets it for the guest's helper, and the
//! host's build of rdma-core for `cargo test` and clippy.

use std::{env, path::PathBuf};

fn main() {
    println!("cargo::rerun-if-env-changed=MLX4_BF_RDMA");
    println!("cargo::rerun-if-changed=verbs/verbs_shim.c");
    println!("cargo::rerun-if-changed=verbs/verbs_shim.h");
    let Some(rdma) = env::var_os("MLX4_BF_RDMA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
    else {
        panic!(
            "MLX4_BF_RDMA is unset: the helper links the project's rdma-core \
             (scripts/build-rdma-core.sh prints its directory; scripts/mlx4-bf.sh sets it)"
        );
    };
    cc::Build::new()
        .file("verbs/verbs_shim.c")
        .include(rdma.join("qp-post/include"))
        .include(rdma.join("include"))
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("verbs_shim");
    // The patched libmlx4 first: mlx4dv_qp_set_bf_post() is its.
    println!(
        "cargo::rustc-link-search=native={}",
        rdma.join("qp-post/lib").display()
    );
    println!(
        "cargo::rustc-link-search=native={}",
        rdma.join("lib").display()
    );
    println!("cargo::rustc-link-lib=static=mlx4");
    println!("cargo::rustc-link-lib=static=ibverbs");
    // A static libibverbs finds its provider by the constructor in the
    // object that defines verbs_provider_mlx4 (build-rdma-core.sh).
    println!("cargo::rustc-link-arg=-Wl,--undefined=verbs_provider_mlx4");
}
