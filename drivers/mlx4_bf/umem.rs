// SPDX-License-Identifier: GPL-2.0

//! Memory a context shares with its process: for each of its QPs the
//! receive CQ ring, the CQ doorbell record and the receive buffers, mapped
//! with `mmap()` on the device file (RAM, so s390 may map it too).
//!
//! The areas are allocated at probe (a DMA allocation needs the bound
//! device) and live in the `Adapter`, outside the revocable hardware: a
//! process may keep its mapping after unbind, and the pages must not go back
//! to the allocator under it. They are freed with the last reference to the
//! adapter, after the last context, whose file every mapping pins.
//!
//! Layout of one area (offsets are also the mmap offsets):
//!
//! ```text
//! QP index i at i * QP_AREA_BYTES:
//!   +0      receive CQ ring, RCQ_ENTRIES * CQE_SIZE     read-only
//!   +4 KiB  CQ doorbell record page (set_ci at +0)      read-write
//!   +8 KiB  RQ_ENTRIES receive buffers of RECV_BUF_SIZE read-only
//!   +24 KiB the WQE page: POST_SEND's staged WQE        read-write
//! ```
//!
//! A QP whose send queue user space owns (`abi::QP_F_USER_SEND`) receives
//! nothing and posts no staged WQE: its QP buffer (send queue, receive
//! queue, RQ doorbell record, `QP_BUF_BYTES`) takes the place of the receive
//! buffers and the WQE page, read-write. All QPs of a context are of one
//! kind, so the mapping's permissions follow from the context.

use kernel::{
    bindings,
    device::{Bound, Device},
    dma::Coherent,
    mm::virt::VmaNew,
    prelude::*,
    sync::aref::ARef,
};

use crate::{
    cq::CQE_SIZE, MAX_QPS_PER_CONTEXT, QP_BUF_BYTES, RECV_BUF_SIZE, RQ_ENTRIES, SQ_ENTRIES,
    SQ_STRIDE,
};

const PAGE: usize = 4096;
/// CQEs in a receive CQ: one page.
pub(crate) const RCQ_LOG_ENTRIES: u32 = 7;
pub(crate) const RCQ_ENTRIES: u32 = 1 << RCQ_LOG_ENTRIES;
pub(crate) const CQ_OFFSET: usize = 0;
pub(crate) const CQ_DB_OFFSET: usize = PAGE;
pub(crate) const RECV_OFFSET: usize = 2 * PAGE;
const RECV_BYTES: usize = RQ_ENTRIES as usize * RECV_BUF_SIZE;
pub(crate) const WQE_OFFSET: usize = RECV_OFFSET + RECV_BYTES;
pub(crate) const QP_AREA_BYTES: usize = WQE_OFFSET + PAGE;
/// The QP buffer of a QP user space posts to.
pub(crate) const USER_QP_OFFSET: usize = RECV_OFFSET;
const AREA_BYTES: usize = MAX_QPS_PER_CONTEXT * QP_AREA_BYTES;
/// Contexts that may hold an area at once (each keeps it until closed).
pub(crate) const AREAS: usize = 32;

const _: () = assert!(RCQ_ENTRIES as usize * CQE_SIZE == PAGE);
const _: () = assert!(RECV_BYTES.is_multiple_of(PAGE));
const _: () = assert!(USER_QP_OFFSET + QP_BUF_BYTES <= QP_AREA_BYTES);

/// The areas of one adapter.
pub(crate) struct UserMem {
    dev: ARef<Device>,
    areas: KVec<Coherent<[u8]>>,
}

impl UserMem {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        let mut areas = KVec::with_capacity(AREAS, GFP_KERNEL)?;
        for _ in 0..AREAS {
            areas.push(
                Coherent::zeroed_slice(dev, AREA_BYTES, GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        Ok(UserMem {
            dev: dev.into(),
            areas,
        })
    }

    /// Area `area`, which the caller's context owns.
    pub(crate) fn area(&self, area: usize) -> Result<Area<'_>> {
        Ok(Area(self.areas.get(area).ok_or(EINVAL)?))
    }

    /// Maps the part of area `area` that `vma` asks for: one region of a
    /// QP index, read-only unless it is the doorbell record or WQE page, or
    /// the QP buffer of a context whose QPs user space posts to.
    /// `start` is the mapping's file offset (`vm_pgoff` in bytes).
    pub(crate) fn mmap(&self, area: usize, vma: &VmaNew, start: usize, user_send: bool) -> Result {
        let mem = self.areas.get(area).ok_or(EINVAL)?;
        let len = vma.end() - vma.start();
        let within = start % QP_AREA_BYTES;
        let (region, writable) = match within {
            CQ_OFFSET => (RCQ_ENTRIES as usize * CQE_SIZE, false),
            USER_QP_OFFSET if user_send => (QP_BUF_BYTES, true),
            CQ_DB_OFFSET | WQE_OFFSET => (PAGE, true),
            RECV_OFFSET => (RECV_BYTES, false),
            _ => return Err(EINVAL),
        };
        if start >= AREA_BYTES || len == 0 || len > region {
            return Err(EINVAL);
        }
        if !writable {
            if vma.writable() {
                return Err(EPERM);
            }
            vma.try_clear_maywrite()?;
        }
        vma.set_dontcopy();
        // The kernel crate has no wrapper of dma_mmap_coherent().
        // SAFETY: `dev` is the device `mem` was allocated for, `mem` is
        // that allocation (CPU and DMA address, size), and `vma` is being
        // set up by this mmap() call; dma_mmap_attrs() takes the offset into
        // the allocation from `vm_pgoff`, checked above to lie inside it.
        // The pages stay allocated while the mapping exists (module doc).
        let ret = unsafe {
            bindings::dma_mmap_attrs(
                // `Device` is a transparent wrapper of `struct device`.
                core::ptr::from_ref::<Device>(&self.dev).cast_mut().cast(),
                vma.as_ptr(),
                mem.as_mut_ptr().cast(),
                mem.dma_handle(),
                AREA_BYTES,
                0,
            )
        };
        kernel::error::to_result(ret)
    }
}

/// One context's area, read and written by the kernel.
pub(crate) struct Area<'a>(&'a Coherent<[u8]>);

impl Area<'_> {
    pub(crate) fn dma(&self, off: usize) -> u64 {
        self.0.dma_handle() + off as u64
    }

    fn ptr(&self, off: usize, len: usize) -> Result<*mut u8> {
        if off.checked_add(len).is_none_or(|end| end > self.0.size()) {
            return Err(EINVAL);
        }
        // SAFETY: `off + len` lies inside the allocation (checked above).
        Ok(unsafe { self.0.as_mut_ptr().cast::<u8>().add(off) })
    }

    /// Clears the whole area as a context takes it: nothing of the context
    /// that had it before may show through any of its QP indices.
    pub(crate) fn clear_all(&self) {
        // SAFETY: The whole allocation; nothing uses it: its last context
        // closed (the mappings of a process hold the file, so none is left),
        // and the device writes no part of it (an area the device may still
        // write is never given back: `State::area_in_hw`).
        unsafe { core::ptr::write_bytes(self.0.as_mut_ptr().cast::<u8>(), 0, self.0.size()) };
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

    /// Starts the QP buffer of a user-posted QP at index `qp` as
    /// `qp::init_sq_ownership()` does: cleared, every send WQE's owner bit
    /// set. Only the process that maps it may be writing it meanwhile
    /// (raw stores, no reference to the memory), which harms only itself:
    /// the adapter checks every WQE of such a QP.
    pub(crate) fn init_user_qp(&self, qp: usize) -> Result {
        let p = self.ptr(qp * QP_AREA_BYTES + USER_QP_OFFSET, QP_BUF_BYTES)?;
        // SAFETY: In bounds (`ptr`), and not read by the device: the QP
        // that will use it is not created yet, or was just reset.
        unsafe { core::ptr::write_bytes(p, 0, QP_BUF_BYTES) };
        for i in 0..SQ_ENTRIES as usize {
            // SAFETY: Slot `i` lies in the send queue, at the start of the
            // buffer (`SQ_ENTRIES * SQ_STRIDE < QP_BUF_BYTES`), 4-byte aligned.
            unsafe {
                core::ptr::write_volatile(
                    p.add(i * SQ_STRIDE).cast::<u32>(),
                    crate::qp::CTRL_OWNER.to_be(),
                )
            };
        }
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
        unsafe { crate::copy::qwords(out.as_mut_ptr().cast(), p, out.len() / 8) };
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
