// SPDX-License-Identifier: GPL-2.0

//! Driver-specific uverbs methods (`include/rdma/uverbs_ioctl.h`): calls
//! on an object of the verbs context's command file, in the driver's name
//! space (`1 << UVERBS_ID_NS_SHIFT`), as mlx5's DEVX and EFA's MR query are.
//!
//! The method's description (its attributes, their kinds and sizes, the
//! object it acts on) is a tree of static tables that the core's macros
//! build in C; the provider keeps them in a small C file, registers the
//! chain with [`Definitions`], and writes the handler in Rust with
//! [`uverbs_handler!`]. The core has checked every attribute against the
//! description before the handler runs, found the objects named by handle
//! in the caller's file and locked them for the call; the handler reads
//! and writes the attributes through [`Bundle`].

use core::marker::PhantomData;
use kernel::{bindings, error::from_err_ptr, prelude::*, transmute::AsBytes};

use super::{
    object::{Qp, UContext},
    Driver,
};

/// A provider's chain of uverbs definitions (`ib_device.driver_def`): an
/// array the `UAPI_DEF_CHAIN_OBJ_TREE()` and related macros build in C,
/// ended by an empty entry. Made by [`uapi_definitions!`].
pub(crate) struct Definitions(*const bindings::uapi_definition);

// SAFETY: A pointer to a static, constant array, read only by the core.
unsafe impl Sync for Definitions {}
// SAFETY: As above.
unsafe impl Send for Definitions {}

impl Definitions {
    /// # Safety
    ///
    /// `defs` is a static array of `struct uapi_definition` built with the
    /// core's macros and ended by an empty entry; the handlers it names take
    /// a [`Bundle`] of a device of the provider that registers it.
    pub(crate) const unsafe fn new(defs: *const bindings::uapi_definition) -> Self {
        Definitions(defs)
    }

    pub(super) fn as_raw(&self) -> *const bindings::uapi_definition {
        self.0
    }
}

/// Names the C array `$defs` of uverbs definitions as a [`Definitions`]
/// static `$name`, for [`super::device::DeviceInfo::driver_def`].
macro_rules! uapi_definitions {
    ($vis:vis $name:ident, $defs:ident) => {
        extern "C" {
            static $defs: ::kernel::bindings::uapi_definition;
        }
        $vis static $name: $crate::rdma::method::Definitions =
            // SAFETY: `$defs` is the array the provider's C file builds with
            // the core's macros for this provider's handlers.
            unsafe { $crate::rdma::method::Definitions::new(&raw const $defs) };
    };
}
pub(crate) use uapi_definitions;

/// Defines `$name`, the C-callable handler of a method of `$driver`'s
/// definitions, which runs `$f(&Bundle<'_, $driver>) -> Result` and returns
/// its errno to the core.
macro_rules! uverbs_handler {
    ($name:ident, $driver:ty, $f:path) => {
        #[no_mangle]
        extern "C" fn $name(
            attrs: *mut ::kernel::bindings::uverbs_attr_bundle,
        ) -> ::kernel::ffi::c_int {
            // SAFETY: The core calls a method's handler with the call's
            // bundle, on a file of a device of `$driver`, whose definitions
            // alone name this handler.
            let bundle = unsafe { $crate::rdma::method::Bundle::<$driver>::from_raw(attrs) };
            match $f(&bundle) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            }
        }
    };
}
pub(crate) use uverbs_handler;

/// The attributes of one call of a method, checked by the core against the
/// method's description.
///
/// # Invariants
///
/// `raw` is the bundle of a call in progress of a method of a device of
/// `T`; the core holds the device's disassociation SRCU and the objects
/// the call names for `'a`.
pub(crate) struct Bundle<'a, T: Driver> {
    raw: *mut bindings::uverbs_attr_bundle,
    _t: PhantomData<(&'a (), T)>,
}

impl<'a, T: Driver> Bundle<'a, T> {
    /// # Safety
    ///
    /// `raw` is the bundle the core passed to a handler of a method of a
    /// device of `T`, and the returned value does not outlive the call.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::uverbs_attr_bundle) -> Self {
        // INVARIANT: By the caller's guarantee.
        Bundle {
            raw,
            _t: PhantomData,
        }
    }

    /// The verbs context of the file the call came on; `EIO` once the
    /// device is gone (disassociated).
    pub(crate) fn ucontext(&self) -> Result<&'a UContext<T>> {
        // SAFETY: `raw` is live and the SRCU is held (type invariant), as
        // `ib_uverbs_get_ucontext_file()` requires (what the inline
        // `ib_uverbs_get_ucontext()` calls). `hdr` is the `struct_group()`
        // of the bundle's fixed fields, which the core initialized.
        let ctx = from_err_ptr(unsafe {
            bindings::ib_uverbs_get_ucontext_file((*self.raw).__bindgen_anon_1.hdr.ufile)
        })?;
        // SAFETY: A context of a device of `T`, set up by its create op
        // before the file could make calls, and not destroyed while the
        // SRCU is held.
        Ok(unsafe { UContext::from_core(ctx) })
    }

    /// The QP attribute `id` names: one of the file's, its handle looked up
    /// and the QP locked for the call by the core.
    pub(crate) fn qp(&self, id: u16) -> Result<&'a Qp<T>> {
        // SAFETY: `raw` is live (type invariant).
        let obj = from_err_ptr(unsafe { bindings::uverbs_attr_get_obj(self.raw, id) })?;
        // SAFETY: The method's description makes `id` an IDR attribute of
        // UVERBS_OBJECT_QP: its object is a `struct ib_qp` of this device,
        // made by `T`'s create op, and locked against destruction for the
        // call (type invariant).
        Ok(unsafe { Qp::from_core(obj.cast()) })
    }

    /// Was the optional attribute `id` given?
    pub(crate) fn has(&self, id: u16) -> bool {
        // SAFETY: `raw` is live (type invariant).
        unsafe { bindings::uverbs_attr_is_valid(self.raw, id.into()) }
    }

    /// The flags attribute `id` (`UVERBS_ATTR_FLAGS_IN`), 0 if not given;
    /// `EINVAL` if it has a bit outside `allowed`.
    pub(crate) fn flags32(&self, id: u16, allowed: u32) -> Result<u32> {
        let mut flags = 0u32;
        // SAFETY: `raw` is live (type invariant); `flags` is a `u32`.
        kernel::error::to_result(unsafe {
            bindings::uverbs_get_flags32(&mut flags, self.raw, id.into(), allowed.into())
        })?;
        Ok(flags)
    }

    /// Copies the input attribute `id` into the start of `buf`; returns its
    /// length. `EINVAL` if it is longer than `buf`, `EFAULT` if user memory
    /// could not be read.
    pub(crate) fn read_into(&self, id: u16, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `raw` is live (type invariant).
        let len = unsafe { bindings::uverbs_attr_get_len(self.raw, id) };
        let len = usize::try_from(len).map_err(|_| Error::from_errno(len))?;
        if len > buf.len() {
            return Err(EINVAL);
        }
        // SAFETY: `buf` is writable for `buf.len()` bytes, at least the
        // attribute's length, which is what `_uverbs_copy_from()` copies.
        kernel::error::to_result(unsafe {
            bindings::_uverbs_copy_from(buf.as_mut_ptr().cast(), self.raw, id.into(), buf.len())
        })?;
        Ok(len)
    }

    /// Writes `value` to the output attribute `id` (`uverbs_copy_to()`: at
    /// most the length user space gave, which the description bounds).
    pub(crate) fn write<V: AsBytes>(&self, id: u16, value: &V) -> Result {
        // SAFETY: `raw` is live (type invariant); `value` is readable for its
        // size and has no padding (`AsBytes`).
        kernel::error::to_result(unsafe {
            bindings::uverbs_copy_to(
                self.raw,
                id.into(),
                core::ptr::from_ref(value).cast(),
                core::mem::size_of::<V>(),
            )
        })
    }
}
