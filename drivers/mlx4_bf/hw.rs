// SPDX-License-Identifier: GPL-2.0

//! The ConnectX-3 as mlx4 describes it, in rooms by concern; each hardware
//! object's file keeps the record of what it put in the device.
//!
//! | room | what | files |
//! |---|---|---|
//! | `cmd` | the command interface (HCR), its opcodes, registers and big-endian fields | `cmd.rs`, `cmd/{command,regs,be_fields,be_mmio}.rs` |
//! | `firmware` | bring-up and teardown: firmware area, QUERY_DEV_CAP, ICM, INIT_HCA, port 1 | `firmware.rs`, `firmware/{dev_cap,icm,icm_pages,numbers,port}.rs` |
//! | `queues` | the EQs, CQs and QPs in the device (the kernel contexts' and the RDMA provider's), and the kernel's queue memory | `queues/{eq,eqs,cq,qp,qp_mailbox,user_qp,kernel_mem}.rs` |
//! | `memory` | the MTT, memory regions (MPTs), the provider's MTT ranges, and the kernel contexts' receive areas | `memory/{mtt,mr,recv_area}.rs` |
//! | `bf` | BAR2's UAR and BlueFlame mappings and the BlueFlame writer | `bf/{bar2,writer}.rs` |
//!
//! Rooms import each other downwards only as `cmd` <- `memory`, `queues` <-
//! `firmware`; `bf` stands beside them.

pub(crate) mod bf;
pub(crate) mod cmd;
pub(crate) mod firmware;
pub(crate) mod memory;
pub(crate) mod queues;
