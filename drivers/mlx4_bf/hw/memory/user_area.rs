// SPDX-License-Identifier: GPL-2.0

//! The kernel QPs' receive memory: for each QP of a kernel context (the
//! kernel ping's, `context/receive.rs`) its receive CQ ring, the CQ
//! doorbell record and the receive buffers, in one area per context. The
//! adapter writes it; the kernel reads it (no process maps it).
//!
//! Each area is kernel memory mapped as one DMA range, allocated at probe
//! and mapped for the adapter's DMA in a `Devres`: the DMA mapping ends when
//! the device is unbound, after unbind has quiesced or reset the adapter.
//! The memory itself is plain pages that live in the `Adapter` until its
//! last holder drops it, so no kernel path that raced with unbind touches
//! freed memory. The adapter finds an area through the MTT entries written
//! at probe (`mtt::Pool::Area`).
//!
//! Like `ib_umem`, the areas rely on DMA that is cache-coherent and not
//! bounced (x86, s390): what the adapter writes is what the kernel reads.
//!
//! Layout of one area:
//!
//! ```text
//! QP index i at i * QP_AREA_BYTES:
//!   +0      receive CQ ring, RCQ_ENTRIES * CQE_SIZE
//!   +4 KiB  CQ doorbell record page (set_ci at +0, the arm word at +4)
//!   +8 KiB  RQ_ENTRIES receive buffers of RECV_BUF_SIZE
//!   +24 KiB a page no one uses (`WQE_OFFSET`: the retired device file's
//!           staged WQE), still counted in QP_AREA_BYTES
//! ```

use kernel::{
    device::{Bound, Device},
    devres::Devres,
    prelude::*,
    sync::aref::ARef,
};

use crate::{
    geometry::{MAX_QPS_PER_CONTEXT, QP_BUF_BYTES, RECV_BUF_SIZE, RQ_ENTRIES},
    sys::dma_pages::{DmaMap, KernelPages},
};

const PAGE: usize = 4096;
pub(crate) const CQ_OFFSET: usize = 0;
pub(crate) const CQ_DB_OFFSET: usize = PAGE;
pub(crate) const RECV_OFFSET: usize = 2 * PAGE;
const RECV_BYTES: usize = RQ_ENTRIES as usize * RECV_BUF_SIZE;
pub(crate) const WQE_OFFSET: usize = RECV_OFFSET + RECV_BYTES;
pub(crate) const QP_AREA_BYTES: usize = WQE_OFFSET + PAGE;
/// The QP buffer of a QP user space posts to.
pub(crate) const USER_QP_OFFSET: usize = RECV_OFFSET;
pub(crate) const AREA_BYTES: usize = MAX_QPS_PER_CONTEXT * QP_AREA_BYTES;
/// Contexts that may hold an area at once (each keeps it until closed).
pub(crate) const AREAS: usize = 32;

const _: () = assert!(RECV_BYTES.is_multiple_of(PAGE));
const _: () = assert!(USER_QP_OFFSET + QP_BUF_BYTES <= QP_AREA_BYTES);

/// The DMA mappings of the areas, undone while the device is bound.
struct AreaDma {
    dev: ARef<Device>,
    maps: KVec<DmaMap>,
}

impl Drop for AreaDma {
    fn drop(&mut self) {
        for map in self.maps.iter_mut() {
            // SAFETY: Mapped for `dev` in `UserAreas::new()`; a `Devres` drops
            // this while `dev` is still bound (at unbind, after the adapter
            // was quiesced, or earlier with the adapter).
            unsafe { map.unmap(&self.dev) };
        }
    }
}

/// The areas of one adapter.
pub(crate) struct UserAreas {
    /// Declared (so dropped) before the pages it maps.
    #[allow(dead_code, reason = "held for its drop: unmapped at unbind")]
    dma: Devres<AreaDma>,
    areas: KVec<KernelPages>,
    /// The DMA address of each area (meaningless once `dma` is revoked,
    /// when the adapter is gone too).
    dma_bases: KVec<u64>,
}

impl UserAreas {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        // Dropped in the reverse order on failure: the mappings are undone
        // (`dma`) before the pages go (`areas`).
        let mut areas = KVec::with_capacity(AREAS, GFP_KERNEL)?;
        for _ in 0..AREAS {
            areas.push(KernelPages::alloc(AREA_BYTES)?, GFP_KERNEL)?;
        }
        let mut dma = AreaDma {
            dev: ARef::from(&**dev),
            maps: KVec::with_capacity(AREAS, GFP_KERNEL)?,
        };
        let mut dma_bases = KVec::with_capacity(AREAS, GFP_KERNEL)?;
        for mem in areas.iter_mut() {
            // SAFETY: `dev` is bound; `AreaDma` unmaps while it still is, and
            // the pages (in `areas`, dropped after `dma`) outlive the mapping.
            let (map, base) = unsafe { mem.map_contiguous(dev) }.inspect_err(|_| {
                dev_err!(dev, "an area of {AREA_BYTES} bytes is not one DMA range\n");
            })?;
            dma.maps.push(map, GFP_KERNEL)?;
            dma_bases.push(base, GFP_KERNEL)?;
        }
        Ok(UserAreas {
            dma: Devres::new(dev, dma)?,
            areas,
            dma_bases,
        })
    }

    /// Area `area`, which the caller's context owns.
    pub(crate) fn area(&self, area: usize) -> Result<Area<'_>> {
        Ok(Area {
            index: area,
            mem: self.areas.get(area).ok_or(EINVAL)?,
            dma: *self.dma_bases.get(area).ok_or(EINVAL)?,
        })
    }
}

/// One context's area, read and written by the kernel.
pub(crate) struct Area<'a> {
    /// Which area: its queues' MTT entries are `mtt::Pool::Area(index)`.
    pub(crate) index: usize,
    mem: &'a KernelPages,
    dma: u64,
}

impl Area<'_> {
    pub(crate) fn dma(&self, off: usize) -> u64 {
        self.dma + off as u64
    }

    /// The DMA address of the area's first page (it is one DMA range).
    pub(crate) fn dma_base(&self) -> u64 {
        self.dma
    }

    fn ptr(&self, off: usize, len: usize) -> Result<*mut u8> {
        if off.checked_add(len).is_none_or(|end| end > self.mem.len()) {
            return Err(EINVAL);
        }
        // SAFETY: `off + len` lies inside the allocation (checked above).
        Ok(unsafe { self.mem.as_ptr().add(off) })
    }

    /// Clears the whole area as a context takes it: nothing of the context
    /// that had it before may show through any of its QP indices.
    pub(crate) fn clear_all(&self) {
        // SAFETY: The whole allocation; nothing uses it: its last context
        // closed (the mappings of a process hold the file, so none is left),
        // and the device writes no part of it (an area the device may still
        // write is never given back: `State::area_in_hw`).
        unsafe { core::ptr::write_bytes(self.mem.as_ptr(), 0, self.mem.len()) };
    }

    /// Clears QP index `qp`'s memory before its CQ goes to the device.
    pub(crate) fn clear_qp(&self, qp: usize) -> Result {
        let p = self.ptr(qp * QP_AREA_BYTES, QP_AREA_BYTES)?;
        // SAFETY: In bounds (`ptr`); the device does not use this memory
        // (no CQ and no receive WQE names it yet); a process that mapped it
        // may read it (or write the doorbell page) meanwhile, which only
        // affects itself.
        unsafe { core::ptr::write_bytes(p, 0, QP_AREA_BYTES) };
        Ok(())
    }

    /// Copies `out.len()` bytes (a multiple of 8) from `off`, which user
    /// space may be writing meanwhile: whole 8-byte loads (`copy::qwords`),
    /// never torn or merged, no `memcpy`; the caller checks the copy, never
    /// the source.
    pub(crate) fn read_qwords(&self, off: usize, out: &mut [u8]) -> Result {
        if off % 8 != 0 || out.len() % 8 != 0 {
            return Err(EINVAL);
        }
        let p = self.ptr(off, out.len())?.cast::<u64>();
        if !(out.as_ptr() as usize).is_multiple_of(8) {
            return Err(EINVAL);
        }
        // SAFETY: `p..p + len` is in bounds (`ptr`) and 8-byte aligned (the
        // area is page aligned, `off` a multiple of 8); `out` is as long and
        // 8-byte aligned (checked), and does not overlap the area.
        unsafe { crate::sys::copy::qwords(out.as_mut_ptr().cast(), p, out.len() / 8) };
        Ok(())
    }

    /// A byte the device (or, on the doorbell page, user space) writes.
    pub(crate) fn read8(&self, off: usize) -> Result<u8> {
        let p = self.ptr(off, 1)?;
        // SAFETY: In bounds (`ptr`); a volatile load of memory others write.
        Ok(unsafe { core::ptr::read_volatile(p) })
    }

    /// A big-endian word the device (or user space) writes.
    pub(crate) fn read_be32(&self, off: usize) -> Result<u32> {
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.ptr(off, 4)?;
        // SAFETY: In bounds and aligned; a volatile load of memory others write.
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
