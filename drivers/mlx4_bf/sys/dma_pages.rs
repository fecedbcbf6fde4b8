// SPDX-License-Identifier: GPL-2.0

//! Kernel pages a process could map and the adapter reads and writes:
//! the one place that calls the page allocator and the DMA-mapping C API
//! through `kernel::bindings` (the 7.2 kernel crate's
//! `scatterlist::SGTable<Owned>` maps only vmalloc memory it owns, not
//! order-0 pages split from one contiguous allocation). Reading the mapped
//! table goes through the crate's `SGTable::from_raw()`.

use kernel::{
    bindings, device::Device, dma::DataDirection, error::to_result, ffi::c_ulong, page::PAGE_SIZE,
    prelude::*, scatterlist::SGTable, types::Opaque,
};

use crate::region;

const _: () = assert!(
    PAGE_SIZE as u64 == region::PAGE_SIZE,
    "MTT entries are 4 KiB pages"
);

/// The longest DMA segment, set as the device's at probe (mlx4_core's).
pub(crate) const MAX_SEGMENT: u32 = 1 << 30;

/// The `struct device` of `dev` (`Device` is a transparent wrapper of it).
fn raw_dev(dev: &Device) -> *mut bindings::device {
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// Pages mapped for the adapter's DMA. Must be unmapped with
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
