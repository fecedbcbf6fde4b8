// SPDX-License-Identifier: GPL-2.0

//! A doorbell record in user memory (`mlx4_ib_db_map_user()`,
//! `drivers/infiniband/hw/mlx4/doorbell.c`): the page holding it pinned
//! and mapped for the adapter, which writes a CQ's consumer index or reads
//! a receive queue's producer index there. mlx4_ib shares one pin per page
//! and context; here each CQ and QP pins its own page, which is simpler
//! and costs a page reference more when two records share a page.

use kernel::prelude::*;

use super::Provider;
use crate::{
    layout::PAGE_SIZE,
    rdma::{object::Device, umem::Umem},
};

pub(crate) struct UserDoorbell {
    /// The page, pinned until the record is no longer the adapter's.
    _page: Umem,
    dma: u64,
}

/// What a record holds, hence its size and alignment: libmlx4 hands out
/// records of both sizes from one page (`mlx4_alloc_db()`), so a receive
/// queue's may sit at any 4-byte offset.
#[derive(Clone, Copy)]
pub(super) enum Record {
    /// A CQ's: its consumer index and its arm state, two dwords.
    Cq = 8,
    /// A receive queue's: its producer index, one dword.
    Rq = 4,
}

impl UserDoorbell {
    /// The record of kind `record` at user address `virt`, aligned to its
    /// size.
    pub(super) fn map(dev: &Device<Provider>, virt: u64, record: Record) -> Result<Self> {
        if virt % record as u64 != 0 {
            return Err(EINVAL);
        }
        let page = dev.pin_user(virt & !(PAGE_SIZE - 1), PAGE_SIZE as usize, 0)?;
        let base = *page.dma_blocks(PAGE_SIZE as usize)?.first().ok_or(EFAULT)?;
        Ok(UserDoorbell {
            dma: base + (virt & (PAGE_SIZE - 1)),
            _page: page,
        })
    }

    /// The record's DMA address.
    pub(super) fn dma(&self) -> u64 {
        self.dma
    }

    /// Keeps the page pinned until the device's teardown: the adapter may
    /// still write the record (its destroy command failed).
    pub(super) fn keep_until_teardown(self) {
        self._page.keep_until_teardown();
    }
}

/// After a destroy command failed, the adapter may still use a queue and
/// its record: both stay pinned and mapped until unbind has reset it and
/// the device's teardown releases them. (The MTT entries naming the pages
/// stay allocated by not being given back: a `MttRange` is only numbers.)
pub(super) fn keep_until_teardown(queue: Option<Umem>, record: Option<UserDoorbell>) {
    if let Some(kept) = queue {
        kept.keep_until_teardown();
    }
    if let Some(kept) = record {
        kept.keep_until_teardown();
    }
}

/// The DMA addresses of the 4 KiB pages of `umem`, which must start on a
/// page: the MTT entries of a CQ's or QP's buffer.
pub(super) fn pages(umem: &Umem) -> Result<KVec<u64>> {
    if umem.offset()? != 0 {
        return Err(EINVAL);
    }
    pages_of(umem)
}

/// The DMA addresses of the 4 KiB pages covering `umem`: a region's MTT
/// entries (its MPT's start gives the offset in the first).
pub(super) fn pages_of(umem: &Umem) -> Result<KVec<u64>> {
    umem.dma_blocks(PAGE_SIZE as usize)
}
