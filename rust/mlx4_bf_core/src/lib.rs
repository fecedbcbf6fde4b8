// SPDX-License-Identifier: GPL-2.0

//! The pure rules of the mlx4 BlueFlame send path, shared by the kernel
//! module (which includes these files with `#[path]`) and the host tools.
//!
//! Nothing here touches hardware or allocates: each module is a small set of
//! functions over plain values, unit-tested on the host with `cargo test`.

#![no_std]

pub mod abi;
pub mod comp_vector;
pub mod cqe;
pub mod eqe;
pub mod ib_device;
pub mod icm;
pub mod identity;
pub mod kping;
pub mod layout;
pub mod mad;
pub mod qp_context;
pub mod qp_size;
pub mod region;
pub mod reject;
pub mod ring;
pub mod srq_size;
pub mod store_block;
pub mod uar_alloc;
pub mod verbs;
pub mod wqe;
pub mod wqe_build;
