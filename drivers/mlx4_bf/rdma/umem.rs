// SPDX-License-Identifier: GPL-2.0

//! User memory for the adapter (`struct ib_umem`): pinned, charged to the
//! process and mapped for DMA by the core (`ib_umem_get_va()`), released
//! when its [`Umem`] is dropped, or at the device's teardown.
//!
//! Every umem of a device is in the device's [`Umems`]: a handle names it
//! by number and reaches it only through the table's lock, so the table
//! can release what is still there when the device is torn down, after
//! the provider has stopped its hardware and before the device is freed
//! (`ib_umem_release()` unmaps through the device). A handle that outlives
//! that finds nothing: a `Umem` cannot outlive its device's teardown, and
//! none is lost. A provider that must keep memory pinned while its hardware
//! may still reach it (a destroy command that failed) hands the handle to
//! [`Umem::keep_until_teardown`].

use core::ptr::NonNull;
use kernel::{
    bindings, error::from_err_ptr, ffi::c_ulong, new_mutex, prelude::*, rbtree::RBTree, sync::Arc,
    sync::Mutex,
};

/// `IB_ACCESS_LOCAL_WRITE`: the adapter writes the memory.
pub(crate) const ACCESS_LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;

/// A pinned umem, released when dropped.
///
/// # Invariants
///
/// An umem `ib_umem_get*()` returned, owned, of a device that is not freed
/// before this is dropped ([`Umems`]' invariant).
struct Pinned(NonNull<bindings::ib_umem>);

// SAFETY: Owned; the core's functions on an umem may run on any thread.
unsafe impl Send for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant), released once.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}

struct Table {
    /// Cleared at teardown: no umem is entered after it.
    open: bool,
    next: u32,
    live: RBTree<u32, Pinned>,
}

/// The umems of one device.
///
/// # Invariants
///
/// Every `Pinned` in the table is of the device, which is not freed
/// before [`Umems::release_all`] returned.
#[pin_data]
pub(crate) struct Umems {
    #[pin]
    table: Mutex<Table>,
}

impl Umems {
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Umems {
            table <- new_mutex!(Table {
                open: true,
                next: 0,
                live: RBTree::new(),
            }),
        })
    }

    /// At teardown: releases every umem still held, and enters none after.
    /// Returns how many were released.
    pub(super) fn release_all(&self) -> usize {
        let live = {
            let mut t = self.table.lock();
            t.open = false;
            core::mem::take(&mut t.live)
        };
        let n = live.iter().count();
        // Outside the lock: releasing unpins and may sleep.
        drop(live);
        n
    }
}

/// Pinned user memory, by its number in its device's [`Umems`].
pub(crate) struct Umem {
    umems: Arc<Umems>,
    id: u32,
}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` with
    /// `access` (`IB_ACCESS_*`) and maps them for DMA by `ib`, whose table
    /// of umems is `umems` ([`super::object::Device::pin_user`]).
    ///
    /// # Safety
    ///
    /// `ib` is a live device whose memory outlives `umems.release_all()`.
    pub(super) unsafe fn get(
        ib: *mut bindings::ib_device,
        umems: &Arc<Umems>,
        addr: u64,
        len: usize,
        access: u32,
    ) -> Result<Self> {
        // SAFETY: `ib` is a live device (the contract); the call pins and
        // maps memory of the current process, checking the range itself.
        let raw = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(ib, core::ptr::null(), 0, addr, len, access as i32)
        })?;
        // INVARIANT: Just returned, owned here; entered below in the device's
        // table, which releases it before the device is freed.
        let pinned = Pinned(NonNull::new(raw).ok_or(EFAULT)?);
        let umems = umems.clone();
        let id = {
            let mut t = umems.table.lock();
            if !t.open {
                drop(t);
                drop(pinned);
                return Err(ENODEV);
            }
            let mut id = t.next;
            while t.live.get(&id).is_some() {
                id = id.wrapping_add(1);
            }
            t.next = id.wrapping_add(1);
            t.live.try_create_and_insert(id, pinned, GFP_KERNEL)?;
            id
        };
        Ok(Umem { umems, id })
    }

    /// `f` of the umem, or `ENODEV` if the device's teardown released it.
    fn with<R>(&self, f: impl FnOnce(NonNull<bindings::ib_umem>) -> R) -> Result<R> {
        let t = self.umems.table.lock();
        let pinned = t.live.get(&self.id).ok_or(ENODEV)?;
        Ok(f(pinned.0))
    }

    /// Offset of the first byte in its first page.
    pub(crate) fn offset(&self) -> Result<usize> {
        // SAFETY: Live while in the table, whose lock `with` holds.
        self.with(|u| unsafe { bindings::ib_umem_offset(u.as_ptr()) as usize })
    }

    /// The DMA address of each block of `page_size` (a power of two the
    /// device supports) that covers the memory, in order
    /// (`rdma_umem_for_each_dma_block()`).
    pub(crate) fn dma_blocks(&self, page_size: usize) -> Result<KVec<u64>> {
        if !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        self.with(|u| {
            let umem = u.as_ptr();
            // SAFETY: Live while in the table, whose lock `with` holds;
            // mapped by the core, its table set up.
            let (count, offset) = unsafe {
                (
                    bindings::ib_umem_num_dma_blocks(umem, page_size as c_ulong),
                    bindings::ib_umem_offset(umem) as usize,
                )
            };
            let mut blocks = KVec::with_capacity(count, GFP_KERNEL)?;
            let mut iter = bindings::ib_block_iter::default();
            // SAFETY: `__rdma_umem_block_iter_start()` and `_next()`, as the
            // macro: the iterator walks the umem's table, at most `count`
            // blocks; the umem stays live for the loop (lock held).
            unsafe {
                bindings::__rdma_block_iter_start(
                    &mut iter,
                    (*umem).sgt_append.sgt.sgl,
                    (*umem).sgt_append.sgt.nents,
                    page_size as c_ulong,
                );
                iter.__sg_advance = (offset & !(page_size - 1)) as u32;
                iter.__sg_numblocks = count;
                while blocks.len() < count && bindings::__rdma_block_iter_next(&mut iter) {
                    blocks.push(bindings::rdma_block_iter_dma_address(&mut iter), GFP_KERNEL)?;
                }
            }
            Ok(blocks)
        })?
    }

    /// Keeps the memory pinned and mapped until the device's teardown, which
    /// releases it after the provider stopped its hardware: for memory the
    /// hardware may still reach (its destroy command failed).
    pub(crate) fn keep_until_teardown(self) {
        // The entry stays in the table; only the handle goes.
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is not used after its `Arc` is moved out.
        drop(unsafe { core::ptr::read(&this.umems) });
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        let pinned = self.umems.table.lock().live.remove(&self.id);
        // Outside the lock: releasing unpins and may sleep.
        drop(pinned);
    }
}
