// SPDX-License-Identifier: GPL-2.0

//! A context's UAR page and BlueFlame page mapped into its process, for QPs
//! whose send queue user space owns (`abi::QP_F_USER_SEND`), as mlx4_ib maps
//! them for rdma-core (its `mmap()` pgoff 0 and 1). On x86 user space stores
//! to the write-combining mapping; on s390, which has no user-space MMIO
//! without MIO, it passes the mapping's address to `s390_pci_mmio_write()`,
//! which looks the PFN up in this mapping and issues the store blocks.
//!
//! A mapping must not outlive the binding: a process could otherwise write
//! to the BAR of a device another driver owns. So `mmap()` inserts no page:
//! the page goes in at the first access, from the fault handler, under the
//! lock unbind revokes with and only while the adapter is bound (as VFIO
//! inserts its BAR pages with `vmf_insert_pfn()`). Every file with such a
//! mapping is recorded here, and unbind zaps the pages of all of them. By
//! the time a page can fault in, the VMA is linked into the file's address
//! space, so the zap finds every page that was inserted; one inserted in
//! `mmap()` itself could be missed, the VMA being linked only after
//! `mmap()` returns. A later access faults (SIGBUS, or an error from the
//! system call), and no new mapping is made.
//!
//! The kernel crate has no wrapper of `vm_operations_struct`,
//! `vmf_insert_pfn()`, `pgprot_writecombine()` or `unmap_mapping_range()`,
//! and no way to set `VM_PFNMAP`: they are used here.

use kernel::{
    bindings,
    ffi::c_void,
    fs::File,
    mm::virt::{flags, VmaNew},
    prelude::*,
};

use crate::abi;

const PAGE: usize = 4096;
/// The two pages are adjacent in the file's offsets: one zap covers both.
const _: () = assert!(abi::MMAP_BF_PAGE == abi::MMAP_UAR_PAGE + PAGE as u64);

/// What a mapping of a BAR page must be: one shared page.
pub(crate) fn check(vma: &VmaNew) -> Result {
    if vma.end() - vma.start() != PAGE || vma.flags() & flags::SHARED == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// The address space of one file that maps a page of the BAR.
struct Mapped {
    /// The context (its UAR index) whose file it is.
    uar_index: u32,
    /// `file->f_mapping`: valid while the context is, whose file the
    /// process's mappings hold (`Mapped` is removed when it closes).
    mapping: *mut bindings::address_space,
}

// SAFETY: `mapping` is only passed to `unmap_mapping_range()`, which may be
// called from any thread; the list is under the adapter's mutex.
unsafe impl Send for Mapped {}

/// The files with BAR pages mapped, until unbind.
pub(crate) struct UserMaps {
    revoked: bool,
    files: KVec<Mapped>,
}

/// The `vm_operations_struct` of BAR page mappings: a fault handler only.
#[repr(transparent)]
pub(crate) struct VmOps(bindings::vm_operations_struct);

// SAFETY: Built at compile time and only ever read (by the mm core).
unsafe impl Sync for VmOps {}

impl VmOps {
    pub(crate) const fn new(
        fault: unsafe extern "C" fn(*mut bindings::vm_fault) -> bindings::vm_fault_t,
    ) -> Self {
        // SAFETY: All zeroes is a valid `vm_operations_struct`: every
        // callback absent, no name.
        let mut ops: bindings::vm_operations_struct = unsafe { core::mem::zeroed() };
        ops.fault = Some(fault);
        VmOps(ops)
    }
}

/// A page fault in a VMA that [`UserMaps::prepare`] set up.
pub(crate) struct Fault {
    vmf: *mut bindings::vm_fault,
}

impl Fault {
    /// # Safety
    ///
    /// `vmf` is the fault the mm core is handling in a VMA that
    /// [`UserMaps::prepare`] set up, and lives as long as the result.
    pub(crate) unsafe fn from_raw(vmf: *mut bindings::vm_fault) -> Self {
        Fault { vmf }
    }

    /// The private data `prepare()` was given.
    pub(crate) fn private(&self) -> *const c_void {
        // SAFETY: `vmf` and its VMA are live while the fault is handled
        // (`from_raw`).
        unsafe { (*(*self.vmf).__bindgen_anon_1.vma).vm_private_data }
    }

    /// The file offset the VMA maps (`vm_pgoff` in bytes).
    pub(crate) fn offset(&self) -> u64 {
        // SAFETY: As in `private()`.
        unsafe { (*(*self.vmf).__bindgen_anon_1.vma).vm_pgoff as u64 * PAGE as u64 }
    }
}

/// Where a page lies in BAR2, and how the CPU may write it.
pub(crate) enum BarPage {
    /// The UAR page: doorbells, uncached.
    Uar(u64),
    /// The BlueFlame page: write-combining.
    BlueFlame(u64),
}

impl UserMaps {
    pub(crate) fn new() -> Self {
        UserMaps {
            revoked: false,
            files: KVec::new(),
        }
    }

    /// Sets `vma` up to map `page` at its first access, through `ops`
    /// (whose fault handler calls [`UserMaps::insert`]) with `private` as
    /// its private data: one shared page, never executable, write-combining
    /// if it is the BlueFlame page.
    pub(crate) fn prepare(
        &mut self,
        uar_index: u32,
        file: &File,
        vma: &VmaNew,
        page: &BarPage,
        (ops, private): (&'static VmOps, *const c_void),
    ) -> Result {
        if self.revoked {
            return Err(ENODEV);
        }
        check(vma)?;
        vma.try_clear_mayexec()?;
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        vma.set_io();
        // SAFETY: `file` is the file being mapped; `f_mapping` is set for
        // every open file and lives as long as it.
        let mapping = unsafe { (*file.as_ptr()).f_mapping };
        if !self.files.iter().any(|m| m.uar_index == uar_index) {
            self.files.push(Mapped { uar_index, mapping }, GFP_KERNEL)?;
        }
        let raw = vma.as_ptr();
        // SAFETY: `raw` is the VMA this mmap() call sets up, not visible to
        // anybody else yet. VM_PFNMAP (what `remap_pfn_range()` sets) is
        // what `vmf_insert_pfn()` requires; the mapping is shared, so not a
        // COW mapping, and VM_MIXEDMAP is not set. `ops` is static, and the
        // caller guarantees `private` outlives the VMA.
        unsafe {
            (*raw).__bindgen_anon_2.vm_flags |= flags::PFNMAP;
            if matches!(page, BarPage::BlueFlame(_)) {
                (*raw).vm_page_prot = bindings::pgprot_writecombine((*raw).vm_page_prot);
            }
            (*raw).vm_ops = &ops.0;
            (*raw).vm_private_data = private.cast_mut();
        }
        Ok(())
    }

    /// The fault handler's work: inserts `page` (a physical address in
    /// BAR2, as the PCI core reports it; on s390 without MIO the iomap
    /// cookie that `s390_pci_mmio_write()` translates) at the faulting
    /// address, or SIGBUS once unbind revoked the pages.
    pub(crate) fn insert(&self, fault: &Fault, page: &BarPage) -> bindings::vm_fault_t {
        if self.revoked {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        let (BarPage::Uar(phys) | BarPage::BlueFlame(phys)) = *page;
        // SAFETY: `fault.vmf` is the fault being handled, in a VMA set up by
        // `prepare()` (VM_PFNMAP, one page); `phys` is a page of the
        // device's BAR2, reserved by this driver until unbind, which revokes
        // (under the lock the caller holds) before it zaps.
        unsafe {
            let vmf = &*fault.vmf;
            bindings::vmf_insert_pfn(
                vmf.__bindgen_anon_1.vma,
                vmf.__bindgen_anon_1.address & !(PAGE as kernel::ffi::c_ulong - 1),
                (phys / PAGE as u64) as kernel::ffi::c_ulong,
            )
        }
    }

    /// The context with UAR `uar_index` closed: its file has no mapping left.
    pub(crate) fn forget(&mut self, uar_index: u32) {
        self.files.retain(|m| m.uar_index != uar_index);
    }

    /// Unbind: every page mapped so far is zapped, none is mapped again.
    pub(crate) fn revoke(&mut self) {
        self.revoked = true;
        for m in self.files.drain_all() {
            // SAFETY: `m.mapping` is the address space of an open file
            // (`Mapped`); zapping its two BAR pages removes them from every
            // process that maps them through it. A later access faults, and
            // the handler finds the pages revoked (SIGBUS).
            unsafe {
                bindings::unmap_mapping_range(
                    m.mapping,
                    abi::MMAP_UAR_PAGE as i64,
                    (2 * PAGE) as i64,
                    1,
                )
            };
        }
    }
}
