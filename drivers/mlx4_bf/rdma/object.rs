// SPDX-License-Identifier: GPL-2.0

//! The objects of a provider: the ib_device, and those the core allocates
//! for user space: a ucontext, a PD, a CQ, a QP, an SRQ. Each is the core's struct
//! followed by the provider's data, in one zeroed allocation of the size
//! the provider declared (`size_ib_*`, `INIT_RDMA_OBJ_SIZE()`); the core
//! frees it after the destroy op. A memory region is the one object the
//! provider allocates itself (`reg_user_mr` returns it), here in a `KBox`
//! freed at `dereg_mr`.
//!
//! The safety argument, once for all of them ([`InCore`]):
//! - The core struct is the first field of a `#[repr(C)]` struct, so a
//!   pointer to it is a pointer to the whole object, and the allocation is
//!   at least `size_of` the object and aligned for it (kmalloc's alignment
//!   is at least 8, asserted against the object's below).
//! - The provider's data is written by the create op (`init`) before the core
//!   publishes the object, and dropped by the destroy op (`drop_data`), after
//!   which the core frees the memory without looking at it again. Between
//!   the two, the core calls the other ops with the object, never
//!   concurrently with its create or destroy; a reference to it handed to
//!   the provider is valid for the op's call.
//! - The core never moves the allocation: the data is pinned.

use core::{marker::PhantomData, mem::offset_of, ptr::addr_of_mut};
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    sync::Arc,
    types::Opaque,
};

use super::{
    event::Events,
    mmap::MmapTable,
    sysfs::{Head, Identity},
    umem::{Umem, Umems},
    CqData, Driver, MrData, QpData,
};

/// The smallest alignment kmalloc() gives (`ARCH_KMALLOC_MINALIGN` is at
/// least that of `unsigned long long`).
const KMALLOC_MIN_ALIGN: usize = 8;

/// A core struct `C` followed by provider data `D`.
#[repr(C)]
pub(crate) struct InCore<C, D> {
    core: Opaque<C>,
    data: D,
}

impl<C, D> InCore<C, D> {
    /// What the provider declares as the object's size.
    pub(super) const SIZE: usize = {
        assert!(offset_of!(InCore<C, D>, core) == 0);
        assert!(core::mem::align_of::<Self>() <= KMALLOC_MIN_ALIGN);
        core::mem::size_of::<Self>()
    };

    /// Constructs the data of the object whose core struct is at `core`.
    ///
    /// # Safety
    ///
    /// `core` is an object of size [`Self::SIZE`] the core allocated for
    /// this type and has not published yet; its data is not initialized.
    pub(super) unsafe fn init(core: *mut C, init: impl PinInit<D, Error>) -> Result {
        let this = core.cast::<Self>();
        // SAFETY: By the function's contract `this` points to an allocation
        // of `SIZE` bytes, aligned for `Self`; the core never moves it, so
        // the data is pinned; it is uninitialized, so nothing is overwritten.
        unsafe { init.__pinned_init(addr_of_mut!((*this).data)) }
    }

    /// Where the data of the object whose core struct is at `core` goes.
    ///
    /// # Safety
    ///
    /// `core` is an object of size [`Self::SIZE`] the core allocated for
    /// this type.
    pub(super) unsafe fn data_ptr(core: *mut C) -> *mut D {
        // SAFETY: In the allocation (the function's contract); no reference
        // is made.
        unsafe { addr_of_mut!((*core.cast::<Self>()).data) }
    }

    /// Drops the data of the object whose core struct is at `core`.
    ///
    /// # Safety
    ///
    /// `core` is an object of this type whose data [`Self::init`]
    /// constructed, and the core is destroying it: no other reference to
    /// it exists, and none is made after this.
    pub(super) unsafe fn drop_data(core: *mut C) {
        let this = core.cast::<Self>();
        // SAFETY: By the function's contract the data is initialized and
        // nobody else uses it; it is never used again.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*this).data)) };
    }

    /// The object whose core struct is at `core`.
    ///
    /// # Safety
    ///
    /// `core` is an object of this type whose data is initialized, and it
    /// is not destroyed for `'a`.
    pub(super) unsafe fn from_core<'a>(core: *mut C) -> &'a Self {
        // SAFETY: By the function's contract.
        unsafe { &*core.cast::<Self>() }
    }

    /// The core's struct, for the core's functions.
    pub(super) fn as_core(&self) -> *mut C {
        self.core.get()
    }

    /// The provider's data.
    pub(crate) fn data(&self) -> &D {
        &self.data
    }
}

/// An ib_device: `struct ib_device`, the layer's part and the provider's
/// data.
///
/// # Invariants
///
/// Allocated by `_ib_alloc_device()` with this type's size; `events`,
/// `umems` and `identity` initialized before the data, the first two
/// dropped by the device's teardown ([`super::device`]); `data` initialized before the device is
/// registered and dropped by `dealloc_driver`. A `&Device<T>` exists only
/// while the data is initialized.
#[repr(C)]
#[pin_data]
pub(crate) struct Device<T: Driver> {
    core: Opaque<bindings::ib_device>,
    pub(super) events: Arc<Events>,
    pub(super) umems: Arc<Umems>,
    /// What sysfs shows of it ([`super::sysfs`]), set before registration.
    pub(super) identity: Identity,
    #[pin]
    pub(super) data: T::Device,
}

impl<T: Driver> Device<T> {
    /// What the provider declares as the device's size.
    pub(super) const SIZE: usize = {
        assert!(offset_of!(Device<T>, core) == 0);
        assert!(offset_of!(Device<T>, identity) == offset_of!(Head, identity));
        assert!(core::mem::align_of::<Self>() <= KMALLOC_MIN_ALIGN);
        core::mem::size_of::<Self>()
    };

    /// # Safety
    ///
    /// `ib` is the `ib_device` of a `Device<T>` whose data is initialized
    /// and not dropped for `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `core` is the first field of the `repr(C)` struct; by the
        // caller's guarantee the rest is initialized.
        unsafe { &*ib.cast::<Self>() }
    }

    pub(crate) fn data(&self) -> &T::Device {
        &self.data
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.core.get()
    }

    pub(super) fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// Pins `len` bytes of the calling process's memory at `addr` with
    /// `access` (`IB_ACCESS_*`) and maps them for the device's DMA
    /// (`ib_umem_get_va()`).
    pub(crate) fn pin_user(&self, addr: u64, len: usize, access: u32) -> Result<Umem> {
        // SAFETY: The device is live (a reference to it exists only while its
        // data is, type invariant), and its memory outlives its umems' table
        // (the teardown releases them before dropping its reference).
        unsafe { Umem::get(self.as_raw(), &self.umems, addr, len, access) }
    }
}

/// A context's data: the device pages it offers to `mmap()`, and the
/// provider's. The create op constructs the provider's first (it fills
/// the table), then moves the table in.
pub(super) struct CtxData<D> {
    pub(super) mmaps: MmapTable,
    pub(super) data: D,
}

/// A verbs context (`struct ib_ucontext` and the provider's).
#[repr(transparent)]
pub(crate) struct UContext<T: Driver>(InCore<bindings::ib_ucontext, CtxData<T::UContext>>);

/// A protection domain.
#[repr(transparent)]
pub(crate) struct Pd<T: Driver>(InCore<bindings::ib_pd, T::Pd>);

/// A completion queue.
#[repr(transparent)]
pub(crate) struct Cq<T: Driver>(InCore<bindings::ib_cq, T::Cq>);

/// A queue pair.
#[repr(transparent)]
pub(crate) struct Qp<T: Driver>(InCore<bindings::ib_qp, T::Qp>);

/// A shared receive queue.
#[repr(transparent)]
pub(crate) struct Srq<T: Driver>(InCore<bindings::ib_srq, T::Srq>);

macro_rules! object {
    ($ty:ident, $core:ty, $data:ty) => {
        impl<T: Driver> $ty<T> {
            pub(super) const SIZE: usize = InCore::<$core, $data>::SIZE;

            /// # Safety
            ///
            /// As [`InCore::from_core`].
            pub(super) unsafe fn from_core<'a>(core: *mut $core) -> &'a Self {
                // SAFETY: By the caller's guarantee.
                let inner = unsafe { InCore::<$core, $data>::from_core(core) };
                // SAFETY: `Self` is `repr(transparent)` over the `InCore`.
                unsafe { &*core::ptr::from_ref(inner).cast::<Self>() }
            }

            pub(super) fn as_core(&self) -> *mut $core {
                self.0.as_core()
            }

            /// The device it belongs to.
            pub(crate) fn device(&self) -> &Device<T> {
                // SAFETY: The core sets `device` before any op sees the
                // object, and the device's data outlives its objects.
                unsafe { Device::from_raw((*self.as_core()).device) }
            }
        }

        // SAFETY: The core struct is used by the core under its own locking;
        // the provider's data is `Send + Sync` (the trait's bounds).
        unsafe impl<T: Driver> Send for $ty<T> {}
        // SAFETY: As above.
        unsafe impl<T: Driver> Sync for $ty<T> {}
    };
}

object!(UContext, bindings::ib_ucontext, CtxData<T::UContext>);
object!(Pd, bindings::ib_pd, T::Pd);
object!(Cq, bindings::ib_cq, T::Cq);
object!(Qp, bindings::ib_qp, T::Qp);
object!(Srq, bindings::ib_srq, T::Srq);

impl<T: Driver> UContext<T> {
    pub(crate) fn data(&self) -> &T::UContext {
        &self.0.data().data
    }
}

impl<T: Driver> Pd<T> {
    pub(crate) fn data(&self) -> &T::Pd {
        self.0.data()
    }
}

impl<T: Driver> Cq<T> {
    pub(crate) fn data(&self) -> &T::Cq {
        self.0.data()
    }

    /// Sets what the core reports as the CQ's size, from its data.
    pub(super) fn publish(&self) {
        let cqe = self.data().cqe();
        // SAFETY: The CQ is being created: the core reads `cqe` only once
        // the create op returned.
        unsafe { (*self.as_core()).cqe = cqe as i32 };
    }

    /// Sets the CQ's size the core reports after a resize, from its data:
    /// `WRITE_ONCE()`, as a resize of the same CQ on another thread may
    /// read it (`ib_uverbs_resize_cq()`'s response, the one reader of a
    /// live user CQ's `cqe`; mlx4_ib stores it plainly).
    pub(super) fn republish(&self) {
        let cqe = self.data().cqe() as i32;
        // SAFETY: The field of a live CQ, aligned; every write of it after
        // creation is this atomic store.
        unsafe { Atomic::from_ptr(&raw mut (*self.as_core()).cqe) }.store(cqe, Relaxed);
    }
}

impl<T: Driver> Srq<T> {
    pub(crate) fn data(&self) -> &T::Srq {
        self.0.data()
    }
}

impl<T: Driver> Qp<T> {
    pub(crate) fn data(&self) -> &T::Qp {
        self.0.data()
    }

    /// Sets the QP's number, from its data.
    pub(super) fn publish(&self) {
        let qpn = self.data().qp_num();
        // SAFETY: The QP is being created: the core reads `qp_num` only once
        // the create op returned.
        unsafe { (*self.as_core()).qp_num = qpn };
    }

    #[allow(dead_code, reason = "for methods on a QP (`method::QpObject`)")]
    /// The QP a uverbs handle's object is, if it is one the provider made.
    ///
    /// # Safety
    ///
    /// `obj` is the object of a live QP uobject of a device of `T`, not
    /// destroyed for `'a`.
    pub(super) unsafe fn from_uobject<'a>(obj: *mut bindings::ib_qp) -> Result<&'a Self> {
        // SAFETY: A live `struct ib_qp` (the contract). An XRC target QP
        // opened by `ib_open_qp()` is the core's own small struct pointing
        // at the real one: only a QP that is its own `real_qp` was made by
        // the create op, with room for the provider's data.
        if unsafe { (*obj).real_qp } != obj {
            return Err(EINVAL);
        }
        // SAFETY: Made by `T`'s create op (above), live for `'a`.
        Ok(unsafe { Self::from_core(obj) })
    }
}

/// A memory region: `struct ib_mr` and the provider's data, allocated by
/// this layer when the provider registers one.
#[repr(C)]
#[pin_data]
pub(crate) struct Mr<T: Driver> {
    core: Opaque<bindings::ib_mr>,
    #[pin]
    data: T::Mr,
    _t: PhantomData<T>,
}

impl<T: Driver> Mr<T> {
    /// The region `init` makes, with its keys in the core's struct.
    pub(super) fn new(init: impl PinInit<T::Mr, Error>) -> Result<Pin<KBox<Self>>> {
        let mr = KBox::try_pin_init(
            try_pin_init!(Self {
                core: Opaque::zeroed(),
                data <- init,
                _t: PhantomData,
            }),
            GFP_KERNEL,
        )?;
        let core = mr.core.get();
        // SAFETY: The region is not published yet: nobody else reads it.
        unsafe {
            (*core).lkey = mr.data.lkey();
            (*core).rkey = mr.data.rkey();
        }
        Ok(mr)
    }

    /// The region `mr` is, a `struct ib_mr` this layer made.
    ///
    /// # Safety
    ///
    /// `mr` is the `ib_mr` of a region [`Mr::new`] made for `T` (boxed,
    /// its first field), not deregistered for `'a`.
    pub(super) unsafe fn from_core<'a>(mr: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: The first field of a live `Mr<T>` (`repr(C)`, the contract).
        unsafe { &*mr.cast::<Self>() }
    }

    pub(crate) fn data(&self) -> &T::Mr {
        &self.data
    }
}

// SAFETY: As the core-allocated objects.
unsafe impl<T: Driver> Send for Mr<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for Mr<T> {}
