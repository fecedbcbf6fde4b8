// SPDX-License-Identifier: GPL-2.0

//! BAR2 mappings: the UAR area uncached, the BlueFlame area uncached or
//! write-combining.
//!
//! The kernel crate's `pci::Bar` maps a whole BAR with one memory type. mlx4
//! needs two (`ioremap()` for UARs, `io_mapping_create_wc()` for BlueFlame),
//! and on x86 a write-combining alias of a range already mapped uncached is
//! silently degraded by PAT. So the two halves are mapped separately here,
//! with the narrowest `kernel::bindings` calls, and handed out as
//! bounds-checked [`Mmio`] views. The owner is kept in a `Devres`, so the
//! mappings are torn down when the device is unbound.
//!
//! Where a post writes, a context's doorbell or a burst in its BlueFlame
//! buffer, is worked out from the adapter's [`Caps`] and checked once
//! ([`Doorbell`], [`BfSlot`]): the areas mapped here are exactly those of
//! the same `Caps`, so the post's writes need no second check.

use kernel::{
    bindings,
    ffi::c_ulong,
    io::{Io, Mmio, MmioRaw},
    pci,
    prelude::*,
};

use crate::{hw::cmd::be_mmio::BeMmio, layout::Caps, sys::mmio};

/// Which memory type the BlueFlame area gets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BfMapping {
    Uncached,
    WriteCombining,
}

/// The requested and mapped BAR2 of one adapter.
///
/// # Invariants
///
/// `[start, start + len)` is a busy region obtained with
/// `__request_region()`; `uar` and `bf` are live `ioremap*()` mappings of the
/// UAR and BlueFlame areas of that range, as the `Caps` given to
/// [`Bar2::new`] place them: `uar` is `0..bf_area().0`, `bf` is `bf_area()`.
pub(crate) struct Bar2 {
    start: bindings::resource_size_t,
    len: bindings::resource_size_t,
    uar: MmioRaw,
    bf: MmioRaw,
}

/// Maps `len` bytes of MMIO at `phys`; `None` if the mapping failed.
fn map(phys: bindings::resource_size_t, len: usize, how: BfMapping) -> Result<MmioRaw> {
    // SAFETY: `phys..phys + len` lies inside BAR2, which the caller requested.
    let addr = unsafe {
        match how {
            BfMapping::Uncached => bindings::ioremap(phys, len as c_ulong),
            BfMapping::WriteCombining => mmio::map_wc(phys, len),
        }
    };
    if addr.is_null() {
        return Err(ENOMEM);
    }
    MmioRaw::new(addr as usize, len).inspect_err(|_| {
        // SAFETY: `addr` was just returned by `ioremap*()` and is not used elsewhere.
        unsafe { bindings::iounmap(addr) };
    })
}

impl Bar2 {
    pub(crate) const BAR: u32 = 2;

    pub(crate) fn new(
        pdev: &pci::Device<kernel::device::Bound>,
        caps: &Caps,
        bf: BfMapping,
    ) -> Result<Self> {
        let start = pdev.resource_start(Self::BAR)?;
        let len = pdev.resource_len(Self::BAR)?;
        let (bf_off, bf_len) = caps.bf_area();
        // SAFETY: `iomem_resource` is the root of the I/O memory tree; the
        // name is a static string.
        let busy = unsafe {
            bindings::__request_region(
                &raw mut bindings::iomem_resource,
                start,
                len,
                c"mlx4_bf".as_char_ptr(),
                0,
            )
        };
        if busy.is_null() {
            dev_err!(pdev.as_ref(), "BAR2 {:#x}+{:#x} is busy\n", start, len);
            return Err(EBUSY);
        }
        let release = || {
            // SAFETY: The region was requested above and is released once.
            unsafe { bindings::__release_region(&raw mut bindings::iomem_resource, start, len) }
        };
        let uar = map(start, bf_off as usize, BfMapping::Uncached).inspect_err(|_| release())?;
        let bf = match map(start + bf_off, bf_len as usize, bf) {
            Ok(bf) => bf,
            Err(e) => {
                // SAFETY: `uar` was mapped above and is not used elsewhere.
                unsafe { bindings::iounmap(uar.addr() as *mut c_void) };
                release();
                return Err(e);
            }
        };
        // INVARIANT: region requested and both areas mapped above.
        Ok(Bar2 {
            start,
            len,
            uar,
            bf,
        })
    }

    /// The UAR pages (doorbell registers).
    pub(crate) fn uar(&self) -> &Mmio {
        // SAFETY: `uar` is a live mapping by the type invariant.
        unsafe { Mmio::from_raw(&self.uar) }
    }

    /// The BlueFlame pages, one per UAR, starting at page 0.
    pub(crate) fn bf(&self) -> &Mmio {
        // SAFETY: `bf` is a live mapping by the type invariant.
        unsafe { Mmio::from_raw(&self.bf) }
    }
}

/// The send doorbell of one context's UAR.
///
/// # Invariants
///
/// `offset + 4` lies inside the UAR area of the `Caps` it was made for.
#[derive(Clone, Copy)]
pub(crate) struct Doorbell {
    offset: usize,
}

impl Doorbell {
    /// The send doorbell of UAR `uar_index`.
    pub(crate) fn new(caps: &Caps, uar_index: u32) -> Result<Self> {
        let offset = caps.doorbell_offset(uar_index);
        if offset + 4 > caps.bf_area().0 {
            return Err(EINVAL);
        }
        // INVARIANT: Checked just above; the UAR area ends where the
        // BlueFlame area starts.
        Ok(Doorbell {
            offset: offset as usize,
        })
    }

    /// Offset in BAR2 (and in the UAR area, which starts at 0).
    pub(crate) fn offset(self) -> usize {
        self.offset
    }

    /// Rings it for QP `qpn` in `uar`, the UAR area of the same `Caps`:
    /// `writel()`, which orders the stores to the send queue before it.
    pub(crate) fn ring(self, uar: &Mmio, qpn: u32) -> Result {
        BeMmio::new(uar).try_write32(crate::wqe::doorbell_value(qpn), self.offset)
    }
}

/// A burst's place in one context's BlueFlame buffer.
///
/// # Invariants
///
/// `offset` and `len` are multiples of 8, and `offset + len` lies inside the
/// BlueFlame area of the `Caps` it was made for (`offset` counts from the
/// area's start).
#[derive(Clone, Copy)]
pub(crate) struct BfSlot {
    offset: usize,
    len: usize,
}

impl BfSlot {
    /// `len` bytes at the start of BlueFlame buffer `half` (0 or
    /// `bf_buf_size`) of UAR `uar_index`.
    pub(crate) fn new(caps: &Caps, uar_index: u32, half: u32, len: usize) -> Result<Self> {
        let (area, area_len) = caps.bf_area();
        let offset = caps.bf_page_offset(uar_index) - area + u64::from(half);
        if len > caps.bf_buf_size() as usize
            || offset + len as u64 > area_len
            || offset % 8 != 0
            || len % 8 != 0
        {
            return Err(EINVAL);
        }
        // INVARIANT: Checked just above.
        Ok(BfSlot {
            offset: offset as usize,
            len,
        })
    }

    /// Offset in the BlueFlame area.
    pub(crate) fn offset(self) -> usize {
        self.offset
    }

    pub(crate) fn len(self) -> usize {
        self.len
    }
}

impl Drop for Bar2 {
    fn drop(&mut self) {
        // SAFETY: By the type invariant both mappings and the region are live
        // and owned by `self`; nothing uses them after this.
        unsafe {
            bindings::iounmap(self.bf.addr() as *mut c_void);
            bindings::iounmap(self.uar.addr() as *mut c_void);
            bindings::__release_region(&raw mut bindings::iomem_resource, self.start, self.len);
        }
    }
}
