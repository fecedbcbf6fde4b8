// SPDX-License-Identifier: GPL-2.0

//! The ConnectX-3 as mlx4 describes it: the command interface (HCR) and the
//! commands this driver issues, the formats of contexts, CQEs and EQEs, and
//! one file per hardware object (EQ, CQ, QP, MPT, MTT, port), each keeping
//! the record of what it put in the device; the firmware and the memory it
//! is given (`firmware.rs`, `host_mem.rs`). `hca.rs` brings them up together;
//! the BlueFlame writer and the DMA areas shared with user space are here
//! too. Queue geometry and its compile-time checks: `geometry.rs`.

pub(crate) mod bar2;
pub(crate) mod be;
pub(crate) mod be_io;
pub(crate) mod cmd;
pub(crate) mod cq;
pub(crate) mod eq;
pub(crate) mod firmware;
pub(crate) mod fw;
pub(crate) mod geometry;
pub(crate) mod hca;
pub(crate) mod host_mem;
pub(crate) mod mr;
pub(crate) mod mtt;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod queue_mem;
pub(crate) mod regs;
pub(crate) mod stats;
pub(crate) mod umem;
pub(crate) mod writer;
