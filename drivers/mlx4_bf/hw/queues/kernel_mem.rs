// SPDX-License-Identifier: GPL-2.0

//! The memory of the queues the adapter writes for the kernel: its EQs, the
//! contexts' send CQs and their doorbell records (coherent DMA memory in
//! `Resources`, released at unbind).

use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    prelude::*,
};

use crate::geometry::{CQ_BYTES, DB_REC_WORDS, EQ_RING_BYTES, KERNEL_SEND_CQS, MAX_EQS};

/// DMA memory of the queues the device writes; released at unbind.
pub(crate) struct QueueMem {
    /// The rings of `MAX_EQS` EQs, `EQ_RING_BYTES` each, by `Eq::index`.
    pub(crate) eq: Coherent<[u8]>,
    /// `KERNEL_SEND_CQS` CQ buffers of one page each, read a 32-bit word at a time.
    pub(crate) cqs: Coherent<[u32]>,
    /// `KERNEL_SEND_CQS` doorbell records (set_ci, arm), big-endian.
    pub(crate) cq_db: Coherent<[u32]>,
}

/// The DMA address of [`QueueMem`]'s doorbell records, for contexts written
/// outside the RCU section that guards the memory itself (the rings are
/// named by their MTT entries, `mtt::Pool`).
#[derive(Clone, Copy)]
pub(crate) struct QueueDma {
    pub(crate) cq_db: u64,
}

impl QueueMem {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        Ok(QueueMem {
            eq: Coherent::zeroed_slice(dev, MAX_EQS * EQ_RING_BYTES, GFP_KERNEL)?,
            cqs: Coherent::zeroed_slice(dev, KERNEL_SEND_CQS * CQ_BYTES / 4, GFP_KERNEL)?,
            cq_db: Coherent::zeroed_slice(dev, KERNEL_SEND_CQS * DB_REC_WORDS, GFP_KERNEL)?,
        })
    }

    pub(crate) fn dma(&self) -> QueueDma {
        QueueDma {
            cq_db: self.cq_db.dma_handle(),
        }
    }
}
