// SPDX-License-Identifier: GPL-2.0

//! The MTT: the page lists through which the adapter finds every queue and
//! memory region (`core/mr.c:mlx4_write_mtt`). A context names its queue
//! by the MTT byte address of its first page (`mlx4_mtt_addr()`: entry
//! index x 8) and the page size (4 KiB, `log_page_size` 0); the adapter
//! reads the page addresses from the MTT table in ICM, which the driver
//! writes (`Icm::write_mtt`); a context's fields for it are
//! `be::mtt_fields`.
//!
//! The queue memory is allocated at probe and never changes, so its MTT
//! entries are written once, at probe, in one range right after the
//! firmware's reserved entries ([`QueueMtt`]); memory regions take entries
//! after it (`mr.rs`).

use kernel::prelude::*;

use crate::{
    geometry::{CQ_BYTES, EQ_RING_BYTES, KERNEL_QPS, KERNEL_SEND_CQS, MAX_EQS, QP_BUF_BYTES},
    hw::memory::recv_area::{AREAS, AREA_BYTES},
};

const PAGE: usize = 4096;
/// Bytes of an MTT entry (`mtt_entry_sz`, checked in `DevCap::check`).
const MTT_ENTRY: u64 = crate::region::MTT_ENTRY_LEN;

/// The queue memory pools, each a run of 4 KiB pages.
#[derive(Clone, Copy)]
pub(crate) enum Pool {
    /// The EQs' rings, `EQ_RING_BYTES` each.
    Eq,
    /// The contexts' send CQs, one page each.
    SendCqs,
    /// The kernel-posted QPs' buffers.
    KernelQps,
    /// A context's area (receive CQs, user-posted QP buffers).
    Area(usize),
}

const EQ_PAGES: usize = MAX_EQS * EQ_RING_BYTES / PAGE;
const SEND_CQ_PAGES: usize = KERNEL_SEND_CQS * CQ_BYTES / PAGE;
const QP_POOL_PAGES: usize = KERNEL_QPS * QP_BUF_BYTES / PAGE;
const AREA_PAGES: usize = AREA_BYTES / PAGE;
const _: () = assert!(
    EQ_RING_BYTES % PAGE == 0
        && CQ_BYTES % PAGE == 0
        && QP_BUF_BYTES % PAGE == 0
        && AREA_BYTES % PAGE == 0
);

impl Pool {
    /// Pages of the pool.
    pub(crate) const fn pages(self) -> usize {
        match self {
            Pool::Eq => EQ_PAGES,
            Pool::SendCqs => SEND_CQ_PAGES,
            Pool::KernelQps => QP_POOL_PAGES,
            Pool::Area(_) => AREA_PAGES,
        }
    }

    /// The pool's first entry, counted from the queue range's start.
    const fn first(self) -> usize {
        match self {
            Pool::Eq => 0,
            Pool::SendCqs => EQ_PAGES,
            Pool::KernelQps => EQ_PAGES + SEND_CQ_PAGES,
            Pool::Area(i) => EQ_PAGES + SEND_CQ_PAGES + QP_POOL_PAGES + i * AREA_PAGES,
        }
    }
}

/// The MTT range of the queue memory.
#[derive(Clone, Copy)]
pub(crate) struct QueueMtt {
    /// The range's first entry.
    pub(crate) base: u32,
}

impl QueueMtt {
    /// Entries of every pool together.
    pub(crate) const ENTRIES: u32 = Pool::Area(AREAS).first() as u32;

    /// The first entry of `pool`.
    pub(crate) fn first(&self, pool: Pool) -> Result<u32> {
        if let Pool::Area(i) = pool {
            if i >= AREAS {
                return Err(EINVAL);
            }
        }
        Ok(self.base + pool.first() as u32)
    }

    /// The MTT byte address of the queue at byte `off` of `pool` (page
    /// aligned, inside the pool).
    pub(crate) fn addr(&self, pool: Pool, off: usize) -> Result<u64> {
        if off % PAGE != 0 || off / PAGE >= pool.pages() {
            return Err(EINVAL);
        }
        let entry = self.first(pool)? as usize + off / PAGE;
        Ok(entry as u64 * MTT_ENTRY)
    }

    /// The MTT entries of `pool`'s pages, physically contiguous from `dma`,
    /// handed to `write(first entry, page addresses)` (`Icm::write_mtt`).
    pub(crate) fn write_pool(
        &self,
        pool: Pool,
        dma: u64,
        write: impl FnOnce(u32, &[u64]) -> Result,
    ) -> Result {
        let mut pages = KVec::with_capacity(pool.pages(), GFP_KERNEL)?;
        for i in 0..pool.pages() {
            pages.push(dma + (i * PAGE) as u64, GFP_KERNEL)?;
        }
        write(self.first(pool)?, &pages)
    }
}
