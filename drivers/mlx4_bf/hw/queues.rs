// SPDX-License-Identifier: GPL-2.0

//! The queues in the device (`mlx4/eq.c`, `cq.c`, `qp.c`): the adapter's
//! EQs (`eqs.rs` all of them), the contexts' CQs and QPs, each file with its context format and its
//! commands (the QP context in `qp_mailbox.rs`, shared with the RDMA
//! provider's QPs, `user_qp.rs`; its SRQs, `srq.rs`); and the coherent
//! memory of the queues the kernel owns.

pub(crate) mod cq;
pub(crate) mod eq;
pub(crate) mod eqs;
pub(crate) mod kernel_mem;
pub(crate) mod qp;
pub(crate) mod qp_mailbox;
pub(crate) mod srq;
pub(crate) mod user_qp;
