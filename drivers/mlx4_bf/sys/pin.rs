// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for the adapter and mapped for its DMA: the one place
//! that calls the mm and DMA-mapping C API through `kernel::bindings`.
//!
//! The 7.2 kernel crate has no wrapper for `pin_user_pages_fast()`,
//! `unpin_user_pages_dirty_lock()` or `account_locked_vm()`, and its
//! `scatterlist::SGTable<Owned>` maps only pages it owns (vmalloc memory),
//! not pinned user pages; so this file does what `ib_umem_get()` does with
//! the C calls: pin with `FOLL_LONGTERM`, charge the pages to the process's
//! RLIMIT_MEMLOCK (`mm->locked_vm`, as VFIO does; `CAP_IPC_LOCK` exempts),
//! build an `sg_table` over them and map it. Reading the mapped table goes
//! through the crate's `SGTable::from_raw()`.

use kernel::{
    bindings,
    device::Device,
    dma::DataDirection,
    error::to_result,
    ffi::{c_int, c_ulong},
    mm::Mm,
    page::PAGE_SIZE,
    prelude::*,
    scatterlist::SGTable,
    sync::aref::ARef,
    types::Opaque,
};

use crate::region;

const _: () = assert!(
    PAGE_SIZE as u64 == region::PAGE_SIZE,
    "MTT entries are 4 KiB pages"
);

/// Pages `pin_user_pages_fast()` is asked for at a time (its count is an int).
const PIN_CHUNK: usize = 1 << 16;
/// The longest DMA segment, set as the device's at probe (mlx4_core's).
pub(crate) const MAX_SEGMENT: u32 = 1 << 30;

/// Pinned pages of a process, charged to its `locked_vm` until dropped.
pub(crate) struct Pinned {
    pages: KVVec<*mut bindings::page>,
    writable: bool,
    /// The process's mm (a `mmgrab()` reference), charged `charged` pages.
    mm: ARef<Mm>,
    charged: usize,
}

// SAFETY: The page pointers are only handed back to the mm and DMA calls,
// which may run on any thread.
unsafe impl Send for Pinned {}
// SAFETY: Shared references only read the pointers.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// Pins the `npages` pages from user address `start` (page aligned) of
    /// the calling process, for the adapter to write too if `writable`.
    /// `-ENOMEM` beyond RLIMIT_MEMLOCK, `-EFAULT` for a range not mapped (or
    /// not writable when it must be).
    pub(crate) fn pin(start: u64, npages: usize, writable: bool) -> Result<Self> {
        let task = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**task.mm().ok_or(EFAULT)?);
        let count = c_ulong::try_from(npages)?;
        // SAFETY: `mm` is a live mm (we hold a reference).
        to_result(unsafe { bindings::account_locked_vm(mm.as_raw(), count, true) })?;
        // From here on, dropping `pinned` uncharges and unpins what is there.
        let mut pinned = Pinned {
            pages: KVVec::new(),
            writable,
            mm,
            charged: npages,
        };
        pinned.pages = KVVec::with_capacity(npages, GFP_KERNEL)?;
        let mut flags = bindings::FOLL_LONGTERM;
        if writable {
            flags |= bindings::FOLL_WRITE;
        }
        while pinned.pages.len() < npages {
            let done = pinned.pages.len();
            let want = (npages - done).min(PIN_CHUNK);
            let addr = usize::try_from(start + (done as u64) * region::PAGE_SIZE)?;
            // SAFETY: The vector has room for `npages` pointers; at most `want`
            // are written after the `done` already there.
            let got = unsafe {
                bindings::pin_user_pages_fast(
                    addr,
                    want as c_int,
                    flags,
                    pinned.pages.as_mut_ptr().add(done),
                )
            };
            if got <= 0 {
                return Err(if got < 0 {
                    Error::from_errno(got)
                } else {
                    EFAULT
                });
            }
            // SAFETY: `pin_user_pages_fast()` stored `got` (<= `want`) pointers.
            unsafe { pinned.pages.inc_len(got as usize) };
        }
        Ok(pinned)
    }

    pub(crate) fn count(&self) -> usize {
        self.pages.len()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if !self.pages.is_empty() {
            // SAFETY: Each pointer was pinned by `pin_user_pages_fast()` and is
            // unpinned exactly once, here.
            unsafe {
                bindings::unpin_user_pages_dirty_lock(
                    self.pages.as_mut_ptr(),
                    self.pages.len() as c_ulong,
                    self.writable,
                )
            };
        }
        // Uncharge the process if it still exists (VFIO's `vfio_lock_acct()`).
        if let Some(mm) = self.mm.mmget_not_zero() {
            // SAFETY: `mm` is live; these pages were charged to it in `pin()`.
            unsafe { bindings::account_locked_vm(mm.as_raw(), self.charged as c_ulong, false) };
        }
    }
}

/// The `struct device` of `dev` (`Device` is a transparent wrapper of it).
fn raw_dev(dev: &Device) -> *mut bindings::device {
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// A `Pinned`'s pages mapped for the adapter's DMA. Must be unmapped with
/// [`DmaMap::unmap`] while the device is still bound.
pub(crate) struct DmaMap {
    sgt: KBox<Opaque<bindings::sg_table>>,
    mapped: bool,
    /// Both ways if the adapter may write the pages, else to the device only.
    dir: DataDirection,
}

// SAFETY: The table is only read through shared references.
unsafe impl Send for DmaMap {}
// SAFETY: As above.
unsafe impl Sync for DmaMap {}

impl DmaMap {
    /// Maps `pinned` for `dev`: both directions if its pages were pinned
    /// writable (the adapter may write them), else to the device only (an
    /// IOMMU then refuses the adapter's writes), in segments no longer than
    /// the device can map at once.
    ///
    /// # Safety
    ///
    /// `dev` is bound to this driver now and until [`DmaMap::unmap`].
    pub(crate) unsafe fn map(dev: &Device, pinned: &mut Pinned) -> Result<Self> {
        // SAFETY: The pages are pinned until `pinned` is dropped, which its
        // owner does only after unmapping; `dev` as the caller guarantees.
        unsafe { Self::map_pages(dev, &mut pinned.pages, pinned.writable) }
    }

    /// # Safety
    ///
    /// `pages` stay allocated while mapped; `dev` is bound to this driver
    /// now and until [`DmaMap::unmap`].
    unsafe fn map_pages(
        dev: &Device,
        pages: &mut [*mut bindings::page],
        writable: bool,
    ) -> Result<Self> {
        let n = u32::try_from(pages.len())?;
        if n == 0 {
            return Err(EINVAL);
        }
        let map = DmaMap {
            sgt: KBox::new(Opaque::zeroed(), GFP_KERNEL)?,
            mapped: false,
            dir: if writable {
                DataDirection::Bidirectional
            } else {
                DataDirection::ToDevice
            },
        };
        // SAFETY: `dev` is bound (caller).
        let max_mapping = unsafe { bindings::dma_max_mapping_size(raw_dev(dev)) };
        // Whole pages, at least one, no longer than the device's segments.
        let max_segment = (max_mapping.min(MAX_SEGMENT as usize) & !(PAGE_SIZE - 1)).max(PAGE_SIZE);
        // SAFETY: `sgt` is zeroed memory for a table; `pages` holds `n` valid
        // pages, which outlive the table (the caller's guarantee).
        to_result(unsafe {
            bindings::sg_alloc_table_from_pages_segment(
                map.sgt.get(),
                pages.as_mut_ptr(),
                n,
                0,
                n as c_ulong * PAGE_SIZE as c_ulong,
                max_segment as u32,
                bindings::GFP_KERNEL,
            )
        })?;
        let mut map = map;
        // SAFETY: The table was just built; `dev` is bound (caller).
        to_result(unsafe {
            bindings::dma_map_sgtable(raw_dev(dev), map.sgt.get(), map.dir.into(), 0)
        })?;
        map.mapped = true;
        Ok(map)
    }

    /// Calls `f` with the DMA address of each 4 KiB page, in order.
    pub(crate) fn for_each_page(&self, mut f: impl FnMut(u64)) {
        if !self.mapped {
            return;
        }
        // SAFETY: The table is valid and not changed while `self` is borrowed.
        let sgt = unsafe { SGTable::from_raw(self.sgt.get()) };
        for e in sgt.iter() {
            let base = e.dma_address();
            #[allow(
                clippy::useless_conversion,
                reason = "resource_size_t is u32 on some 32-bit configs"
            )]
            let len = u64::from(e.dma_len());
            let mut off = 0;
            while off < len {
                f(base + off);
                off += region::PAGE_SIZE;
            }
        }
    }

    /// Unmaps the pages.
    ///
    /// # Safety
    ///
    /// `dev` is the device of [`DmaMap::map`], still bound.
    pub(crate) unsafe fn unmap(&mut self, dev: &Device) {
        if core::mem::take(&mut self.mapped) {
            // SAFETY: Mapped in `map()` for this device with this direction.
            unsafe {
                bindings::dma_unmap_sgtable(raw_dev(dev), self.sgt.get(), self.dir.into(), 0)
            };
        }
    }
}

impl Drop for DmaMap {
    fn drop(&mut self) {
        // A mapping dropped without `unmap()` is leaked rather than undone on
        // a device that may be gone; the table itself is freed.
        // SAFETY: The table was built by `sg_alloc_table_from_pages_segment()`
        // (or is zeroed, which `sg_free_table()` accepts).
        unsafe { bindings::sg_free_table(self.sgt.get()) };
    }
}

// `page_address()` is a macro the bindings cannot call. Without highmem
// (x86_64, s390) `kmap_local_page()` is `page_address()`: the page's address
// in the direct map, valid as long as the page, nothing to unmap.
#[cfg(CONFIG_HIGHMEM)]
compile_error!("kernel pages shared with user space are reached through the direct map");

/// Physically contiguous, zeroed kernel pages, each its own order-0 page
/// (`split_page()`), so that a process that maps one holds a reference of
/// its own: dropping `KernelPages` frees the pages no process maps, and the
/// others when their last mapping goes.
pub(crate) struct KernelPages {
    pages: KVec<*mut bindings::page>,
    addr: *mut u8,
}

// SAFETY: The pages are plain kernel memory; the pointers are only handed to
// the mm and DMA calls, which may run on any thread.
unsafe impl Send for KernelPages {}
// SAFETY: Shared references only read the pointers.
unsafe impl Sync for KernelPages {}

impl KernelPages {
    /// `bytes` (whole pages) of contiguous memory.
    pub(crate) fn alloc(bytes: usize) -> Result<Self> {
        let n = bytes.div_ceil(PAGE_SIZE);
        let order = n.next_power_of_two().trailing_zeros();
        // Dropped on failure: frees the pages recorded so far.
        let mut mem = KernelPages {
            pages: KVec::with_capacity(n, GFP_KERNEL)?,
            addr: core::ptr::null_mut(),
        };
        // SAFETY: Any order below MAX_PAGE_ORDER may be asked for; null is
        // checked.
        let head =
            unsafe { bindings::alloc_pages(bindings::GFP_KERNEL | bindings::__GFP_ZERO, order) };
        if head.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `head` is a fresh, non-compound allocation of this order.
        unsafe { bindings::split_page(head, order) };
        for i in 0..1usize << order {
            // SAFETY: The `struct page`s of one allocation are contiguous.
            let page = unsafe { head.add(i) };
            // Room for `n` was reserved: recording one never allocates.
            if i < n && mem.pages.push_within_capacity(page).is_ok() {
                continue;
            }
            // SAFETY: An order-0 page of ours (after `split_page()`) that
            // `mem` does not hold: beyond `n`.
            unsafe { bindings::__free_pages(page, 0) };
        }
        if mem.pages.len() < n {
            return Err(ENOMEM);
        }
        // SAFETY: `head` is a live page; see `kmap_local_page()` above.
        mem.addr = unsafe { bindings::kmap_local_page(head) }.cast();
        Ok(mem)
    }

    /// The kernel address of the first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    pub(crate) fn len(&self) -> usize {
        self.pages.len() * PAGE_SIZE
    }

    /// Page `i`, for a process to map.
    pub(crate) fn page(&self, i: usize) -> Option<*mut bindings::page> {
        self.pages.get(i).copied()
    }

    /// The pages mapped for `dev`'s DMA (both ways) as one range; its DMA
    /// address.
    ///
    /// # Safety
    ///
    /// `dev` is bound to this driver now and until [`DmaMap::unmap`], and
    /// the pages outlive the mapping.
    pub(crate) unsafe fn map_contiguous(&mut self, dev: &Device) -> Result<(DmaMap, u64)> {
        // SAFETY: As the caller guarantees.
        let mut map = unsafe { DmaMap::map_pages(dev, &mut self.pages, true) }?;
        let (mut base, mut next) = (None, 0);
        let mut contiguous = true;
        map.for_each_page(|a| {
            let b = *base.get_or_insert(a);
            contiguous &= a == b + next;
            next += region::PAGE_SIZE;
        });
        match base {
            Some(b) if contiguous => Ok((map, b)),
            _ => {
                // SAFETY: Just mapped for `dev`, which is bound (caller).
                unsafe { map.unmap(dev) };
                Err(EINVAL)
            }
        }
    }
}

impl Drop for KernelPages {
    fn drop(&mut self) {
        for &page in self.pages.iter() {
            // SAFETY: Our reference to an order-0 page (`alloc()`); a
            // process that still maps it holds its own.
            unsafe { bindings::__free_pages(page, 0) };
        }
    }
}
