// SPDX-License-Identifier: GPL-2.0

//! A provider's uverbs definitions: the C chain its methods' descriptions
//! are in, with the Rust declarations [`Definitions::check`] holds them to.

use core::marker::PhantomData;
use kernel::{bindings, prelude::*};

use super::{Method, MethodDesc};
use crate::rdma::Driver;

/// A provider's chain of uverbs definitions (`ib_device.driver_def`): an
/// array the `UAPI_DEF_CHAIN_OBJ_TREE()` and related macros build in C,
/// ended by an empty entry, and the Rust declarations of its methods.
/// Made by [`uapi_definitions!`].
pub(crate) struct Definitions<T: Driver> {
    raw: *const bindings::uapi_definition,
    methods: &'static [&'static MethodDesc],
    _t: PhantomData<T>,
}

// SAFETY: A pointer to a static, constant array, read only.
unsafe impl<T: Driver> Sync for Definitions<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Send for Definitions<T> {}

impl<T: Driver> Definitions<T> {
    /// # Safety
    ///
    /// `defs` is a static array of `struct uapi_definition` built with the
    /// core's macros and ended by an empty entry.
    #[doc(hidden)]
    pub(crate) const unsafe fn new(
        defs: *const bindings::uapi_definition,
        methods: &'static [&'static MethodDesc],
    ) -> Self {
        Definitions {
            raw: defs,
            methods,
            _t: PhantomData,
        }
    }

    /// The declaration of method `M` of `T`, for [`uapi_definitions!`].
    #[doc(hidden)]
    pub(crate) const fn desc<M: Method<Driver = T>>() -> &'static MethodDesc {
        &M::DESC
    }

    /// `EINVAL` (with the reason logged) unless every method of the C
    /// description whose handler is one of the Rust declarations is that
    /// declaration, and every declaration is described.
    pub(in crate::rdma) fn check(&self) -> Result {
        // SAFETY: `raw` is such an array (`new()`'s contract).
        unsafe { super::check::check(self.raw, self.methods) }
    }

    pub(in crate::rdma) fn as_raw(&self) -> *const bindings::uapi_definition {
        self.raw
    }
}

/// Names the C array `$defs` of uverbs definitions, whose methods are
/// `$method`s, as a [`Definitions`] static `$name` of `$driver`, for
/// [`crate::rdma::device::DeviceInfo::driver_def`].
macro_rules! uapi_definitions {
    ($vis:vis $name:ident: $driver:ty = $defs:ident [$($method:ty),* $(,)?]) => {
        extern "C" {
            static $defs: ::kernel::bindings::uapi_definition;
        }
        $vis static $name: $crate::rdma::method::Definitions<$driver> =
            // SAFETY: `$defs` is the array the provider's C file builds with
            // the core's macros, ended by an empty entry.
            unsafe {
                $crate::rdma::method::Definitions::new(
                    &raw const $defs,
                    &[$($crate::rdma::method::Definitions::<$driver>::desc::<$method>()),*],
                )
            };
    };
}
pub(crate) use uapi_definitions;
