// SPDX-License-Identifier: GPL-2.0

//! User memory for the adapter (`struct ib_umem`): pinned, charged to the
//! process and mapped for DMA by the core (`ib_umem_get_va()`), released
//! when dropped; its DMA addresses block by block
//! (`rdma_umem_for_each_dma_block()`).

use core::ptr::NonNull;
use kernel::{bindings, error::from_err_ptr, ffi::c_ulong, prelude::*};

use super::{object::Device, Driver};

/// `IB_ACCESS_LOCAL_WRITE`: the adapter writes the memory.
pub(crate) const ACCESS_LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;

/// Pinned user memory.
///
/// # Invariants
///
/// `raw` is an umem `ib_umem_get*()` returned, released only by `drop`.
pub(crate) struct Umem {
    raw: NonNull<bindings::ib_umem>,
}

// SAFETY: The umem is owned; the core's functions on it may run anywhere.
unsafe impl Send for Umem {}
// SAFETY: Only `&self` methods that read it.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` with
    /// `access` (`IB_ACCESS_*`) and maps them for `dev`'s DMA.
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: usize,
        access: u32,
    ) -> Result<Self> {
        // SAFETY: `dev` is a registered device; the call pins and maps
        // memory of the current process, checking the range itself.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(
                dev.as_raw(),
                core::ptr::null(),
                0,
                addr,
                len,
                access as i32,
            )
        })?;
        // INVARIANT: A umem just returned, owned here.
        NonNull::new(umem).map(|raw| Umem { raw }).ok_or(EFAULT)
    }

    /// Offset of the first byte in its first page.
    pub(crate) fn offset(&self) -> usize {
        // SAFETY: Live (type invariant).
        unsafe { bindings::ib_umem_offset(self.raw.as_ptr()) as usize }
    }

    /// DMA blocks of `page_size` (a power of two the device supports) that
    /// cover the memory.
    pub(crate) fn block_count(&self, page_size: usize) -> usize {
        // SAFETY: Live (type invariant).
        unsafe { bindings::ib_umem_num_dma_blocks(self.raw.as_ptr(), page_size as c_ulong) }
    }

    /// The DMA address of each block of `page_size` covering the memory,
    /// in order.
    pub(crate) fn dma_blocks(&self, page_size: usize) -> DmaBlocks<'_> {
        let mut iter = bindings::ib_block_iter::default();
        let umem = self.raw.as_ptr();
        // SAFETY: `rdma_umem_for_each_dma_block()`'s start: the umem is live
        // (type invariant) and mapped, its table set up by the core.
        unsafe {
            bindings::__rdma_block_iter_start(
                &mut iter,
                (*umem).sgt_append.sgt.sgl,
                (*umem).sgt_append.sgt.nents,
                page_size as c_ulong,
            );
            iter.__sg_advance = (self.offset() & !(page_size - 1)) as u32;
            iter.__sg_numblocks = self.block_count(page_size);
        }
        DmaBlocks { iter, _umem: self }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant), released once.
        unsafe { bindings::ib_umem_release(self.raw.as_ptr()) };
    }
}

/// The blocks of a [`Umem`], as `rdma_umem_for_each_dma_block()` walks them.
pub(crate) struct DmaBlocks<'a> {
    iter: bindings::ib_block_iter,
    _umem: &'a Umem,
}

impl Iterator for DmaBlocks<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // `__rdma_umem_block_iter_next()`: a block of the table, at most as
        // many as the umem covers.
        // SAFETY: The iterator was started on the umem, which `_umem` keeps
        // alive.
        if !unsafe { bindings::__rdma_block_iter_next(&mut self.iter) } {
            return None;
        }
        if self.iter.__sg_numblocks == 0 {
            return None;
        }
        self.iter.__sg_numblocks -= 1;
        // SAFETY: The iterator stands on a block.
        Some(unsafe { bindings::rdma_block_iter_dma_address(&mut self.iter) })
    }
}
