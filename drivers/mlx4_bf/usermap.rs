// SPDX-License-Identifier: GPL-2.0

//! A context's UAR page and BlueFlame page mapped into its process, for QPs
//! whose send queue user space owns (`abi::QP_F_USER_SEND`), as mlx4_ib maps
//! them for rdma-core (its `mmap()` pgoff 0 and 1). On x86 user space stores
//! to the write-combining mapping; on s390, which has no user-space MMIO
//! without MIO, it passes the mapping's address to `s390_pci_mmio_write()`,
//! which looks the PFN up in this mapping and issues the store blocks.
//!
//! A mapping must not outlive the binding: a process could otherwise write
//! to the BAR of a device another driver owns. Every file with such a
//! mapping is recorded here, and unbind zaps the pages of all of them (as
//! VFIO zaps its BARs); a later access faults (SIGBUS, or -EFAULT from the
//! system call), and no new mapping is made.
//!
//! The kernel crate has no wrapper of `remap_pfn_range()`,
//! `pgprot_writecombine()` or `unmap_mapping_range()`: they are called here.

use kernel::{
    bindings,
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

    /// Maps `page` (a physical address in BAR2, as the PCI core reports
    /// it; on s390 without MIO the iomap cookie that `s390_pci_mmio_write()`
    /// translates) into `vma`, one shared page, never executable.
    pub(crate) fn map(
        &mut self,
        uar_index: u32,
        file: &File,
        vma: &VmaNew,
        page: BarPage,
    ) -> Result {
        if self.revoked {
            return Err(ENODEV);
        }
        check(vma)?;
        vma.try_clear_mayexec()?;
        vma.set_dontcopy();
        vma.set_dontexpand();
        // SAFETY: `file` is the file being mapped; `f_mapping` is set for
        // every open file and lives as long as it.
        let mapping = unsafe { (*file.as_ptr()).f_mapping };
        if !self.files.iter().any(|m| m.uar_index == uar_index) {
            self.files.push(Mapped { uar_index, mapping }, GFP_KERNEL)?;
        }
        let raw = vma.as_ptr();
        let (phys, write_combining) = match page {
            BarPage::Uar(p) => (p, false),
            BarPage::BlueFlame(p) => (p, true),
        };
        // SAFETY: `raw` is the VMA this mmap() call sets up, not visible to
        // anybody else yet; its start and length (one page, checked above)
        // are its own, and `phys` is a page of the device's BAR2, which
        // stays reserved by this driver until unbind zaps the mapping.
        let ret = unsafe {
            if write_combining {
                (*raw).vm_page_prot = bindings::pgprot_writecombine((*raw).vm_page_prot);
            }
            bindings::remap_pfn_range(
                raw,
                vma.start(),
                (phys / PAGE as u64) as usize,
                PAGE,
                (*raw).vm_page_prot,
            )
        };
        kernel::error::to_result(ret)
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
            // process that maps them through it. Later accesses find no
            // page (VM_PFNMAP without a fault handler: SIGBUS).
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
