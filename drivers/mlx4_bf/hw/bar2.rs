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

use kernel::{
    bindings,
    ffi::c_ulong,
    io::{Mmio, MmioRaw},
    pci,
    prelude::*,
};

use crate::{layout::Caps, sys::mmio};

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
/// UAR and BlueFlame areas of that range.
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
