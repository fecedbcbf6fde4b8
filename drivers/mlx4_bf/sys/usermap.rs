// SPDX-License-Identifier: GPL-2.0

//! What a context maps into its process, set up here and filled at fault
//! time: its UAR page and BlueFlame page, for QPs whose send queue user
//! space owns (`abi::QP_F_USER_SEND`), as mlx4_ib maps them for rdma-core
//! (its `mmap()` pgoff 0 and 1), and the pages of its area (`hw/memory/user_area.rs`). On
//! x86 user space stores to the write-combining mapping; on s390, which has
//! no user-space MMIO without MIO, it passes the mapping's address to
//! `s390_pci_mmio_write()`, which looks the PFN up in this mapping and issues
//! the store blocks.
//!
//! A mapping must not outlive the binding: a process could otherwise write
//! to the BAR of a device another driver owns, or keep reading memory the
//! adapter no longer owns. So `mmap()` inserts no page: the page goes in at
//! the first access, from the fault handler, under the lock unbind revokes
//! with and only while the adapter is bound (as VFIO inserts its BAR pages
//! with `vmf_insert_pfn()`). Every file with such a mapping is recorded
//! here, and unbind zaps all of them. By the time a page can fault in, the
//! VMA is linked into the file's address space, so the zap finds every page
//! that was inserted; one inserted in `mmap()` itself could be missed, the
//! VMA being linked only after `mmap()` returns. A later access faults
//! (SIGBUS, or an error from the system call), and no new mapping is made.
//!
//! The kernel crate has no wrapper of `vm_operations_struct`,
//! `vmf_insert_pfn()`, `vmf_insert_page_mkwrite()`, `pgprot_writecombine()`,
//! `pgprot_noncached()` or `unmap_mapping_range()`, and no way to set
//! `VM_PFNMAP`: they are used here.

use kernel::{
    bindings,
    ffi::c_void,
    fs::File,
    mm::virt::{flags, VmaNew},
    prelude::*,
};

const PAGE: usize = 4096;

/// What a mapping of a BAR page must be: one shared page.
pub(crate) fn check(vma: &VmaNew) -> Result {
    if vma.end() - vma.start() != PAGE || vma.flags() & flags::SHARED == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// The address space of one file that maps pages of the adapter.
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

/// `pgprot_noncached()`, a macro the bindings cannot call: on x86 it adds
/// `cachemode2protval(_PAGE_CACHE_MODE_UC_MINUS)`, which is PCD in both cache
/// mode tables x86 sets up (PAT's, and the fixed one `nopat` falls back to:
/// arch/x86/mm/pat/memtype.c). With PAT, `vmf_insert_pfn()` then takes the
/// type PAT has reserved for the page (`ioremap()`'s UC-, the same); without
/// it, this bit is all that keeps the doorbells out of the cache. Elsewhere
/// it is the generic identity (s390 maps no BAR page for user stores).
fn pgprot_noncached(prot: bindings::pgprot_t) -> bindings::pgprot_t {
    #[cfg(target_arch = "x86_64")]
    let prot = bindings::pgprot_t {
        pgprot: prot.pgprot | (1 << bindings::_PAGE_BIT_PCD),
    };
    prot
}

/// The files with pages mapped (BAR pages or areas), until unbind.
pub(crate) struct UserMaps {
    revoked: bool,
    files: KVec<Mapped>,
}

/// The `vm_operations_struct` of a context's mappings: a fault handler only.
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

    /// The file offset of the faulting page (`vmf->pgoff` in bytes).
    pub(crate) fn offset(&self) -> u64 {
        // SAFETY: As in `private()`.
        unsafe { (*self.vmf).__bindgen_anon_1.pgoff as u64 * PAGE as u64 }
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

    /// Records `file` (of the context with UAR `uar_index`) for unbind to
    /// zap; `-ENODEV` once unbind has.
    fn record(&mut self, uar_index: u32, file: &File) -> Result {
        if self.revoked {
            return Err(ENODEV);
        }
        // SAFETY: `file` is the file being mapped; `f_mapping` is set for
        // every open file and lives as long as it.
        let mapping = unsafe { (*file.as_ptr()).f_mapping };
        if !self.files.iter().any(|m| m.uar_index == uar_index) {
            self.files.push(Mapped { uar_index, mapping }, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// What every mapping of a context gets: recorded for unbind, never
    /// executable, not inherited, not growing, and faulted in through `ops`
    /// with `private` (which the caller guarantees outlives the VMA).
    fn set_up(
        &mut self,
        uar_index: u32,
        file: &File,
        vma: &VmaNew,
        (ops, private): (&'static VmOps, *const c_void),
    ) -> Result {
        vma.try_clear_mayexec()?;
        self.record(uar_index, file)?;
        vma.set_dontcopy();
        vma.set_dontexpand();
        let raw = vma.as_ptr();
        // SAFETY: `raw` is the VMA this mmap() call sets up, not visible to
        // anybody else yet; `ops` is static, and `private` outlives the VMA
        // (caller).
        unsafe {
            (*raw).vm_ops = &ops.0;
            (*raw).vm_private_data = private.cast_mut();
        }
        Ok(())
    }

    /// Sets `vma` up to map `page` at its first access, through `ops`
    /// (whose fault handler calls [`UserMaps::insert`]) with `private` as
    /// its private data: one shared page, never executable, uncached if it is
    /// the UAR page and write-combining if it is the BlueFlame page (as
    /// mlx4_ib maps them), whatever the process asked for.
    pub(crate) fn prepare(
        &mut self,
        uar_index: u32,
        file: &File,
        vma: &VmaNew,
        page: &BarPage,
        (ops, private): (&'static VmOps, *const c_void),
    ) -> Result {
        check(vma)?;
        self.set_up(uar_index, file, vma, (ops, private))?;
        vma.set_dontdump();
        vma.set_io();
        let raw = vma.as_ptr();
        // SAFETY: `raw` is the VMA this mmap() call sets up, not visible to
        // anybody else yet. VM_PFNMAP (what `remap_pfn_range()` sets) is
        // what `vmf_insert_pfn()` requires; the mapping is shared, so not a
        // COW mapping, and VM_MIXEDMAP is not set.
        unsafe {
            (*raw).__bindgen_anon_2.vm_flags |= flags::PFNMAP;
            (*raw).vm_page_prot = match page {
                BarPage::Uar(_) => pgprot_noncached((*raw).vm_page_prot),
                BarPage::BlueFlame(_) => bindings::pgprot_writecombine((*raw).vm_page_prot),
            };
        }
        Ok(())
    }

    /// Sets `vma` (which the caller checked) up to map kernel pages at
    /// fault time, through `ops` (whose fault handler calls
    /// [`UserMaps::insert_page`]) with `private` as its private data:
    /// never executable, not inherited, not growing.
    pub(crate) fn prepare_ram(
        &mut self,
        uar_index: u32,
        file: &File,
        vma: &VmaNew,
        (ops, private): (&'static VmOps, *const c_void),
    ) -> Result {
        self.set_up(uar_index, file, vma, (ops, private))?;
        vma.set_mixedmap();
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

    /// The fault handler's work for a VMA `prepare_ram()` set up: inserts
    /// `page` (a kernel page whose owner keeps it until the VMA is gone; the
    /// mapping takes a reference of its own) at the faulting address, or
    /// SIGBUS once unbind revoked the mappings.
    pub(crate) fn insert_page(
        &self,
        fault: &Fault,
        page: *mut bindings::page,
    ) -> bindings::vm_fault_t {
        if self.revoked {
            return bindings::vm_fault_reason_VM_FAULT_SIGBUS;
        }
        // SAFETY: `fault.vmf` is the fault being handled, in a VMA set up by
        // `prepare_ram()` (VM_MIXEDMAP); `page` is an order-0 kernel page,
        // live (caller). Unbind revokes under the lock the caller holds
        // before it zaps.
        unsafe {
            let vmf = &*fault.vmf;
            let write = vmf.flags & bindings::fault_flag_FAULT_FLAG_WRITE != 0;
            bindings::vmf_insert_page_mkwrite(fault.vmf, page, write)
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
            // (`Mapped`); zapping the whole file (length 0: to its end) removes
            // its BAR pages and area pages from every process that maps them
            // through it. A later access faults, and the handler finds the
            // mappings revoked (SIGBUS).
            unsafe { bindings::unmap_mapping_range(m.mapping, 0, 0, 1) };
        }
    }
}
