// SPDX-License-Identifier: GPL-2.0

//! The kernel QPs' receive memory: for each QP of a kernel context (the
//! kernel ping's, `kernel_context/receive.rs`) its receive CQ ring, the CQ
//! doorbell record and the receive buffers, in one area per context. The
//! adapter writes it; the kernel reads it.
//!
//! The areas are one coherent DMA allocation in `Resources`, like the QP
//! buffers: freed at unbind, after the adapter was quiesced or reset, and
//! reached only through the `Resources` guard, so no kernel path that
//! raced with unbind touches freed memory. The adapter finds an area
//! through the MTT entries written at probe (`mtt::Pool::Area`).
//!
//! Layout of one area:
//!
//! ```text
//! QP index i at i * QP_AREA_BYTES:
//!   +0      receive CQ ring, RCQ_ENTRIES * CQE_SIZE
//!   +4 KiB  CQ doorbell record page (set_ci at +0, the arm word at +4)
//!   +8 KiB  RQ_ENTRIES receive buffers of RECV_BUF_SIZE
//! ```

use kernel::{dma::Coherent, prelude::*};

use crate::geometry::{KPING_ENDS, QPS_PER_KERNEL_CONTEXT, RECV_BUF_SIZE, RQ_ENTRIES};

const PAGE: usize = 4096;
pub(crate) const CQ_OFFSET: usize = 0;
pub(crate) const CQ_DB_OFFSET: usize = PAGE;
pub(crate) const RECV_OFFSET: usize = 2 * PAGE;
const RECV_BYTES: usize = RQ_ENTRIES as usize * RECV_BUF_SIZE;
pub(crate) const QP_AREA_BYTES: usize = RECV_OFFSET + RECV_BYTES;
pub(crate) const AREA_BYTES: usize = QPS_PER_KERNEL_CONTEXT * QP_AREA_BYTES;
/// Kernel contexts that may hold an area at once (each keeps it until
/// closed): one per kernel ping end.
pub(crate) const AREAS: usize = KPING_ENDS;
/// Bytes of `Resources::recv_areas`.
pub(crate) const AREAS_BYTES: usize = AREAS * AREA_BYTES;

const _: () = assert!(RECV_BYTES.is_multiple_of(PAGE));
const _: () = assert!(AREAS <= u64::BITS as usize, "Adapter::areas_used is a u64");

/// One context's area, read and written by the kernel.
/// Area `i`'s queues are at MTT entries `mtt::Pool::Area(i)`.
pub(crate) struct Area<'a> {
    mem: &'a Coherent<[u8]>,
    /// Its first byte in `mem`.
    base: usize,
}

impl<'a> Area<'a> {
    /// Area `index` of `mem` (`Resources::recv_areas`).
    pub(crate) fn of(mem: &'a Coherent<[u8]>, index: usize) -> Result<Self> {
        if index >= AREAS || mem.size() < AREAS_BYTES {
            return Err(EINVAL);
        }
        Ok(Area {
            mem,
            base: index * AREA_BYTES,
        })
    }

    pub(crate) fn dma(&self, off: usize) -> u64 {
        self.dma_base() + off as u64
    }

    /// The DMA address of the area's first page (it is one DMA range).
    pub(crate) fn dma_base(&self) -> u64 {
        self.mem.dma_handle() + self.base as u64
    }

    fn ptr(&self, off: usize, len: usize) -> Result<*mut u8> {
        if off.checked_add(len).is_none_or(|end| end > AREA_BYTES) {
            return Err(EINVAL);
        }
        // SAFETY: `base + AREA_BYTES <= mem.size()` (`of`) and `off + len <=
        // AREA_BYTES` (checked above): inside the allocation.
        Ok(unsafe { self.mem.as_mut_ptr().cast::<u8>().add(self.base + off) })
    }

    /// Clears the whole area as a kernel context takes it: nothing of the kernel context
    /// that had it before may show through any of its QP indices.
    pub(crate) fn clear_all(&self) -> Result {
        let p = self.ptr(0, AREA_BYTES)?;
        // SAFETY: In bounds (`ptr`); nothing uses it: its last context
        // closed, and the device writes no part of it (an area the device
        // may still write is never given back: `State::area_in_hw`).
        unsafe { core::ptr::write_bytes(p, 0, AREA_BYTES) };
        Ok(())
    }

    /// Clears QP index `qp`'s memory before its CQ goes to the device.
    pub(crate) fn clear_qp(&self, qp: usize) -> Result {
        let p = self.ptr(qp * QP_AREA_BYTES, QP_AREA_BYTES)?;
        // SAFETY: In bounds (`ptr`); the device does not use this memory
        // (no CQ and no receive WQE names it yet), and only the owning
        // context, under its lock, reaches it.
        unsafe { core::ptr::write_bytes(p, 0, QP_AREA_BYTES) };
        Ok(())
    }

    /// Copies `out.len()` bytes (a multiple of 8) from `off`, which the
    /// device may be writing meanwhile: whole 8-byte loads
    /// (`copy::qwords`), never torn or merged, no `memcpy`; the caller
    /// checks the copy, never the source.
    pub(crate) fn read_qwords(&self, off: usize, out: &mut [u8]) -> Result {
        if off % 8 != 0 || out.len() % 8 != 0 {
            return Err(EINVAL);
        }
        let p = self.ptr(off, out.len())?.cast::<u64>();
        if !(out.as_ptr() as usize).is_multiple_of(8) {
            return Err(EINVAL);
        }
        // SAFETY: `p..p + len` is in bounds (`ptr`) and 8-byte aligned (the
        // allocation and each area are page aligned, `off` a multiple of
        // 8); `out` is as long and 8-byte aligned (checked), and does not
        // overlap the area.
        unsafe { crate::sys::copy::qwords(out.as_mut_ptr().cast(), p, out.len() / 8) };
        Ok(())
    }

    /// A byte the device writes.
    pub(crate) fn read8(&self, off: usize) -> Result<u8> {
        let p = self.ptr(off, 1)?;
        // SAFETY: In bounds (`ptr`); a volatile load of memory the device writes.
        Ok(unsafe { core::ptr::read_volatile(p) })
    }

    /// A big-endian word the device writes (or the kernel, for it).
    pub(crate) fn read_be32(&self, off: usize) -> Result<u32> {
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.ptr(off, 4)?;
        // SAFETY: In bounds and aligned; a volatile load of memory the device writes.
        Ok(u32::from_be(unsafe {
            core::ptr::read_volatile(p.cast::<u32>())
        }))
    }

    pub(crate) fn write_be32(&self, off: usize, v: u32) -> Result {
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.ptr(off, 4)?;
        // SAFETY: In bounds and aligned; the device reads this word by DMA.
        unsafe { core::ptr::write_volatile(p.cast::<u32>(), v.to_be()) };
        Ok(())
    }
}
