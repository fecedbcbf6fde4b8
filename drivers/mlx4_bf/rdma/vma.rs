// SPDX-License-Identifier: GPL-2.0

//! `mmap()` of a verbs context's file: device pages into the process with
//! `rdma_user_mmap_io()`, which also records the mapping so that the core
//! zaps it when the context is disassociated (the device unbound while the
//! process still runs).

use kernel::{bindings, error::to_result, ffi::c_ulong, prelude::*};

use super::{object::UContext, Driver};

/// The memory type of a mapped device page.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caching {
    /// Uncached: doorbell registers (`pgprot_noncached()`).
    Uncached,
    /// Write-combining: BlueFlame registers (`pgprot_writecombine()`).
    WriteCombining,
}

/// The VMA being set up by an `mmap()` of the context's file.
///
/// # Invariants
///
/// `raw` is that VMA, valid for the `mmap()` call, with the process's
/// `mmap_lock` held for writing.
pub(crate) struct Vma<'a> {
    raw: &'a mut bindings::vm_area_struct,
}

impl<'a> Vma<'a> {
    /// # Safety
    ///
    /// `raw` is the VMA an `mmap()` file operation is setting up, valid for
    /// `'a`.
    pub(super) unsafe fn from_raw(raw: *mut bindings::vm_area_struct) -> Self {
        Vma {
            // SAFETY: By the caller's guarantee `raw` is valid for `'a`; the
            // VMA being set up is this `mmap()` call's alone (`mmap_lock`
            // held for writing).
            raw: unsafe { &mut *raw },
        }
    }

    /// The mapping's offset in pages (`vm_pgoff`).
    pub(crate) fn pgoff(&self) -> u64 {
        self.raw.vm_pgoff as u64
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: Reading the VMA's bounds, which the caller set up.
        let (start, end) = unsafe {
            (
                self.raw.__bindgen_anon_1.__bindgen_anon_1.vm_start,
                self.raw.__bindgen_anon_1.__bindgen_anon_1.vm_end,
            )
        };
        end - start
    }
}

impl<T: Driver> UContext<T> {
    /// Maps `vma.len()` bytes of device memory at page frame `pfn` into
    /// `vma` with `caching`, for this context: the core zaps the mapping
    /// when the context is disassociated.
    pub(crate) fn map_io(&self, vma: &Vma<'_>, pfn: u64, caching: Caching) -> Result {
        let raw = core::ptr::from_ref::<bindings::vm_area_struct>(vma.raw).cast_mut();
        // SAFETY: `raw` is the VMA being set up (type invariant of `Vma`);
        // its protection is only read here.
        let prot = unsafe {
            match caching {
                Caching::Uncached => bindings::pgprot_noncached((*raw).vm_page_prot),
                Caching::WriteCombining => bindings::pgprot_writecombine((*raw).vm_page_prot),
            }
        };
        // SAFETY: The context is live for the call; `raw` is the VMA of
        // this `mmap()` of its file, with `mmap_lock` held; `pfn` names the
        // device pages the provider chose, as many as the VMA is long.
        to_result(unsafe {
            bindings::rdma_user_mmap_io(
                self.as_core(),
                raw,
                pfn as c_ulong,
                vma.len() as c_ulong,
                prot,
                core::ptr::null_mut(),
            )
        })
    }
}
