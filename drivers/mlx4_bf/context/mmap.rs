// SPDX-License-Identifier: GPL-2.0

//! What a context maps into its process: its UAR and BlueFlame pages and
//! its area, each page faulted in while the adapter is bound (`usermap.rs`).

use super::{Context, NO_AREA, SEND_USER};
use crate::{
    abi,
    geometry::MAX_QPS_PER_CONTEXT,
    hw::memory::user_area,
    sys::usermap::{BarPage, Fault, VmOps},
};
use kernel::{bindings, fs::File, mm::virt::VmaNew, prelude::*, sync::atomic::Acquire};

impl Context {
    /// A region of the context's area at file offset `offset`: only the QP
    /// indices with a QP of this context now. A mapping made earlier
    /// outlives DESTROY_QP: it still shows the context's own memory, cleared
    /// again when a QP is created there.
    pub(super) fn map_area(&self, file: &File, vma: &VmaNew, offset: usize) -> Result {
        // Nothing new is mapped once the adapter is unbound.
        drop(self.hw()?);
        let area = self.area_index.load(Acquire);
        let index = offset / user_area::QP_AREA_BYTES;
        let created = self.qp_mask.load(Acquire);
        if area == NO_AREA || index >= MAX_QPS_PER_CONTEXT || created & (1 << index) == 0 {
            return Err(EINVAL);
        }
        self.adapter
            .areas()
            .check_mmap(area as usize, vma, offset, self.user_posted())?;
        let mut maps = self.adapter.user_maps();
        // The VMA holds the file open, so this context outlives it.
        let private = core::ptr::from_ref(self).cast();
        maps.prepare_ram(self.uar_index, file, vma, (&AREA_OPS, private))
    }

    /// The context's UAR or BlueFlame page into its process, for QPs it
    /// posts to itself: the context's QPs are all of that kind from now on.
    /// A context whose QPs the kernel posts to never maps them: the
    /// reserved lkey its QPs may use would reach any memory.
    pub(super) fn map_bar_page(&self, file: &File, vma: &VmaNew, offset: u64) -> Result {
        // A mapping that cannot be made decides nothing.
        crate::sys::usermap::check(vma)?;
        if self.claim_send_mode(SEND_USER).is_err() {
            return Err(EPERM);
        }
        let page = self.bar_page(offset);
        // Under the lock unbind revokes them with: prepared before, zapped.
        let mut maps = self.adapter.user_maps();
        if self.hw().is_err() {
            return Err(ENODEV);
        }
        // The VMA holds the file open, so this context outlives it.
        let private = core::ptr::from_ref(self).cast();
        maps.prepare(self.uar_index, file, vma, &page, (&BAR_PAGE_OPS, private))
    }

    /// The page of BAR2 that mmap() offset `offset` maps for this context.
    pub(super) fn bar_page(&self, offset: u64) -> BarPage {
        let caps = &self.adapter.caps();
        let start = self.adapter.bar2_start();
        if offset == abi::MMAP_BF_PAGE {
            BarPage::BlueFlame(start + caps.bf_page_offset(self.uar_index))
        } else {
            BarPage::Uar(start + caps.uar_offset(self.uar_index))
        }
    }

    /// The first access to a page `map_bar_page()` set up: the page goes
    /// in while the adapter is bound, under the lock unbind revokes with.
    pub(super) fn bar_page_fault(&self, fault: &Fault) -> bindings::vm_fault_t {
        let page = self.bar_page(fault.offset());
        let maps = self.adapter.user_maps();
        if self.hw().is_err() {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        maps.insert(fault, &page)
    }

    /// A page of the context's area, faulted in while the adapter is
    /// bound, under the lock unbind revokes with. `mmap()` checked the
    /// range, which the VMA cannot grow beyond (VM_DONTEXPAND).
    pub(super) fn area_fault(&self, fault: &Fault) -> bindings::vm_fault_t {
        let area = self.area_index.load(Acquire) as usize;
        let Some(page) = self.adapter.areas().page(area, fault.offset() as usize) else {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        };
        let maps = self.adapter.user_maps();
        if self.hw().is_err() {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        maps.insert_page(fault, page)
    }
}

/// The operations of a mapping of the context's area.
static AREA_OPS: VmOps = VmOps::new(area_fault);

/// The operations of a UAR or BlueFlame page mapping.
static BAR_PAGE_OPS: VmOps = VmOps::new(bar_page_fault);

/// # Safety
///
/// Called by the mm core for a fault in a VMA that `mmap()` set up with
/// `AREA_OPS`.
unsafe extern "C" fn area_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: The mm core hands us the fault being handled, in a VMA set up
    // by `mmap()` with `AREA_OPS`.
    let fault = unsafe { Fault::from_raw(vmf) };
    // SAFETY: As in `bar_page_fault()`.
    let ctx = unsafe { &*fault.private().cast::<Context>() };
    ctx.area_fault(&fault)
}

/// # Safety
///
/// Called by the mm core for a fault in a VMA that `map_bar_page()` set up.
unsafe extern "C" fn bar_page_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: The mm core hands us the fault being handled, in a VMA set up
    // by `map_bar_page()` (the only user of `BAR_PAGE_OPS`).
    let fault = unsafe { Fault::from_raw(vmf) };
    // SAFETY: That VMA's private data is the context of the file it holds
    // open: pinned, and alive until the file is released, after the VMA.
    let ctx = unsafe { &*fault.private().cast::<Context>() };
    ctx.bar_page_fault(&fault)
}
