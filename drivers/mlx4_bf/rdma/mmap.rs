// SPDX-License-Identifier: GPL-2.0

//! `mmap()` of a verbs context's file, through the core's mmap entries
//! (`rdma_user_mmap_entry`, as EFA and mlx5 map): a provider offers a new
//! context the device pages it may map, each at a page offset of the file
//! ([`MmapTable`]); the layer's `mmap` op maps exactly such a page, with its
//! memory type, through `rdma_user_mmap_io()`, which also records the
//! mapping so that the core zaps it when the context is disassociated.
//!
//! Only the device's own memory can be offered: an [`IoPage`] comes from an
//! [`IoRegion`], a memory BAR of a PCI function, at an offset checked
//! against the BAR's length, and a context takes only pages of the function
//! its device was made for. No page frame of RAM, and no page of another
//! device, can reach a process through this layer.

use core::ptr::NonNull;
use kernel::{
    bindings, device::Bound, error::to_result, ffi::c_ulong, mm::virt::VmaNew, pci, prelude::*,
};

/// `PAGE_SIZE`, for offsets in BARs and files.
const PAGE: u64 = bindings::PAGE_SIZE as u64;

/// The memory type of a mapped device page.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Caching {
    /// Uncached: doorbell registers (`pgprot_noncached()`).
    Uncached,
    /// Write-combining: BlueFlame registers (`pgprot_writecombine()`).
    WriteCombining,
}

/// A memory BAR of a bound PCI function, whole: device memory user space
/// may be given pages of.
///
/// # Invariants
///
/// `[start, start + len)` is a memory resource (`IORESOURCE_MEM`) of the
/// function whose `struct device` is at `owner`, `start` page-aligned;
/// `len` a multiple of the page size.
#[derive(Clone, Copy)]
pub(crate) struct IoRegion {
    owner: usize,
    start: u64,
    len: u64,
}

impl IoRegion {
    /// BAR `bar` of `pdev`; `EINVAL` unless it is a page-aligned memory BAR.
    #[allow(
        clippy::useless_conversion,
        reason = "resource_size_t is u32 on some 32-bit configs"
    )]
    pub(crate) fn pci_bar(pdev: &pci::Device<Bound>, bar: u32) -> Result<Self> {
        let start = u64::from(pdev.resource_start(bar)?);
        let len = u64::from(pdev.resource_len(bar)?);
        // `pci::Device` is a transparent wrapper of `struct pci_dev`.
        let raw = core::ptr::from_ref(pdev).cast::<bindings::pci_dev>();
        // SAFETY: `raw` is the bound function (`pdev`'s invariant); `bar` is a
        // valid index (`resource_start()` checked it); its flags are read.
        let flags = unsafe { (*raw).resource[bar as usize].flags };
        if flags & bindings::IORESOURCE_MEM as c_ulong == 0
            || len == 0
            || start % PAGE != 0
            || len % PAGE != 0
        {
            return Err(EINVAL);
        }
        // INVARIANT: Checked above; `pci::Device` is a transparent wrapper
        // of `struct pci_dev`, whose `dev` is its `struct device`.
        Ok(IoRegion {
            // SAFETY: `raw` is the function (above); only the address is taken.
            owner: unsafe { &raw const (*raw).dev } as usize,
            start,
            len,
        })
    }

    /// The page at `offset` in the BAR, mapped with `caching`; `EINVAL` if
    /// `offset` is not page-aligned or the page is not inside the BAR.
    pub(crate) fn page(&self, offset: u64, caching: Caching) -> Result<IoPage> {
        if offset % PAGE != 0 || offset >= self.len {
            return Err(EINVAL);
        }
        // INVARIANT: A page of a memory BAR (checked above, `IoRegion`'s invariant).
        Ok(IoPage {
            owner: self.owner,
            pfn: (self.start + offset) / PAGE,
            caching,
        })
    }
}

/// One page of device memory and how to map it.
///
/// # Invariants
///
/// `pfn` is a page of a memory BAR of the PCI function whose `struct
/// device` is at `owner`.
#[derive(Clone, Copy)]
pub(crate) struct IoPage {
    owner: usize,
    pfn: u64,
    caching: Caching,
}

/// An mmap entry of a context: the core's part first, then the page.
#[repr(C)]
struct Entry {
    core: bindings::rdma_user_mmap_entry,
    page: IoPage,
}

/// The entries a context offers, removed when it goes.
///
/// # Invariants
///
/// Each pointer is an [`Entry`] inserted into `ctx`'s mmap table by
/// [`MmapTable::offer`], whose reference is still ours to drop.
pub(crate) struct MmapTable {
    ctx: NonNull<bindings::ib_ucontext>,
    entries: KVec<NonNull<Entry>>,
}

// SAFETY: The entries are the core's, used under its locks; the context
// pointer is only passed to the core.
unsafe impl Send for MmapTable {}
// SAFETY: `&self` has no method.
unsafe impl Sync for MmapTable {}

impl MmapTable {
    /// # Safety
    ///
    /// `ctx` is a context being allocated (its `mmap_xa` initialized), which
    /// outlives the table.
    pub(super) unsafe fn new(ctx: *mut bindings::ib_ucontext) -> Result<Self> {
        Ok(MmapTable {
            ctx: NonNull::new(ctx).ok_or(EINVAL)?,
            entries: KVec::new(),
        })
    }

    /// Offers `page` at page offset `pgoff` of the context's file (one
    /// page); `EINVAL` if it is not a page of the function the device was
    /// made for, `ENOMEM` if that offset is taken.
    pub(crate) fn offer(&mut self, pgoff: u32, page: IoPage) -> Result {
        // SAFETY: The context being allocated (`new()`'s contract) is of a
        // device set up by this layer, whose parent is the function it was
        // made for (`UnregisteredDevice::new`); only the address is read.
        let parent = unsafe { (*(*self.ctx.as_ptr()).device).__bindgen_anon_1.dev.parent };
        if page.owner != parent as usize {
            return Err(EINVAL);
        }
        self.entries.reserve(1, GFP_KERNEL)?;
        let entry = KBox::new(
            Entry {
                // SAFETY: All zeros is a valid, unused entry; the core
                // initializes it at insertion.
                core: unsafe { core::mem::zeroed() },
                page,
            },
            GFP_KERNEL,
        )?;
        let entry = NonNull::from(KBox::leak(entry));
        let raw = entry.as_ptr();
        // SAFETY: `ctx` is the context being allocated (`new`'s contract);
        // `raw` is a fresh entry, which the core owns from here until it
        // calls `mmap_free` (`free()`), or until we drop our reference by
        // removing it. `insert_exact()` is `insert_range()` from `pgoff` to
        // `pgoff`.
        let inserted = to_result(unsafe {
            bindings::rdma_user_mmap_entry_insert_range(
                self.ctx.as_ptr(),
                &raw mut (*raw).core,
                PAGE as usize,
                pgoff,
                pgoff,
            )
        });
        if let Err(e) = inserted {
            // SAFETY: Not inserted: still ours alone, from `KBox::leak`.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(e);
        }
        // INVARIANT: Inserted, our reference held. Room was reserved above.
        self.entries.push(entry, GFP_KERNEL)?;
        Ok(())
    }
}

impl Drop for MmapTable {
    fn drop(&mut self) {
        for e in self.entries.drain_all() {
            // SAFETY: Inserted, our reference (type invariant); dropped once.
            // No mapping is made of it any more; the core frees it through
            // `mmap_free` once the last mapping of it is gone.
            unsafe { bindings::rdma_user_mmap_entry_remove(&raw mut (*e.as_ptr()).core) };
        }
    }
}

/// `mmap_free`: the core is done with an entry.
///
/// # Safety
///
/// `entry` is the core part of an [`Entry`] that [`MmapTable::offer`]
/// inserted, whose last reference is gone.
pub(super) unsafe fn free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: `core` is the first field of the `repr(C)` `Entry`, boxed by
    // `offer()`; nobody uses it any more.
    drop(unsafe { KBox::from_raw(entry.cast::<Entry>()) });
}

/// The layer's `mmap` op: the entry at the VMA's offset, if the context
/// offers one of the VMA's length, mapped with its memory type.
///
/// # Safety
///
/// `ctx` is a live context of the layer; `vma` is the VMA an `mmap()` of
/// its file is setting up (`ib_uverbs_mmap()`: `mmap_lock` held for
/// writing, the disassociation SRCU read-locked), valid for the call.
pub(super) unsafe fn map(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> Result {
    // SAFETY: The VMA is being set up by this `mmap()` (the contract).
    let new = unsafe { VmaNew::from_raw(vma) };
    // SAFETY: A live context; the VMA of its file. The entry, if found, is
    // returned with a reference we drop below.
    let core = unsafe { bindings::rdma_user_mmap_entry_get(ctx, new.as_ptr()) };
    let core = NonNull::new(core).ok_or(EINVAL)?;
    // SAFETY: Every entry of our contexts is an `Entry` (`offer()`), live
    // while we hold the reference.
    let page = unsafe { (*core.as_ptr().cast::<Entry>()).page };
    // SAFETY: The VMA's protection is read, as the caller of
    // `rdma_user_mmap_io()` does; the VMA is this call's.
    let prot = unsafe {
        let prot = (*new.as_ptr()).vm_page_prot;
        match page.caching {
            Caching::Uncached => bindings::pgprot_noncached(prot),
            Caching::WriteCombining => bindings::pgprot_writecombine(prot),
        }
    };
    // SAFETY: The context and the VMA of its `mmap()`, as the function's
    // contract says (`rdma_user_mmap_io()` sets the VMA's protection and
    // maps the page, whose length `rdma_user_mmap_entry_get()` checked); the
    // page is device memory (`IoPage`'s invariant). On success the core
    // takes its own reference on the entry for the mapping.
    let mapped = to_result(unsafe {
        bindings::rdma_user_mmap_io(
            ctx,
            new.as_ptr(),
            page.pfn as c_ulong,
            PAGE as c_ulong,
            prot,
            core.as_ptr(),
        )
    });
    // SAFETY: The reference `rdma_user_mmap_entry_get()` gave us.
    unsafe { bindings::rdma_user_mmap_entry_put(core.as_ptr()) };
    mapped
}
